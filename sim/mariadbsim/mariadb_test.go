package mariadbsim

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
)

// The server's answers to dbsem's statements, compared with MariaDB's:
// scripts of statements on a few connections run on both, step by step,
// and every outcome (rows, rows affected, LAST_INSERT_ID, error numbers
// and messages, lock waits that end in a timeout, a grant or a deadlock)
// must be the same. The datetimes are the client clock's (string
// parameters), so that both see the same times. The tests run against
// the MariaDB that package mariadbtest finds and skip without one.

// A step is one statement of a script, on connection conn. A step marked
// bg runs in the background (it is expected to wait for a lock): the
// script goes on, and a later step with join set to its index collects
// its outcome.
type step struct {
	conn int
	q    string
	args []any
	bg   bool
	join int // 1 + the index of the background step to collect
}

// q is dbsem's statement name with the tables prefixed and the clock a
// parameter; an INSERT of slot rows lists n of them.
func q(prefix, name string, n ...int) string {
	rows := 0
	if len(n) > 0 {
		rows = n[0]
	}
	s, err := StatementText(name, prefix, true, rows)
	if err != nil {
		panic(err)
	}
	return s
}

// at is the client clock t0 + d, as Defects.ClientClockExpiry sends it.
func at(d time.Duration) string {
	return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(d).Format("2006-01-02 15:04:05.000000")
}

// outcome is a step's outcome as the comparison sees it.
func outcome(res sql.Result, rows [][]string, err error) string {
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		return fmt.Sprintf("error %d (%s): %s", me.Number, me.SQLState, me.Message)
	case err != nil:
		return "error: " + err.Error()
	case rows != nil:
		return fmt.Sprint(rows)
	}
	n, _ := res.RowsAffected()
	id, _ := res.LastInsertId()
	return fmt.Sprintf("n=%d id=%d", n, id)
}

// do runs one statement on c: a query if it returns rows.
func do(ctx context.Context, c *sql.Conn, s step) string {
	p, err := parse(s.q)
	if err == nil && p.v.tpl.cols != nil {
		rs, err := c.QueryContext(ctx, s.q, s.args...)
		if err != nil {
			return outcome(nil, nil, err)
		}
		defer rs.Close()
		out := [][]string{}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				return outcome(nil, nil, err)
			}
			row := make([]string, len(vals))
			for i, v := range vals {
				row[i] = string(v)
			}
			out = append(out, row)
		}
		return outcome(nil, out, rs.Err())
	}
	res, err := c.ExecContext(ctx, s.q, s.args...)
	return outcome(res, nil, err)
}

// onMariaDB runs script on connections of db, with a lock wait timeout of
// one second; the script goes on from a background step once InnoDB shows
// its transaction waiting for a lock (or the step is over). A read
// view stays open while the script runs, so that InnoDB's purge, which
// runs when it will, removes none of the rows the script deletes (see
// World.purge).
func onMariaDB(db *sql.DB, script []step) ([]string, error) {
	ctx := context.Background()
	var conns []*sql.Conn
	var threads []int64 // each connection's CONNECTION_ID()
	defer func() {
		// Back to the pool with no transaction open: a scenario beside
		// this one may take the connection next (CI once had one begin
		// with "Transaction characteristics can't be changed while a
		// transaction is in progress").
		for _, c := range conns {
			c.ExecContext(ctx, "ROLLBACK")
			c.Close()
		}
	}()
	view, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer view.Close()
	if _, err := view.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return nil, err
	}
	defer view.ExecContext(ctx, "COMMIT")
	out := make([]string, len(script))
	done := map[int]chan struct{}{}
	defer func() {
		for _, ch := range done {
			<-ch
		}
	}()
	for i, s := range script {
		if s.join > 0 && (s.join > i || !script[s.join-1].bg) {
			return nil, fmt.Errorf("step %d joins step %d, not an earlier background step", i, s.join-1)
		}
		for len(conns) <= s.conn {
			c, err := db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			conns = append(conns, c)
			if _, err := c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
				return nil, err
			}
			var id int64
			if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return nil, err
			}
			threads = append(threads, id)
		}
		switch {
		case s.join > 0:
			<-done[s.join-1]
		case s.bg:
			ch, c := make(chan struct{}), conns[s.conn]
			done[i] = ch
			go func() {
				defer close(ch)
				out[i] = do(ctx, c, s)
			}()
			if err := untilWaiting(ctx, db, threads[s.conn], ch); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
		default:
			out[i] = do(ctx, conns[s.conn], s)
		}
	}
	return out, nil
}

// untilWaiting returns once the transaction of connection thread waits for
// a lock, or done is closed: a wait MariaDB reports, rather than a guess at
// how long a statement takes to reach it (a fixed guess either wastes time
// or, on a loaded machine, lets the lock waits of later steps run out).
func untilWaiting(ctx context.Context, db *sql.DB, thread int64, done <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return nil
		default:
		}
		waits, err := mariadb.LockWaits(ctx, db)
		if err != nil {
			return err
		}
		if _, ok := waits[thread]; ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("connection %d neither waits for a lock nor finishes after 10 s", thread)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// onSim runs script on the simulator: a process per connection, taking
// turns in script order (waiting for its turn in 1 ms sleeps), purge held
// off as onMariaDB's read view holds it off; trace, if not nil, gets the
// World's trace.
func onSim(script []step, trace io.Writer) ([]string, error) {
	w := New(Options{LockWaitTimeout: time.Second, HoldPurge: true, Trace: trace})
	out := make([]string, len(script))
	finished := make([]bool, len(script))
	next, conns := 0, 0
	for _, s := range script {
		conns = max(conns, s.conn+1)
	}
	for c := range conns {
		w.Go(fmt.Sprintf("conn%d", c), func(p *Process) {
			conn, err := p.DB().Conn(bg)
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			for {
				for next < len(script) && script[next].conn != c {
					p.Sleep(time.Millisecond)
				}
				if next == len(script) {
					return
				}
				i, s := next, script[next]
				switch {
				case s.join > 0:
					for !finished[s.join-1] {
						p.Sleep(time.Millisecond)
					}
					next++
				case s.bg:
					next++
					out[i] = do(bg, conn, s)
				default:
					out[i] = do(bg, conn, s)
					next++
				}
				finished[i] = true
			}
		})
	}
	return out, w.Run()
}

var (
	mariaOnce sync.Once
	mariaDB   *sql.DB
	noMaria   error
)

// maria returns a pool on the test database, or skips t.
func maria(t *testing.T) *sql.DB {
	mariaOnce.Do(func() {
		mysql.SetLogger(log.New(io.Discard, "", 0))
		cfg, err := mariadbtest.Config()
		if err != nil {
			noMaria = err
			return
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			noMaria = err
			return
		}
		mariaDB = sql.OpenDB(c)
	})
	if noMaria != nil {
		mariadbtest.DSN(t) // skips, saying why and how to provide one
		t.Fatal(noMaria)
	}
	return mariaDB
}

// A scenario is a script, built for a table prefix of its own.
type scenario struct {
	name   string
	script func(prefix string) []step
}

// compare runs each scenario on MariaDB and on the simulator, all at once
// (a lock wait timeout takes a second of MariaDB's), and fails a subtest
// per scenario on the first step whose outcomes differ.
func compare(t *testing.T, scenarios ...scenario) {
	db := maria(t)
	type result struct {
		steps     []step
		real, sim []string
		err       error
	}
	results := make([]result, len(scenarios))
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		var b [5]byte
		rand.Read(b[:])
		prefix := fmt.Sprintf("sqlsimt_%x_", b)
		t.Cleanup(func() { db.Exec(q(prefix, "dropAll")) })
		r := &results[i]
		r.steps = sc.script(prefix)
		wg.Go(func() {
			if r.real, r.err = onMariaDB(db, r.steps); r.err == nil {
				r.sim, r.err = onSim(r.steps, nil)
			}
		})
	}
	wg.Wait()
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := results[i]
			if r.err != nil {
				t.Fatal(r.err)
			}
			for i, s := range r.steps {
				if r.real[i] != r.sim[i] {
					t.Errorf("step %d (conn %d) %s %v:\n\tMariaDB: %s\n\tsqlsim:  %s", i, s.conn, s.q, s.args, r.real[i], r.sim[i])
				}
			}
			if testing.Verbose() {
				for i, s := range r.steps {
					t.Logf("%2d conn%d %.60s -> %s", i, s.conn, s.q, r.real[i])
				}
			}
		})
	}
}

const sec = time.Second

func rc(c int) []step {
	return []step{{conn: c, q: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"}, {conn: c, q: "START TRANSACTION"}}
}

func script(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// masterRow is dbsem's master-row statements, with their corner cases.
func masterRow(p string) []step {
	return script(
		[]step{
			{conn: 0, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "createKeys")},
			{conn: 0, q: q(p, "createTokens")},
			{conn: 0, q: q(p, "createTokens")},
			{conn: 0, q: q(p, "selectKey"), args: []any{"k"}},
			{conn: 0, q: q(p, "insertKey"), args: []any{"k", 2, "master-row"}},
			{conn: 0, q: q(p, "insertKey"), args: []any{"k", 3, "master-row"}},
			{conn: 0, q: q(p, "selectKey"), args: []any{"k"}},
		},
		rc(0),
		[]step{
			{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}},
			{conn: 0, q: q(p, "lockMaster"), args: []any{"nokey"}},
			{conn: 0, q: q(p, "deleteExpired"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "nextFence"), args: []any{"k"}},
			{conn: 0, q: q(p, "insertToken"), args: []any{"k", "tokA", at(0), int64(sec / 1000), 1}},
			{conn: 0, q: q(p, "insertToken"), args: []any{"k", "tokB", at(0), int64(2 * sec / 1000), 1}},
			{conn: 1, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "COMMIT")},
			{conn: 1, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 1, q: q(p, "countLive"), args: []any{"k", at(sec - 1000)}},
			{conn: 1, q: q(p, "countLive"), args: []any{"k", at(sec)}},
			{conn: 1, q: q(p, "refreshToken"), args: []any{at(sec / 2), int64(sec / 1000), "k", "tokA", at(sec / 2)}},
			{conn: 1, q: q(p, "refreshToken"), args: []any{at(sec + sec/2), int64(sec / 1000), "k", "tokA", at(sec + sec/2)}},
			{conn: 1, q: q(p, "refreshToken"), args: []any{at(sec + sec/2 - 1000), int64(sec / 1000), "k", "tokA", at(sec + sec/2 - 1000)}},
			{conn: 1, q: q(p, "refreshTokenAE"), args: []any{at(5 * sec), int64(sec / 1000), "k", "tokA"}},
			{conn: 1, q: q(p, "releaseToken"), args: []any{"k", "tokA", at(7 * sec)}},
			{conn: 1, q: q(p, "releaseTokenAE"), args: []any{"k", "tokA"}},
			{conn: 1, q: q(p, "releaseTokenAE"), args: []any{"k", "tokA"}},
			{conn: 1, q: q(p, "insertToken"), args: []any{"k", "tokB", at(0), int64(sec / 1000), 1}},
			{conn: 1, q: q(p, "readMaster"), args: []any{"k"}},
			{conn: 1, q: q(p, "nextFence"), args: []any{"nokey"}},
			{conn: 1, q: q(p, "nextFence"), args: []any{"k"}},
			{conn: 1, q: q(p, "countSlots"), args: []any{"k"}},
		},
		rc(1),
		[]step{
			{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(3 * sec)}},
			{conn: 1, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 1, q: q(p, "ROLLBACK")},
			{conn: 0, q: q(p, "countLive"), args: []any{"k", at(0)}},
			{conn: 0, q: q(p, "dropAll")},
			{conn: 0, q: q(p, "selectKey"), args: []any{"k"}},
		})
}

// rowPerSlot is dbsem's row-per-slot statements, with their corner cases.
func rowPerSlot(p string) []step {
	return script(
		[]step{
			{conn: 0, q: q(p, "createKeys")},
			{conn: 0, q: q(p, "createSlots")},
		},
		rc(0),
		[]step{
			{conn: 0, q: q(p, "insertKey"), args: []any{"k", 3, "row-per-slot"}},
			{conn: 0, q: q(p, "insertSlots", 3), args: []any{"k", "k", "k"}},
			{conn: 0, q: q(p, "COMMIT")},
			{conn: 0, q: q(p, "countSlots"), args: []any{"k"}},
			{conn: 0, q: q(p, "insertSlotsMixed", 5), args: []any{"k", "k", "k", "k", "k"}},
			{conn: 0, q: q(p, "insertSlots", 7), args: []any{"k", "k", "k", "k", "k", "k", "k"}},
			{conn: 0, q: q(p, "insertSlotsMixed", 2), args: []any{"j", "j"}},
			// A duplicate in the second row undoes the first.
			{conn: 0, q: q(p, "insertSlots", 2), args: []any{"x", "j"}},
			{conn: 0, q: q(p, "countSlots"), args: []any{"x"}},
			{conn: 0, q: q(p, "insertSlotsMixed", 3), args: []any{"x", "j", "x"}},
			{conn: 0, q: q(p, "countSlots"), args: []any{"x"}},
			{conn: 0, q: q(p, "countSlots"), args: []any{"k"}},
		},
		rc(0), rc(1),
		[]step{
			{conn: 0, q: q(p, "pickSlot"), args: []any{"k", at(0)}},
			{conn: 1, q: q(p, "pickSlot"), args: []any{"k", at(0)}},
			{conn: 2, q: q(p, "peekSlot"), args: []any{"k", at(0)}},
			{conn: 1, q: q(p, "pickSlotMixed"), args: []any{"k", 1, at(0)}},
			{conn: 1, q: q(p, "pickSlotMixed"), args: []any{"k", 3, at(0)}},
			{conn: 0, q: q(p, "takeSlot"), args: []any{"0:tok", at(0), int64(sec / 1000), 0, "k", 0}},
			{conn: 0, q: q(p, "COMMIT")},
			{conn: 1, q: q(p, "ROLLBACK")},
			{conn: 2, q: q(p, "peekSlot"), args: []any{"k", at(0)}},
			{conn: 2, q: q(p, "peekSlotMixed"), args: []any{"k", 1, at(0)}},
			{conn: 2, q: q(p, "peekSlot"), args: []any{"k", at(sec)}},
			{conn: 2, q: q(p, "refreshSlot"), args: []any{at(sec / 2), int64(sec / 1000), "k", 0, "0:tok", at(sec / 2)}},
			{conn: 2, q: q(p, "refreshSlot"), args: []any{at(2 * sec), int64(sec / 1000), "k", 0, "0:tok", at(2 * sec)}},
			{conn: 2, q: q(p, "refreshSlot"), args: []any{at(sec / 2), int64(sec / 1000), "k", 0, "0:other", at(sec / 2)}},
			{conn: 2, q: q(p, "refreshSlotAE"), args: []any{at(2 * sec), int64(sec / 1000), "k", 0, "0:tok"}},
			{conn: 2, q: q(p, "releaseSlot"), args: []any{"k", 0, "0:tok", at(5 * sec)}},
			{conn: 2, q: q(p, "releaseSlot"), args: []any{"k", 0, "0:tok", at(sec)}},
			{conn: 2, q: q(p, "releaseSlot"), args: []any{"k", 0, "0:tok", at(sec)}},
			{conn: 2, q: q(p, "releaseSlotAE"), args: []any{"k", 0, "0:tok"}},
			{conn: 2, q: q(p, "refreshSlotAE"), args: []any{at(0), int64(sec / 1000), "k", 0, "0:tok"}},
			{conn: 2, q: q(p, "takeSlot"), args: []any{"3:tok", at(0), int64(sec / 1000), 7, "k", 3}},
			{conn: 2, q: q(p, "takeSlot"), args: []any{"3:tok", at(0), int64(sec / 1000), 7, "k", 3}},
			{conn: 2, q: q(p, "takeSlot"), args: []any{"9:tok", at(0), int64(sec / 1000), 7, "k", 9}},
			{conn: 2, q: q(p, "peekSlotMixed"), args: []any{"k", 5, at(0)}},
		})
}

// keysAndTokens sets up master-row tables with keys k and j, a live token
// and an expired one of k.
func keysAndTokens(p string) []step {
	return []step{
		{conn: 0, q: q(p, "createKeys")},
		{conn: 0, q: q(p, "createTokens")},
		{conn: 0, q: q(p, "insertKey"), args: []any{"k", 1, "master-row"}},
		{conn: 0, q: q(p, "insertKey"), args: []any{"j", 1, "master-row"}},
		{conn: 0, q: q(p, "insertToken"), args: []any{"k", "live", at(0), int64(sec / 1000), 0}},
		{conn: 0, q: q(p, "insertToken"), args: []any{"k", "old", at(-sec), int64(sec / 1000), 0}},
	}
}

// twoSlots sets up row-per-slot rows 0 (free) and 1 (taken) of k, and
// has two transactions pick slots before last: SKIP LOCKED passes over a
// locked row, and keeps no lock on a row it read and did not take.
func twoSlots(p string, last step) []step {
	return script([]step{
		{conn: 0, q: q(p, "createKeys")},
		{conn: 0, q: q(p, "createSlots")},
		{conn: 0, q: q(p, "insertSlots", 2), args: []any{"k", "k"}},
		{conn: 0, q: q(p, "takeSlot"), args: []any{"1:tok", at(0), int64(sec / 1000), 0, "k", 1}},
	}, rc(0), rc(1), []step{
		{conn: 0, q: q(p, "pickSlot"), args: []any{"k", at(0)}},
		{conn: 1, q: q(p, "pickSlot"), args: []any{"k", at(0)}},
		{conn: 2, q: q(p, "refreshSlot"), args: []any{at(0), int64(sec / 1000), "k", 1, "1:tok", at(0)}},
		{conn: 1, q: q(p, "pickSlot"), args: []any{"k", at(5 * sec)}},
		{conn: 1, q: q(p, "peekSlot"), args: []any{"k", at(0)}},
		last,
		{conn: 0, q: q(p, "COMMIT")},
		{conn: 1, q: q(p, "COMMIT")},
	})
}

// Every statement of dbsem's, and what happens when a statement meets a
// row lock: granted at COMMIT, error 1205 after the timeout (the
// transaction stays open), error 1213 for the requester that closes a
// cycle; UPDATE and DELETE wait for a locked row whether or not its
// committed version matches (a DELETE even for a row it will not delete,
// an UPDATE of a row found by whole primary key even under READ
// COMMITTED: InnoDB reads semi-consistently only in range scans); INSERT
// IGNORE of a locked duplicate waits, and keeps a shared lock.
func TestMariaDB(t *testing.T) {
	setUp := keysAndTokens
	lockedToken := func(p string, waiter step) []step {
		return script(setUp(p), rc(0), rc(1), []step{
			{conn: 0, q: q(p, "refreshToken"), args: []any{at(0), int64(sec / 1000), "k", "live", at(0)}},
			waiter,
			{conn: 0, q: q(p, "ROLLBACK")},
			{conn: 1, q: q(p, "ROLLBACK")},
		})
	}
	compare(t,
		scenario{"master-row", masterRow},
		scenario{"row-per-slot", rowPerSlot},
		scenario{"lock granted", func(p string) []step {
			return script(setUp(p), rc(0), rc(1), []step{
				{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 1, q: q(p, "lockMaster"), args: []any{"k"}, bg: true},
				{conn: 0, q: q(p, "deleteExpired"), args: []any{"k", at(0)}},
				{conn: 0, q: q(p, "COMMIT")},
				{conn: 1, join: 12},
				{conn: 1, q: q(p, "countLive"), args: []any{"k", at(-2 * sec)}},
				{conn: 1, q: q(p, "COMMIT")},
			})
		}},
		scenario{"lock wait timeout", func(p string) []step {
			return script(setUp(p), rc(0), rc(1), []step{
				{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(0)}},
				{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 1, q: q(p, "lockMaster"), args: []any{"k"}},
				// Only the statement rolled back: the DELETE stands.
				{conn: 1, q: q(p, "countLive"), args: []any{"k", at(-2 * sec)}},
				{conn: 2, q: q(p, "countLive"), args: []any{"k", at(-2 * sec)}},
				{conn: 1, q: q(p, "COMMIT")},
				{conn: 2, q: q(p, "countLive"), args: []any{"k", at(-2 * sec)}},
			})
		}},
		scenario{"deadlock", func(p string) []step {
			return script(setUp(p), rc(0), rc(1), []step{
				{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 1, q: q(p, "lockMaster"), args: []any{"j"}},
				{conn: 0, q: q(p, "lockMaster"), args: []any{"j"}, bg: true},
				{conn: 1, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 0, join: 13},
				{conn: 1, q: q(p, "COMMIT")},
				{conn: 0, q: q(p, "COMMIT")},
			})
		}},
		scenario{"update of a locked row", func(p string) []step {
			return lockedToken(p, step{conn: 1, q: q(p, "refreshToken"), args: []any{at(0), int64(sec / 1000), "k", "live", at(5 * sec)}})
		}},
		scenario{"delete of another row", func(p string) []step {
			return lockedToken(p, step{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(0)}})
		}},
		scenario{"autocommit update", func(p string) []step {
			return lockedToken(p, step{conn: 2, q: q(p, "refreshToken"), args: []any{at(0), int64(sec / 1000), "k", "live", at(5 * sec)}})
		}},
		scenario{"insert of a locked duplicate", func(p string) []step {
			return script(setUp(p), rc(0), []step{
				{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 2, q: q(p, "insertKey"), args: []any{"k", 1, "master-row"}},
				{conn: 0, q: q(p, "ROLLBACK")},
			})
		}},
		scenario{"duplicate's shared lock", func(p string) []step {
			return script(setUp(p), rc(1), []step{
				{conn: 1, q: q(p, "insertKey"), args: []any{"k", 1, "master-row"}},
				{conn: 2, q: q(p, "readMaster"), args: []any{"k"}},
				{conn: 2, q: q(p, "nextFence"), args: []any{"k"}},
				{conn: 1, q: q(p, "COMMIT")},
				{conn: 2, q: q(p, "nextFence"), args: []any{"k"}},
			})
		}},
		scenario{"slot taken by another", func(p string) []step {
			return twoSlots(p, step{conn: 1, q: q(p, "takeSlot"), args: []any{"0:mine", at(0), int64(sec / 1000), 0, "k", 0}})
		}},
		scenario{"slot picked by another", func(p string) []step {
			return twoSlots(p, step{conn: 2, q: q(p, "releaseSlot"), args: []any{"k", 1, "1:tok", at(0)}})
		}},
	)
}

// bgOf is 1 + the index of conn c's last background step in s: what a
// step that collects its outcome joins.
func bgOf(s []step, c int) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].bg && s[i].conn == c {
			return i + 1
		}
	}
	panic(fmt.Sprintf("no background step of conn %d", c))
}

// How long row locks last, and what weighs in a deadlock, beyond a
// statement that locks and keeps its row: a lock granted after a wait is
// kept to the end of the transaction, even on a row the statement then
// does not change (READ COMMITTED gives back only the locks it took
// without waiting); a rolled-back insert's record goes with its locks, and
// a statement waiting for it goes on, but a duplicate's S lock on it
// becomes a gap lock; a deleted row's record stays locked by whoever
// waited for it, which REPEATABLE READ waits for and READ COMMITTED
// passes over; the deadlock's victim is the transaction with
// the fewer undo records and InnoDB lock structs (table locks, and record
// lock structs kept after a READ COMMITTED unlock), the requester on a
// tie; a locking scan that waited for a row goes on from it, not seeing
// rows inserted before it meanwhile; a waiting transaction waits for the
// owner of the first lock in its way only, so that a cycle through
// another is found only once a release makes it the first (see
// deadlockOnRelease). (These are the divergences adapters/conform's
// differential found.)
func TestMariaDBLockLifetimes(t *testing.T) {
	compare(t,
		scenario{"a lock granted after a wait is kept", func(p string) []step {
			s := script(keysAndTokens(p), rc(0), rc(1), []step{
				{conn: 0, q: q(p, "refreshToken"), args: []any{at(0), int64(sec / 1000), "k", "live", at(0)}},
				// Expired by its clock: it matches nothing once granted.
				{conn: 1, q: q(p, "releaseToken"), args: []any{"k", "live", at(5 * sec)}, bg: true},
				{conn: 0, q: q(p, "COMMIT")},
			})
			// Conn 1 keeps the lock: conn 2 waits for it in vain (error
			// 1205), until conn 1 rolls back.
			return append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 2, q: q(p, "refreshToken"), args: []any{at(0), int64(sec / 1000), "k", "live", at(0)}},
				step{conn: 1, q: q(p, "ROLLBACK")},
				step{conn: 2, q: q(p, "refreshToken"), args: []any{at(0), int64(sec / 1000), "k", "live", at(0)}})
		}},
		scenario{"a rolled-back insert's locks go with it", func(p string) []step {
			s := script(keysAndTokens(p), rc(0), rc(1), rc(2), []step{
				{conn: 0, q: q(p, "insertToken"), args: []any{"k", "new", at(0), int64(sec / 1000), 0}},
				{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(-2 * sec)}, bg: true},
				{conn: 2, q: q(p, "deleteExpired"), args: []any{"k", at(-2 * sec)}, bg: true},
				{conn: 0, q: q(p, "ROLLBACK")},
			})
			// Neither keeps a lock on the row that is gone: conn 3
			// inserts it again at once.
			s = append(s, step{conn: 1, join: bgOf(s, 1)}, step{conn: 2, join: bgOf(s, 2)})
			return append(s,
				step{conn: 3, q: q(p, "insertToken"), args: []any{"k", "new", at(0), int64(sec / 1000), 0}},
				step{conn: 1, q: q(p, "COMMIT")},
				step{conn: 2, q: q(p, "COMMIT")})
		}},
		scenario{"a deleted row stays locked", func(p string) []step {
			s := script(keysAndTokens(p), rc(0), rc(1), []step{
				{conn: 0, q: q(p, "releaseToken"), args: []any{"k", "live", at(0)}},
				{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(-2 * sec)}, bg: true},
				{conn: 0, q: q(p, "COMMIT")},
			})
			// Conn 1 waited for the deleted row and keeps its lock: conn 2
			// waits for it in vain (error 1205), until conn 1 rolls back.
			return append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 2, q: q(p, "releaseTokenAE"), args: []any{"k", "live"}},
				step{conn: 1, q: q(p, "ROLLBACK")},
				step{conn: 2, q: q(p, "releaseTokenAE"), args: []any{"k", "live"}},
				step{conn: 2, q: q(p, "insertToken"), args: []any{"k", "live", at(0), int64(sec / 1000), 0}})
		}},
		scenario{"READ COMMITTED passes over a deleted row", func(p string) []step {
			s := script(keysAndTokens(p), rc(0), rc(1), rc(2), []step{
				{conn: 0, q: q(p, "releaseTokenAE"), args: []any{"k", "live"}},
				{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(-2 * sec)}, bg: true},
				{conn: 0, q: q(p, "COMMIT")},
			})
			// Conn 1 keeps its lock on the deleted row: READ COMMITTED
			// statements pass over the row, a REPEATABLE READ one waits.
			return append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 2, q: q(p, "refreshTokenAE"), args: []any{at(0), int64(sec / 1000), "k", "live"}},
				step{conn: 2, q: q(p, "deleteExpired"), args: []any{"k", at(-2 * sec)}},
				step{conn: 3, q: q(p, "releaseTokenAE"), args: []any{"k", "live"}},
				step{conn: 1, q: q(p, "ROLLBACK")},
				step{conn: 2, q: q(p, "COMMIT")})
		}},
		scenario{"a scan that waited does not go back", func(p string) []step {
			s := script([]step{
				{conn: 0, q: q(p, "createTokens")},
			}, rc(0), rc(1), []step{
				{conn: 0, q: q(p, "insertToken"), args: []any{"k", "t3", at(0), int64(sec / 1000), 0}},
				{conn: 1, q: q(p, "deleteExpired"), args: []any{"k", at(2 * sec)}, bg: true},
				// Before t3, where conn 1's scan has been: no gap lock
				// stops it, and the scan does not see it.
				{conn: 0, q: q(p, "insertToken"), args: []any{"k", "t2", at(0), int64(sec / 1000), 0}},
				{conn: 0, q: q(p, "COMMIT")},
			})
			// Conn 1 deleted t3 alone; t2 is still there for conn 2.
			return append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 1, q: q(p, "COMMIT")},
				step{conn: 2, q: q(p, "countLive"), args: []any{"k", at(0)}})
		}},
		scenario{"a duplicate's check of a rolled-back insert leaves a gap lock", func(p string) []step {
			s := script([]step{
				{conn: 0, q: q(p, "createKeys")},
				{conn: 0, q: q(p, "createTokens")},
			}, rc(0), rc(1), []step{
				{conn: 0, q: q(p, "insertToken"), args: []any{"k", "t1", at(0), int64(sec / 1000), 0}},
				{conn: 1, q: q(p, "insertToken"), args: []any{"k", "t1", at(0), int64(sec / 1000), 0}, bg: true},
				{conn: 0, q: q(p, "ROLLBACK")},
			})
			// Conn 1's S lock became a gap lock after the record, and its
			// insert copied it before: no one inserts anywhere until conn 1
			// ends.
			return append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 2, q: q(p, "insertToken"), args: []any{"j", "t9", at(0), int64(sec / 1000), 0}},
				step{conn: 0, q: q(p, "insertToken"), args: []any{"kk", "t9", at(0), int64(sec / 1000), 0}},
				step{conn: 1, q: q(p, "COMMIT")},
				step{conn: 2, q: q(p, "insertToken"), args: []any{"j", "t9", at(0), int64(sec / 1000), 0}})
		}},
		scenario{"a range scan that finds nothing locks the record after it", func(p string) []step {
			s := script([]step{
				{conn: 0, q: q(p, "createKeys")},
				{conn: 0, q: q(p, "createSlots")},
				{conn: 0, q: q(p, "insertKey"), args: []any{"k", 1, "row-per-slot"}},
				{conn: 0, q: q(p, "insertSlots", 1), args: []any{"k"}},
				{conn: 0, q: q(p, "insertSlots", 2), args: []any{"kk", "kk"}},
			}, rc(2), rc(3), []step{
				{conn: 3, q: q(p, "pickSlot"), args: []any{"k", at(1500 * time.Millisecond)}},
				// Passes over k's row 0 (conn 3's), then locks kk's row 0
				// and lets it go: one lock struct more, besides the IX.
				{conn: 2, q: q(p, "pickSlotMixed"), args: []any{"k", 1, at(500 * time.Millisecond)}},
				{conn: 2, q: q(p, "insertKey"), args: []any{"j", 3, "row-per-slot"}},
				{conn: 3, q: q(p, "insertKey"), args: []any{"k", 3, "row-per-slot"}},
				{conn: 2, q: q(p, "nextFence"), args: []any{"k"}, bg: true},
				// A tie, 5 and 5 (conn 2: 1 undo record, IX on both tables,
				// kk's struct and its wait's; conn 3: IX on both tables, its
				// slot row, the S lock of its duplicate key, its wait): the
				// requester, conn 3, is the victim.
				{conn: 3, q: q(p, "nextFence"), args: []any{"k"}},
			})
			return append(s, step{conn: 2, join: bgOf(s, 2)},
				step{conn: 2, q: q(p, "ROLLBACK")},
				step{conn: 3, q: q(p, "ROLLBACK")})
		}},
		scenario{"one wait that closes two cycles", func(p string) []step {
			s := script([]step{
				{conn: 0, q: q(p, "createKeys")},
				{conn: 0, q: q(p, "createTokens")},
				{conn: 0, q: q(p, "insertKey"), args: []any{"k", 1, "master-row"}},
			}, rc(3), rc(2), rc(1), []step{
				{conn: 3, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 1, q: q(p, "insertKey"), args: []any{"k", 3, "master-row"}, bg: true},
				{conn: 2, q: q(p, "deleteExpired"), args: []any{"k", at(0)}},
				{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}, bg: true},
				{conn: 2, q: q(p, "nextFence"), args: []any{"k"}, bg: true},
				{conn: 3, q: q(p, "ROLLBACK")},
			})
			// Conn 1 holds the S lock of its duplicate and asks for X,
			// behind conn 0's and conn 2's waits for X: two cycles. Conn 0,
			// the lightest, is rolled back first; conn 2 ties with conn 1
			// and, checked next, is rolled back too; conn 1 gets its lock.
			s = append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 1, q: q(p, "lockMaster"), args: []any{"k"}})
			return append(s, step{conn: 0, join: bgOf(s, 0)}, step{conn: 2, join: bgOf(s, 2)},
				step{conn: 1, q: q(p, "ROLLBACK")},
				step{conn: 2, q: q(p, "ROLLBACK")})
		}},
		scenario{"a deadlock found when a lock goes", deadlockOnRelease},
		scenario{"the victim by undo records and lock structs", func(p string) []step {
			s := script([]step{
				{conn: 0, q: q(p, "createKeys")},
				{conn: 0, q: q(p, "createTokens")},
				{conn: 0, q: q(p, "insertKey"), args: []any{"k", 3, "master-row"}},
				{conn: 0, q: q(p, "insertKey"), args: []any{"j", 3, "master-row"}},
			}, rc(0), rc(1), []step{
				// 1 undo record, 2 structs (IX, then the new row's lock,
				// made explicit by conn 0's wait), then 2 more (IX, the
				// wait's).
				{conn: 1, q: q(p, "insertToken"), args: []any{"k", "t3", at(0), int64(sec / 1000), 1}},
				// 1 undo record and 2 structs (IX, X on j and then k),
				// then 2 more (IX, the wait's): a tie, and the requester
				// is the victim, though it holds more rows.
				{conn: 0, q: q(p, "nextFence"), args: []any{"j"}},
				{conn: 1, q: q(p, "lockMaster"), args: []any{"j"}, bg: true},
				{conn: 0, q: q(p, "lockMaster"), args: []any{"k"}},
				{conn: 0, q: q(p, "deleteExpired"), args: []any{"k", at(0)}},
			})
			return append(s, step{conn: 1, join: bgOf(s, 1)},
				step{conn: 1, q: q(p, "ROLLBACK")},
				step{conn: 0, q: q(p, "ROLLBACK")})
		}},
		// Conn 0 waits for slot 0, which conn 1 holds; conn 1's wait for
		// j, which conn 0 holds, closes the cycle. Conn 0: 1 undo record
		// and 4 structs (IX and X on the keys, IX and the wait on the
		// slots); conn 1: 1 undo record and 5 structs (IX and X on each
		// table, the wait). With take, conn 1 fills slot 0's NULLs while
		// conn 0 waits on it: InnoDB rebuilds the record, moving conn 0's
		// waiting lock twice (2 more structs), and conn 1 has 2 undo
		// records: 7 and 7, a tie, and conn 1, the requester, is rolled
		// back. Without it, conn 0, the lighter, is.
		scenario{"an update that rebuilds a record weighs its waiters", func(p string) []step {
			return rebuiltRecord(p, true)
		}},
		scenario{"a deadlock without the rebuild", func(p string) []step {
			return rebuiltRecord(p, false)
		}},
		// A rollback that puts slot 0's NULLs back rebuilds the record
		// too: conn 0, which waited on it, ends up with 4 undo records
		// and 7 structs (IX and X on the keys, IX, the wait and the 2 the
		// rollback gave it on the slots, the wait for k); conn 2 with 6
		// undo records and 4 structs (IX and X on the keys, IX on the
		// slots, the wait for j). Conn 2, the lighter, is rolled back;
		// without the rollback's rebuild conn 0 would have been.
		scenario{"a rollback that rebuilds a record weighs its waiters", func(p string) []step {
			s := script(slotK(p), rc(1), []step{
				{conn: 1, q: q(p, "pickSlot"), args: []any{"k", at(sec)}},
				takeSlotK(p),
			}, rc(0), []step{
				{conn: 0, q: q(p, "nextFence"), args: []any{"j"}},
				{conn: 0, q: q(p, "insertSlotsMixed", 4), args: []any{"k", "k", "k", "k"}, bg: true},
				{conn: 1, q: q(p, "ROLLBACK")},
			})
			s = append(s, step{conn: 0, join: bgOf(s, 0)})
			s = script(s, rc(2), []step{
				{conn: 2, q: q(p, "nextFence"), args: []any{"k"}},
				{conn: 2, q: q(p, "insertSlots", 5), args: []any{"m", "m", "m", "m", "m"}},
				{conn: 0, q: q(p, "nextFence"), args: []any{"k"}, bg: true},
				{conn: 2, q: q(p, "nextFence"), args: []any{"j"}},
			})
			return append(s, step{conn: 0, join: bgOf(s, 0)},
				step{conn: 0, q: q(p, "ROLLBACK")},
				step{conn: 2, q: q(p, "ROLLBACK")})
		}},
	)
}

// slotK makes the tables of row-per-slot, with key k of one slot and key
// j of none.
func slotK(p string) []step {
	return []step{
		{conn: 0, q: q(p, "createKeys")},
		{conn: 0, q: q(p, "createSlots")},
		{conn: 0, q: q(p, "insertKey"), args: []any{"k", 1, "row-per-slot"}},
		{conn: 0, q: q(p, "insertSlots", 1), args: []any{"k"}},
		{conn: 0, q: q(p, "insertKey"), args: []any{"j", 1, "row-per-slot"}},
	}
}

// takeSlotK is conn 1's take of slot 0 of k, which fills its NULLs.
func takeSlotK(p string) step {
	return step{conn: 1, q: q(p, "takeSlot"), args: []any{"b", at(1500 * time.Millisecond), int64(sec / 1000), 1, "k", 0}}
}

// rebuiltRecord is the script of the scenarios of World.rebuilt.
func rebuiltRecord(p string, take bool) []step {
	s := script(slotK(p), rc(1), []step{
		{conn: 1, q: q(p, "pickSlot"), args: []any{"k", at(sec)}},
	}, rc(0), []step{
		{conn: 0, q: q(p, "nextFence"), args: []any{"j"}},
		{conn: 1, q: q(p, "nextFence"), args: []any{"k"}},
		{conn: 0, q: q(p, "insertSlotsMixed", 4), args: []any{"k", "k", "k", "k"}, bg: true},
	})
	if take {
		s = append(s, takeSlotK(p))
	}
	s = append(s, step{conn: 1, q: q(p, "nextFence"), args: []any{"j"}, bg: !take})
	s = append(s, step{conn: 0, join: bgOf(s, 0)})
	if !take {
		s = append(s, step{conn: 1, join: bgOf(s, 1)})
	}
	return append(s, step{conn: 0, q: q(p, "ROLLBACK")}, step{conn: 1, q: q(p, "ROLLBACK")})
}

// deadlockOnRelease is the script of a deadlock that no wait closes, but a
// release does (MariaDB 10.6 and later, whose check follows one blocker a
// waiting transaction: the first lock in its way). Conns 3 and 2 hold S
// locks on key k (their duplicates'), conn 0 X on slot 0. Conn 2 waits for
// slot 0 (its duplicate check), behind conn 0; conn 0 waits for k, whose
// first lock in its way is conn 3's, which does not wait: no cycle is
// seen, though conn 2's S lock is in conn 0's way too. Conn 3's rollback
// leaves conn 0 waiting for conn 2, which waits: the check that follows
// finds the cycle, and conn 2 (a tie, 4 and 4, and the transaction the
// check started from) is rolled back; conn 0 gets k.
func deadlockOnRelease(p string) []step {
	s := script([]step{
		{conn: 0, q: q(p, "createKeys")},
		{conn: 0, q: q(p, "createSlots")},
		{conn: 0, q: q(p, "insertKey"), args: []any{"k", 1, "row-per-slot"}},
		{conn: 0, q: q(p, "insertSlots", 1), args: []any{"k"}},
	}, rc(3), rc(0), rc(2), []step{
		{conn: 3, q: q(p, "insertKey"), args: []any{"k", 1, "row-per-slot"}},
		{conn: 2, q: q(p, "insertKey"), args: []any{"k", 1, "row-per-slot"}},
		{conn: 0, q: q(p, "pickSlot"), args: []any{"k", at(0)}},
		{conn: 2, q: q(p, "insertSlots", 4), args: []any{"k", "k", "k", "k"}, bg: true},
		{conn: 0, q: q(p, "nextFence"), args: []any{"k"}, bg: true},
		{conn: 3, q: q(p, "ROLLBACK")},
	})
	s = append(s, step{conn: 2, join: bgOf(s, 2)}, step{conn: 0, join: bgOf(s, 0)})
	return append(s, step{conn: 0, q: q(p, "ROLLBACK")}, step{conn: 2, q: q(p, "ROLLBACK")})
}

// The deadlock of deadlockOnRelease, on the simulator alone (without a
// MariaDB, TestMariaDBLockLifetimes compares it with none): conn 2 and
// then conn 0 wait, no cycle is found then; conn 3's rollback finds it,
// conn 2 is the victim and conn 0 gets its lock.
func TestDeadlockFoundOnRelease(t *testing.T) {
	s := deadlockOnRelease("t_")
	var trace strings.Builder
	out, err := onSim(s, &trace)
	if err != nil {
		t.Fatal(err)
	}
	insert, fence := bgOf(s, 2)-1, bgOf(s, 0)-1
	if want := "error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"; out[insert] != want {
		t.Errorf("conn 2's insertSlots: %s, want %s", out[insert], want)
	}
	if want := "n=1 id=1"; out[fence] != want {
		t.Errorf("conn 0's nextFence: %s, want %s", out[fence], want)
	}
	// In the trace, in this order: both waits, conn 3's ROLLBACK finding
	// the cycle from conn 2 (its own line comes once it is over), conn 2's
	// error, the end of the ROLLBACK, conn 0's grant.
	order := []string{
		"conn2#1 insertSlots waits for S",
		"conn0#1 nextFence waits for X",
		"deadlock, found from conn2#1: conn2#1 conn0#1; conn2#1 rolls back",
		"conn2#1 insertSlots(t_) \"k\" \"k\" \"k\" \"k\" -> Error 1213",
		"conn3#1 ROLLBACK -> ok",
		"conn0#1 nextFence(t_) \"k\" -> ok n=1 id=1",
	}
	text, at := trace.String(), 0
	for _, line := range order {
		i := strings.Index(text[at:], line)
		if i < 0 {
			t.Fatalf("no %q after byte %d of the trace:\n%s", line, at, text)
		}
		at += i + len(line)
	}
	if n := strings.Count(text, "deadlock, found"); n != 1 {
		t.Errorf("%d deadlocks found, want 1:\n%s", n, text)
	}
}
