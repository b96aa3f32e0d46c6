package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/mysql"
	"github.com/lockprover/lockprover/dbsem"
	"github.com/lockprover/lockprover/families/dbsemaphore"
)

// leaseBench is bench --kind db-semaphore: the database semaphore's
// reference (dbsem) on a real MariaDB, through a counting proxy, beside
// floors: the statements each operation of the design needs, sent raw on
// one connection through the same proxy, with no lock library.
type leaseBench struct {
	ctx       context.Context
	n, warmup int
	o         dbsemaphore.Options
	stderr    io.Writer
	proxy     *mysql.Proxy
	db        *sql.DB // through the proxy
	sem       *dbsem.Semaphore
	prefix    string
	record    bool
	rnd       *mrand.Rand
	series    map[string]*series
	ttl       time.Duration
	seed      uint64
}

// The lease bench's series: the reference's operations and their floors.
const (
	lbAcquire, lbFull, lbRefresh, lbRelease = "acquire", "acquire-full", "refresh", "release"
	lfAcquire, lfFull, lfRefresh, lfRelease = "F1", "F2", "F3", "F4"
)

// runLeaseBench measures the reference of the database semaphore; dsn
// names the server, o the design.
func runLeaseBench(ctx context.Context, bc benchConfig, stdout, stderr io.Writer) int {
	dsn := bc.dsn
	t := dbsemaphore.MariaDB{DSN: dsn}
	if err := t.Preflight(ctx); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		fmt.Fprintf(stderr, "bench: --dsn: %v\n", err)
		return exitUsage
	}
	px, err := mysql.Listen(cfg.Addr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	defer px.Close()
	conn, err := driver.NewConnector(px.Config(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	b := &leaseBench{ctx: ctx, n: bc.n, warmup: bc.warmup, o: bc.lease, rnd: mrand.New(mrand.NewPCG(bc.seed, 0)), stderr: stderr, proxy: px, db: sql.OpenDB(conn),
		prefix: fmt.Sprintf("lpb%08x_", mrand.Uint32()), series: map[string]*series{}, ttl: time.Minute, seed: bc.seed}
	defer b.db.Close()
	err = b.run()
	b.drop()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted; its tables are dropped")
		return exitInterrupted
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	b.report(stdout, t.String())
	return exitOK
}

// run opens the semaphore and measures each operation and its floor, in a
// fresh random order each iteration.
func (b *leaseBench) run() error {
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
	fmt.Fprintf(b.stderr, "bench: %s (%d + %d iterations)\n", designName(b.o), b.warmup, b.n)
	steps := []func() error{b.acquire, b.full, b.refresh, b.release, b.floorAcquire, b.floorFull, b.floorRefreshRelease}
	for i := range b.warmup + b.n {
		b.record = i >= b.warmup
		for _, j := range b.rnd.Perm(len(steps)) {
			if err := b.ctx.Err(); err != nil {
				return err
			}
			if err := steps[j](); err != nil {
				return err
			}
		}
	}
	return nil
}

// time runs f as one measured operation of series key: its latency and
// the statements the proxy saw it send.
func (b *leaseBench) time(key string, f func() error) error {
	before := b.proxy.Counts()
	return measure(b.series, b.record, key, f, func() map[string]int { return b.proxy.Counts().Sub(before).Statements })
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
		where, designName(b.o), b.n, b.warmup, b.seed, b.prefix)
	fmt.Fprintln(w, "| operation | p50 | p99 | mean | statements/op | floor (p50) | ratio |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --- | --- | --: |")
	for _, r := range [][3]string{
		{"acquire, key free", lbAcquire, lfAcquire},
		{"acquire, key full", lbFull, lfFull},
		{"refresh, lease live", lbRefresh, lfRefresh},
		{"release, lease live", lbRelease, lfRelease},
	} {
		s, f := seriesStats(b.series[r[1]]), seriesStats(b.series[r[2]])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s: %s | %.2fx |\n", r[0], us(s.p50), us(s.p99), us(s.mean), s.methods, r[2], us(f.p50), ratio(s.p50, f.p50))
	}
	fmt.Fprintln(w, "\nFloors: the statements the design needs, sent raw on one connection through the same proxy, no lock library:")
	fmt.Fprintln(w, "\n| floor | what | p50 | p99 | statements/op |")
	fmt.Fprintln(w, "| --- | --- | --: | --: | --- |")
	for _, f := range b.floors() {
		s := seriesStats(b.series[f[0]])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", f[0], f[1], us(s.p50), us(s.p99), s.methods)
	}
}

// designName names the options' design, for the report.
func designName(o dbsemaphore.Options) string {
	if o.Fencing {
		return designOf(o) + ", fencing"
	}
	return designOf(o)
}
