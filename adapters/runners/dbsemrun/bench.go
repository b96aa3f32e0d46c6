package dbsemrun

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/dbsem"
)

// leaseBench is bench --kind db-semaphore: the database semaphore's
// reference (dbsem) on a real MariaDB, through a counting proxy, beside
// floors: the statements each operation of the design needs, sent raw on
// one connection through the same proxy, with no lock library.
type leaseBench struct {
	ctx    context.Context
	run    *bench.Run
	o      Options
	stderr io.Writer
	proxy  *mariadb.Proxy
	db     *sql.DB // through the proxy
	sem    *dbsem.Semaphore
	prefix string
	ttl    time.Duration
}

// The lease bench's series: the reference's operations and their floors.
const (
	lbAcquire, lbFull, lbRefresh, lbRelease = "acquire", "acquire-full", "refresh", "release"
	lfAcquire, lfFull, lfRefresh, lfRelease = "F1", "F2", "F3", "F4"
)

// benchTTL is every lease's: longer than a bench lasts, so that the lease
// keeping key "full" full outlives it (on a machine at a load of 30, 1 + 5
// iterations took over a minute, and acquire-full got a slot).
const benchTTL = 15 * time.Minute

// Bench measures the reference (dbsem, with options o) on the MariaDB dsn
// names, through a counting proxy, beside floors, and writes the tables to
// out; its tables are dropped however it ends. An error that is a
// *PreflightError means the database cannot be used; an interrupted run's
// error wraps ctx's.
func Bench(ctx context.Context, dsn string, o Options, c bench.Config, out io.Writer) error {
	t := MariaDB{DSN: dsn}
	if err := t.Preflight(ctx); err != nil {
		return &PreflightError{err}
	}
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return &PreflightError{fmt.Errorf("--dsn: %w", err)}
	}
	px, err := mariadb.Listen(cfg.Addr)
	if err != nil {
		return err
	}
	defer px.Close()
	conn, err := driver.NewConnector(px.Config(cfg))
	if err != nil {
		return err
	}
	b := &leaseBench{ctx: ctx, run: bench.New(c), o: o, stderr: c.Log, proxy: px, db: sql.OpenDB(conn),
		prefix: fmt.Sprintf("lpb%08x_", mrand.Uint32()), ttl: benchTTL}
	defer b.db.Close()
	err = b.measure()
	b.drop()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; its tables are dropped: %w", ctx.Err())
	}
	if err != nil {
		return err
	}
	b.report(out, t.String())
	return nil
}

// A PreflightError is a database that cannot be used, found before
// anything is measured.
type PreflightError struct{ Err error }

func (e *PreflightError) Error() string { return e.Err.Error() }
func (e *PreflightError) Unwrap() error { return e.Err }

// run opens the semaphore and measures each operation and its floor, in a
// fresh random order each iteration.
func (b *leaseBench) measure() error {
	o := dbsem.Options{Prefix: b.prefix, Fencing: b.o.Fencing}
	if b.o.Design == "row-per-slot" {
		o.Design = dbsem.RowPerSlot
	}
	var err error
	if b.sem, err = dbsem.Open(b.ctx, b.db, o); err != nil {
		return err
	}
	holder, err := b.sem.Acquire(b.ctx, "full", b.ttl, 1) // keeps key "full" full
	if err != nil {
		return err
	}
	defer b.sem.Release(context.Background(), "full", holder.Token)
	// The floor's own keys, set up as the reference sets a key up.
	for _, key := range []string{"floor", "floor-full"} {
		if l, err := b.sem.Acquire(b.ctx, key, b.ttl, 1); err != nil {
			return err
		} else if key == "floor" {
			b.sem.Release(b.ctx, key, l.Token)
		}
	}
	return b.run.Loop(b.ctx, designName(b.o), b.acquire, b.full, b.refresh, b.release, b.floorAcquire, b.floorFull, b.floorRefreshRelease)
}

// time runs f as one measured operation of series key: its latency and
// the statements the proxy saw it send.
func (b *leaseBench) time(key string, f func() error) error {
	before := b.proxy.Counts()
	return b.run.Time(key, f, func() map[string]int { return b.proxy.Counts().Sub(before).Statements })
}

// acquire: a free key's acquire (then, untimed, its release).
func (b *leaseBench) acquire() error {
	var l dbsem.Lease
	if err := b.time(lbAcquire, func() (err error) { l, err = b.sem.Acquire(b.ctx, "k", b.ttl, 1); return }); err != nil {
		return err
	}
	return b.sem.Release(b.ctx, "k", l.Token)
}

// full: an acquire of a key another holds (max 1): ErrFull.
func (b *leaseBench) full() error {
	return b.time(lbFull, func() error {
		_, err := b.sem.Acquire(b.ctx, "full", b.ttl, 1)
		if errors.Is(err, dbsem.ErrFull) {
			return nil
		}
		return fmt.Errorf("want full, got %v", err)
	})
}

// refresh and release of a live lease (acquired untimed).
func (b *leaseBench) refresh() error {
	l, err := b.sem.Acquire(b.ctx, "r", b.ttl, 1)
	if err != nil {
		return err
	}
	if err := b.time(lbRefresh, func() error { return b.sem.Refresh(b.ctx, "r", l.Token, b.ttl) }); err != nil {
		return err
	}
	return b.sem.Release(b.ctx, "r", l.Token)
}

func (b *leaseBench) release() error {
	l, err := b.sem.Acquire(b.ctx, "d", b.ttl, 1)
	if err != nil {
		return err
	}
	return b.time(lbRelease, func() error { return b.sem.Release(b.ctx, "d", l.Token) })
}

// drop drops the bench's tables, with a context of its own.
func (b *leaseBench) drop() {
	if b.sem == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.sem.Drop(ctx); err != nil {
		fmt.Fprintf(b.stderr, "bench: cleanup: %v (tables %s* may be left)\n", err, b.prefix)
	}
}

// report prints the table: each operation beside its floor.
func (b *leaseBench) report(w io.Writer, where string) {
	fmt.Fprintf(w, "lockprover bench --kind db-semaphore: %s through a counting proxy; %s; %d iterations after %d warm-up; seed %d; table prefix %s\n\n",
		where, designName(b.o), b.run.N, b.run.Warmup, b.run.Seed, b.prefix)
	fmt.Fprintln(w, "| operation | p50 | p99 | mean | statements/op | floor (p50) | ratio |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --- | --- | --: |")
	for _, r := range [][3]string{
		{"acquire, key free", lbAcquire, lfAcquire},
		{"acquire, key full", lbFull, lfFull},
		{"refresh, lease live", lbRefresh, lfRefresh},
		{"release, lease live", lbRelease, lfRelease},
	} {
		s, f := b.run.Stats(r[1]), b.run.Stats(r[2])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s: %s | %.2fx |\n", r[0], bench.US(s.P50), bench.US(s.P99), bench.US(s.Mean), s.Sent, r[2], bench.US(f.P50), bench.Ratio(s.P50, f.P50))
	}
	fmt.Fprintln(w, "\nFloors: the statements the design needs, sent raw on one connection through the same proxy, no lock library:")
	fmt.Fprintln(w, "\n| floor | what | p50 | p99 | statements/op |")
	fmt.Fprintln(w, "| --- | --- | --: | --: | --- |")
	for _, f := range b.floors() {
		s := b.run.Stats(f[0])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", f[0], f[1], bench.US(s.P50), bench.US(s.P99), s.Sent)
	}
}

// designName names the options' design, for the report.
func designName(o Options) string {
	if o.Fencing {
		return designOf(o) + ", fencing"
	}
	return designOf(o)
}

// The floors of bench --kind db-semaphore: what each operation of the
// design must send, raw, with no lock library: no agreement on the key's
// max, no token made in Go, one connection held throughout. {p} is the
// table prefix.
var leaseFloorSQL = map[string]floorStatements{
	"master-row": {
		lock:    "SELECT max_count FROM `{p}keys` WHERE lock_key = ? FOR UPDATE",
		expire:  "DELETE FROM `{p}tokens` WHERE lock_key = ? AND expires <= UTC_TIMESTAMP(6)",
		count:   "SELECT COUNT(*) FROM `{p}tokens` WHERE lock_key = ? AND expires > UTC_TIMESTAMP(6)",
		take:    "INSERT INTO `{p}tokens` (lock_key, token, expires) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL 60 SECOND)",
		refresh: "UPDATE `{p}tokens` SET expires = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE lock_key = ? AND token = ? AND expires > UTC_TIMESTAMP(6)",
		release: "DELETE FROM `{p}tokens` WHERE lock_key = ? AND token = ? AND expires > UTC_TIMESTAMP(6)",
	},
	"row-per-slot": {
		lock:    "SELECT lock_num FROM `{p}slots` WHERE lock_key = ? AND (token IS NULL OR expires <= UTC_TIMESTAMP(6)) ORDER BY lock_num LIMIT 1 FOR UPDATE SKIP LOCKED",
		take:    "UPDATE `{p}slots` SET token = ?, expires = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE lock_key = ? AND lock_num = 0",
		refresh: "UPDATE `{p}slots` SET expires = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE lock_key = ? AND lock_num = 0 AND token = ? AND expires > UTC_TIMESTAMP(6)",
		release: "UPDATE `{p}slots` SET token = NULL, expires = NULL WHERE lock_key = ? AND lock_num = 0 AND token = ? AND expires > UTC_TIMESTAMP(6)",
	},
}

// floorStatements are a design's floor statements.
type floorStatements struct{ lock, expire, count, take, refresh, release string }

// fenceSQL takes the next fence of a key, for fencing.
const fenceSQL = "UPDATE `{p}keys` SET fence = LAST_INSERT_ID(fence + 1) WHERE lock_key = ?"

// stmts are the design's floor statements, with the bench's prefix.
func (b *leaseBench) stmts() floorStatements {
	s := leaseFloorSQL[designOf(b.o)]
	r := strings.NewReplacer("{p}", b.prefix)
	return floorStatements{r.Replace(s.lock), r.Replace(s.expire), r.Replace(s.count), r.Replace(s.take), r.Replace(s.refresh), r.Replace(s.release)}
}

// designOf is the options' design.
func designOf(o Options) string {
	if o.Design == "row-per-slot" {
		return "row-per-slot"
	}
	return "master-row"
}

// floorGrant is the design's grant on key, in a READ COMMITTED
// transaction: lock (the master row, or a free slot row), delete the
// expired leases and count the live ones (master-row), take the next fence
// (fencing), take one; false when the key is full.
func (b *leaseBench) floorGrant(key, token string) (bool, error) {
	tx, err := b.db.BeginTx(b.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var n int
	err = tx.QueryRowContext(b.ctx, b.stmts().lock, key).Scan(&n)
	if designOf(b.o) == "row-per-slot" {
		if errors.Is(err, sql.ErrNoRows) {
			return false, tx.Commit()
		}
		if err != nil {
			return false, err
		}
		if err := b.floorFence(tx, key); err != nil {
			return false, err
		}
		_, err = tx.ExecContext(b.ctx, b.stmts().take, token, key)
		return err == nil, errors.Join(err, tx.Commit())
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(b.ctx, b.stmts().expire, key); err != nil {
		return false, err
	}
	var live int
	if err := tx.QueryRowContext(b.ctx, b.stmts().count, key).Scan(&live); err != nil {
		return false, err
	}
	if live >= n {
		return false, tx.Commit()
	}
	if err := b.floorFence(tx, key); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(b.ctx, b.stmts().take, key, token); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// floorFence takes key's next fence, with fencing.
func (b *leaseBench) floorFence(tx *sql.Tx, key string) error {
	if !b.o.Fencing {
		return nil
	}
	_, err := tx.ExecContext(b.ctx, strings.ReplaceAll(fenceSQL, "{p}", b.prefix), key)
	return err
}

// floorChange is the design's refresh or release of token on key, one
// autocommit statement that must change one row.
func (b *leaseBench) floorChange(q, key, token string) error {
	res, err := b.db.ExecContext(b.ctx, q, key, token)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("the floor's statement changed %d rows, want 1", n)
	}
	return nil
}

// floorAcquire (F1): the grant on the free key "floor", then, untimed,
// its release.
func (b *leaseBench) floorAcquire() error {
	if err := b.time(lfAcquire, func() error {
		ok, err := b.floorGrant("floor", "floor-token")
		if err == nil && !ok {
			err = errors.New("the floor's key was full")
		}
		return err
	}); err != nil {
		return err
	}
	return b.floorChange(b.stmts().release, "floor", "floor-token")
}

// floorFull (F2): the grant on "floor-full", which the reference holds.
func (b *leaseBench) floorFull() error {
	return b.time(lfFull, func() error {
		ok, err := b.floorGrant("floor-full", "floor-token")
		if err == nil && ok {
			err = errors.New("the floor's full key granted a lease")
		}
		return err
	})
}

// floorRefreshRelease (F3, F4): a refresh and a release of a live lease of
// the floor's own (granted untimed).
func (b *leaseBench) floorRefreshRelease() error {
	if _, err := b.floorGrant("floor", "floor-token"); err != nil {
		return err
	}
	if err := b.time(lfRefresh, func() error {
		return b.floorChange(b.stmts().refresh, "floor", "floor-token")
	}); err != nil {
		return err
	}
	return b.time(lfRelease, func() error {
		return b.floorChange(b.stmts().release, "floor", "floor-token")
	})
}

// floors describes the floors, for the report.
func (b *leaseBench) floors() [][2]string {
	if designOf(b.o) == "row-per-slot" {
		return [][2]string{
			{lfAcquire, "BEGIN (READ COMMITTED), SELECT a free slot FOR UPDATE SKIP LOCKED, (fencing: UPDATE the key's fence), UPDATE the slot, COMMIT"},
			{lfFull, "BEGIN, SELECT a free slot FOR UPDATE SKIP LOCKED (none), COMMIT"},
			{lfRefresh, "one UPDATE of the live slot row's deadline"},
			{lfRelease, "one UPDATE emptying the live slot row"},
		}
	}
	return [][2]string{
		{lfAcquire, "BEGIN (READ COMMITTED), SELECT the master row FOR UPDATE, DELETE the expired tokens, COUNT the live ones, (fencing: UPDATE the key's fence), INSERT one, COMMIT"},
		{lfFull, "BEGIN, SELECT the master row FOR UPDATE, DELETE the expired tokens, COUNT the live ones (max), COMMIT"},
		{lfRefresh, "one UPDATE of the live token row's deadline"},
		{lfRelease, "one DELETE of the live token row"},
	}
}
