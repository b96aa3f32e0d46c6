package conform

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
)

// The sequence on MariaDB: a connection of its own per connection of the
// sequence, and a monitor connection that reads SHOW ENGINE INNODB
// STATUS, kills the sequence's own connections if it is stuck, and drops
// its tables.

// ErrNoMariaDB is wrapped by the error of a differential that cannot use
// its MariaDB (nothing answers, or it cannot run the sequences).
var ErrNoMariaDB = errors.New("conform: no usable MariaDB")

const (
	// dbSeqTimeout bounds one sequence on MariaDB.
	dbSeqTimeout = time.Minute
	// dbConfirm is how long waiting statements must stay waiting to be
	// taken as settled: a wait shows in SHOW ENGINE INNODB STATUS a moment
	// before its deadlock check runs, and SKIP LOCKED shows one now and
	// then.
	dbConfirm = 10 * time.Millisecond
)

// mariaServer is the MariaDB of one differential run.
type mariaServer struct {
	db      *sql.DB
	dbName  string
	mon     *sql.Conn
	prefix  string // every table of the run starts with it
	n       int    // sequences given a prefix so far
	version string
}

// mariaDSN is dsn, or $LOCKPROVER_MYSQL_DSN, or mariadb.DefaultDSN.
func mariaDSN(dsn string) string {
	if dsn == "" {
		dsn = os.Getenv("LOCKPROVER_MYSQL_DSN")
	}
	if dsn == "" {
		dsn = mariadb.DefaultDSN
	}
	return dsn
}

// openMaria connects to the MariaDB dsn names and checks that it can run
// sequences: InnoDB, deadlock detection on, SHOW ENGINE INNODB STATUS
// allowed.
func openMaria(ctx context.Context, dsn string) (*mariaServer, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: DSN: %v", ErrNoMariaDB, err)
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%w: the DSN %q names no database", ErrNoMariaDB, redactDSN(cfg))
	}
	// go-sql-driver/mysql logs a connection it finds closed; the runs kill
	// their own connections only when stuck, and say so.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoMariaDB, err)
	}
	t := &mariaServer{db: sql.OpenDB(c), dbName: cfg.DBName}
	// Each sequence opens its connections afresh: none is reused with a
	// session another sequence left behind.
	t.db.SetMaxIdleConns(0)
	var b [4]byte
	rand.Read(b[:])
	t.prefix = fmt.Sprintf("lpdb_%x_", b)
	fail := func(err error) (*mariaServer, error) {
		t.db.Close()
		if e := ended(ctx); e != nil {
			// The caller's deadline or interrupt, not MariaDB: say so.
			return nil, fmt.Errorf("interrupted before MariaDB at %s answered (%v): %w", redactDSN(cfg), err, e)
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrNoMariaDB, redactDSN(cfg), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if t.mon, err = t.db.Conn(pctx); err != nil {
		return fail(err)
	}
	var detect int
	if err := t.mon.QueryRowContext(pctx, "SELECT VERSION(), @@innodb_deadlock_detect").Scan(&t.version, &detect); err != nil {
		return fail(err)
	}
	if detect == 0 {
		return fail(errors.New("innodb_deadlock_detect is OFF: deadlocks would end only in lock wait timeouts"))
	}
	if _, err := t.lockWaits(pctx); err != nil {
		return fail(err)
	}
	return t, nil
}

func redactDSN(cfg *mysql.Config) string {
	c := cfg.Clone()
	if c.Passwd != "" {
		c.Passwd = "xxx"
	}
	return c.FormatDSN()
}

// nextPrefix is the table prefix of the next sequence.
func (t *mariaServer) nextPrefix() string {
	t.n++
	return t.prefix + strconv.Itoa(t.n) + "_"
}

// close drops every table of the run that is left (none should be) and
// closes the connections; it fails if a table remains.
func (t *mariaServer) close() error {
	defer t.db.Close()
	defer t.mon.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := t.tables(ctx)
	if err != nil {
		return fmt.Errorf("%w: cleanup: %v", ErrHarness, err)
	}
	for _, name := range left {
		if _, err := t.mon.ExecContext(ctx, "DROP TABLE IF EXISTS `"+name+"`"); err != nil {
			return fmt.Errorf("%w: cleanup: %v", ErrHarness, err)
		}
	}
	if left, err = t.tables(ctx); err != nil || len(left) > 0 {
		return fmt.Errorf("%w: cleanup: tables %v remain (%v)", ErrHarness, left, err)
	}
	return nil
}

// tables lists the run's tables in the database.
func (t *mariaServer) tables(ctx context.Context) ([]string, error) {
	like := strings.ReplaceAll(t.prefix, "_", `\_`) + "%"
	rs, err := t.mon.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", like)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var name string
		if err := rs.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rs.Err()
}

// monitorContext is the context of a statement on the monitor
// connection: never the run's, whose end would make the driver close the
// connection that is to clean up after the run.
func monitorContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// lockWaits returns the connection ids whose transactions wait for a
// lock, with the table of each lock.
func (t *mariaServer) lockWaits(ctx context.Context) (map[int64]string, error) {
	return mariadb.LockWaits(ctx, t.mon)
}

// run runs seq on MariaDB with tables prefixed prefix, and drops them
// afterwards whatever happens. An error wraps ErrHarness: the run proves
// nothing either way.
func (t *mariaServer) run(ctx context.Context, seq DBSeq, prefix string) (steps []DBStep, err error) {
	steps, _, err = t.runRacy(ctx, seq, prefix)
	return steps, err
}

// runRacy is run, and says whether the outcome may have depended on the
// order in which MariaDB ran statements that went on at once: two or more
// waiting statements that went on in the same step, or one that went on
// beside the step's own statement, which was not a COMMIT or ROLLBACK
// (a deadlock's victim rolled back). mariadbsim runs them in one order.
func (t *mariaServer) runRacy(ctx context.Context, seq DBSeq, prefix string) (steps []DBStep, racy bool, err error) {
	if err := seq.check(); err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, dbSeqTimeout)
	defer cancel()
	r := newSeqRun(seq, prefix)
	d := &mariaDriver{t: t, r: r, ctx: ctx, clientClock: seq.ClientClock, done: make(chan mariaDone, seq.Conns)}
	defer func() {
		err = errors.Join(err, d.close())
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrHarness, err)
		}
	}()
	// A read view open for the whole sequence keeps InnoDB's purge from
	// removing the rows the sequence deletes: when purge runs is real time,
	// and until it does, a deleted row's record is locked and waited for
	// like any other (mariadbsim.Options.HoldPurge).
	mctx, mcancel := monitorContext()
	defer mcancel()
	if _, err := t.mon.ExecContext(mctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return nil, false, err
	}
	d.snapshot = true
	for range seq.Conns {
		c, err := t.db.Conn(ctx)
		if err != nil {
			return r.steps, false, err
		}
		d.conns = append(d.conns, c)
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return r.steps, false, err
		}
		d.ids = append(d.ids, id)
		if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", int(dbLockWait/time.Second))); err != nil {
			return r.steps, false, err
		}
	}
	err = r.drive(d)
	return r.steps, d.racy, err
}

// mariaDriver is the runDriver of MariaDB: each statement runs in a
// goroutine of its own, and settle polls InnoDB's status.
type mariaDriver struct {
	t           *mariaServer
	r           *seqRun
	ctx         context.Context
	clientClock bool
	conns       []*sql.Conn
	ids         []int64 // their connection ids
	done        chan mariaDone
	running     int  // statements whose outcome is not collected yet
	snapshot    bool // the monitor holds a read view
	racy        bool // see mariaServer.runRacy
}

// awaitGone waits until none of the run's connections is in the server's
// process list.
func (d *mariaDriver) awaitGone(ctx context.Context) error {
	if len(d.ids) == 0 {
		return nil
	}
	ids := make([]string, len(d.ids))
	for i, id := range d.ids {
		ids[i] = strconv.FormatInt(id, 10)
	}
	q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (" + strings.Join(ids, ", ") + ")"
	for {
		var n int
		if err := d.t.mon.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("the run's connections: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the run's connections do not end: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// skipLocked are the statements that read FOR UPDATE SKIP LOCKED.
var skipLocked = map[string]bool{"pickSlot": true, "pickSlotMixed": true}

type mariaDone struct {
	i   int
	out string
}

func (d *mariaDriver) start(i int) {
	op := d.r.steps[i].Op
	c := d.conns[op.Conn]
	d.running++
	go func() {
		out := execStep(d.ctx, c, op, d.r.prefix, d.clientClock)
		if d.t.dbName != "test" {
			// mariadbsim's database is "test" (error 1146 names it).
			out = strings.ReplaceAll(out, "'"+d.t.dbName+".", "'test.")
		}
		d.done <- mariaDone{i, out}
	}()
}

func (d *mariaDriver) collect(x mariaDone) {
	d.running--
	d.r.complete(x.i, x.out)
}

// settle waits until every statement has ended or waits for a lock: a
// statement that has not ended shows LOCK WAIT for a lock of the
// sequence's tables in InnoDB's status; when two or more wait, or one is
// a FOR UPDATE SKIP LOCKED, in two readings dbConfirm apart with nothing
// ending in between (a wait shows before its deadlock check has run, and
// SKIP LOCKED shows one for a moment now and then). A lock is granted
// before the COMMIT or ROLLBACK that frees it answers, and a deadlock's
// victim is rolled back before it answers, so a settled state lasts until
// the next step.
func (d *mariaDriver) settle() error {
	wait := 200 * time.Microsecond
	confirmed := false
	// The statements that were waiting before this step and have gone on.
	woken := map[int]bool{}
	defer func() {
		own := d.r.steps[d.r.cur].Op.Stmt
		if len(woken) >= 2 || len(woken) == 1 && own != "COMMIT" && own != "ROLLBACK" {
			d.racy = true
		}
	}()
	for d.running > 0 {
		timer := time.NewTimer(wait)
		select {
		case x := <-d.done:
			timer.Stop()
			if x.i != d.r.cur {
				woken[x.i] = true
			}
			d.collect(x)
			confirmed = false
			continue
		case <-timer.C:
		case <-d.ctx.Done():
			timer.Stop()
			return fmt.Errorf("a statement neither ended nor waited for a lock: %w", d.ctx.Err())
		}
		mctx, mcancel := monitorContext()
		waits, err := d.t.lockWaits(mctx)
		mcancel()
		if err != nil {
			return err
		}
		select {
		case x := <-d.done:
			if x.i != d.r.cur {
				woken[x.i] = true
			}
			d.collect(x)
			confirmed = false
			continue
		default:
		}
		// Only a wait for a row of the sequence's tables counts: DDL also
		// waits, now and then, for locks on InnoDB's own tables that
		// others' DDL holds.
		all, n, skip := true, 0, false
		for c, i := range d.r.busy {
			if i >= 0 {
				n++
				mine := strings.HasPrefix(waits[d.ids[c]], "`"+d.t.dbName+"`.`"+d.r.prefix)
				all = all && mine
				skip = skip || skipLocked[d.r.steps[i].Op.Stmt]
				if !mine && i != d.r.cur {
					woken[i] = true // going on (or waiting elsewhere)
				}
			}
		}
		switch {
		case !all:
			confirmed = false
			wait = min(2*wait, 2*time.Millisecond)
		case confirmed || n < 2 && !skip:
			return nil
		default:
			confirmed = true
			wait = dbConfirm
		}
	}
	return nil
}

// close ends the run: a connection whose statement still runs (a stuck
// run) is killed (KILL CONNECTION of the run's own connections only), the
// connections close, and the tables are dropped.
func (d *mariaDriver) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	// A statement may still run on the server: one that waits (a stuck
	// run), or one whose client gave up (the run's context ended), which
	// the server notices only later, and which could create a table after
	// the DROP below. So the run's own connections are killed, and the
	// tables dropped once the server has ended them.
	inFlight := d.running > 0 || d.ctx.Err() != nil
	if inFlight {
		for _, id := range d.ids {
			_, err := d.t.mon.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
			var me *mysql.MySQLError
			if err != nil && !(errors.As(err, &me) && me.Number == 1094) { // 1094: gone already
				errs = append(errs, fmt.Errorf("kill the run's connection %d: %w", id, err))
			}
		}
		for d.running > 0 {
			select {
			case x := <-d.done:
				d.collect(x)
			case <-ctx.Done():
				errs = append(errs, errors.New("the run's statements do not end"))
				d.running = 0
			}
		}
	}
	for _, c := range d.conns {
		c.Close()
	}
	if inFlight {
		if err := d.awaitGone(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if d.snapshot {
		if _, err := d.t.mon.ExecContext(ctx, "COMMIT"); err != nil {
			errs = append(errs, fmt.Errorf("end the read view: %w", err))
		}
	}
	q, err := DBOp{Stmt: "dropAll"}.text(d.r.prefix, false)
	if err == nil {
		_, err = d.t.mon.ExecContext(ctx, q)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("drop the tables: %w", err))
	}
	return errors.Join(errs...)
}

// ended is ctx's error, or context.DeadlineExceeded once its deadline has
// passed though ctx does not say so yet: a dial bounded by that deadline
// fails ("i/o timeout") at it, and a loaded machine may not yet have run
// the timer that ends ctx (the fifteenth clean clone: a 1 ms deadline
// reported as no usable MariaDB).
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
