package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"maps"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/host/faultnet/faultnettest"
	"github.com/lockprover/lockprover/model/dbsem"
)

// designs runs f once per dbsem design, in parallel subtests.
func designs(t *testing.T, f func(t *testing.T, d dbsem.Design)) {
	for _, d := range []dbsem.Design{dbsem.MasterRow, dbsem.RowPerSlot} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}

// semaphore opens a dbsem semaphore on db with tables of its own, dropped
// (from admin) when the test ends.
func semaphore(t testing.TB, db, admin *sql.DB, d dbsem.Design) (*dbsem.Semaphore, dbsem.Options) {
	t.Helper()
	o := dbsem.Options{Design: d, Prefix: unique("mysqlproxyt_") + "_"}
	s, err := dbsem.Open(ctx(t), db, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(c, "DROP TABLE IF EXISTS "+o.Prefix+"keys, "+o.Prefix+"tokens, "+o.Prefix+"slots"); err != nil {
			t.Errorf("drop: %v", err)
		}
	})
	return s, o
}

// live counts the leases of key that the server's true clock sees live.
func live(t testing.TB, admin *sql.DB, o dbsem.Options, key string) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + o.Prefix + "tokens WHERE lock_key = ? AND expires > UTC_TIMESTAMP(6)"
	if o.Design == dbsem.RowPerSlot {
		q = "SELECT COUNT(*) FROM " + o.Prefix + "slots WHERE lock_key = ? AND token IS NOT NULL AND expires > UTC_TIMESTAMP(6)"
	}
	var n int
	if err := admin.QueryRowContext(ctx(t), q, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDSN(t *testing.T) {
	p, err := Listen("127.0.0.1:3306")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, dsn := range []string{
		"root@tcp(127.0.0.1:3306)/test",
		"u:pw@tcp(db.example:3306)/lock?tls=preferred&compress=true&parseTime=true",
		"u@unix(/run/mysqld/mysqld.sock)/lock?tls=true",
	} {
		got, err := p.DSN(dsn)
		if err != nil {
			t.Fatalf("DSN(%q): %v", dsn, err)
		}
		cfg, err := driver.ParseDSN(got)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := driver.ParseDSN(dsn)
		if cfg.Net != "tcp" || cfg.Addr != p.Addr() || cfg.TLS != nil || strings.Contains(got, "compress") ||
			cfg.User != want.User || cfg.Passwd != want.Passwd || cfg.DBName != want.DBName || cfg.ParseTime != want.ParseTime {
			t.Errorf("DSN(%q) = %q", dsn, got)
		}
	}
	if _, err := p.DSN("not a dsn"); err == nil {
		t.Error("DSN of garbage: no error")
	}
	if _, err := Listen("3306"); err == nil {
		t.Error("Listen without a host: no error")
	}
}

// dbsem's operations, both designs, pass through the proxy unchanged.
func TestDBSemThroughProxy(t *testing.T) {
	designs(t, func(t *testing.T, d dbsem.Design) {
		p := startProxy(t)
		admin := direct(t)
		s, o := semaphore(t, through(t, p), admin, d)
		var leases []dbsem.Lease
		for range 3 {
			l, err := s.Acquire(ctx(t), "k", 10*time.Second, 3)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		if _, err := s.Acquire(ctx(t), "k", 10*time.Second, 3); !errors.Is(err, dbsem.ErrFull) {
			t.Fatalf("4th acquire: %v, want ErrFull", err)
		}
		if err := s.Refresh(ctx(t), "k", leases[0].Token, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx(t), "k", leases[1].Token); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx(t), "k", leases[1].Token); !errors.Is(err, dbsem.ErrExpired) {
			t.Fatalf("second release: %v, want ErrExpired", err)
		}
		if n := live(t, admin, o, "k"); n != 2 {
			t.Fatalf("%d live leases, want 2", n)
		}
		c := p.Counts()
		t.Logf("counts: %+v", c)
		if c.Total() == 0 || c.Connections == 0 || c.Malformed+c.Refused+c.Unfollowed+c.Dropped != 0 {
			t.Fatalf("counts %+v", c)
		}
	})
}

// One session's statements, counted by kind and command.
func TestCountsByKind(t *testing.T) {
	p := startProxy(t)
	before := p.Counts()
	db := through(t, p)
	c := session(t, db)
	x := ctx(t)
	name := unique("mysqlproxyt_")
	steps := []func() error{
		func() error {
			_, err := c.ExecContext(x, "CREATE TABLE "+name+" (k INT PRIMARY KEY, v INT)")
			return err
		},
		func() error { _, err := c.ExecContext(x, "INSERT INTO "+name+" VALUES (?, ?)", 1, 10); return err }, // prepared
		func() error { _, err := c.ExecContext(x, "INSERT INTO "+name+" VALUES (2, 20)"); return err },
		func() error { var v int; return c.QueryRowContext(x, "SELECT v FROM "+name+" WHERE k = ?", 1).Scan(&v) },
		func() error {
			var v int
			return c.QueryRowContext(x, "/* a comment */ (SELECT v FROM "+name+" WHERE k = 2)").Scan(&v)
		},
		func() error {
			tx, err := c.BeginTx(x, &sql.TxOptions{Isolation: sql.LevelReadCommitted}) // SET TRANSACTION, START TRANSACTION
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(x, "UPDATE "+name+" SET v = v + 1 WHERE k = ?", 1); err != nil {
				return err
			}
			return tx.Commit()
		},
		func() error {
			tx, err := c.BeginTx(x, nil) // START TRANSACTION
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(x, "DELETE FROM "+name+" WHERE k = 2"); err != nil {
				return err
			}
			return tx.Rollback()
		},
		func() error { _, err := c.ExecContext(x, "SET @x = 1"); return err },
		func() error { _, err := c.ExecContext(x, "DO 1"); return err },
		func() error { return c.PingContext(x) },
		func() error { _, err := c.ExecContext(x, "DROP TABLE "+name); return err },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	got := p.Counts().Sub(before)
	wantStmts := map[string]int{KindCreate: 1, KindInsert: 2, KindSelect: 2, KindSet: 2, KindBegin: 2,
		KindUpdate: 1, KindCommit: 1, KindDelete: 1, KindRollback: 1, KindOther: 1, KindDrop: 1}
	if !maps.Equal(got.Statements, wantStmts) {
		t.Errorf("Statements = %v\nwant %v", got.Statements, wantStmts)
	}
	// Prepared: the INSERT, the SELECT and the UPDATE with arguments.
	wantCmds := map[string]int{"COM_QUERY": 12, "COM_STMT_PREPARE": 3, "COM_STMT_EXECUTE": 3,
		"COM_STMT_CLOSE": 3, "COM_PING": 1}
	if !maps.Equal(got.Commands, wantCmds) {
		t.Errorf("Commands = %v\nwant %v", got.Commands, wantCmds)
	}
	if got.Total() != 15 || got.Connections != 1 {
		t.Errorf("Total %d, Connections %d; want 15, 1", got.Total(), got.Connections)
	}
}

// A multi-statement text, several result sets, a large reply and an error
// all pass and keep the stream in step.
func TestRepliesOfEveryShape(t *testing.T) {
	p := startProxy(t)
	cfg := p.Config(testCfg)
	cfg.MultiStatements = true
	db := openCfg(cfg)
	defer db.Close()
	c := session(t, db)
	x := ctx(t)
	rows, err := c.QueryContext(x, "SELECT 1; SELECT 'a', 'b' UNION ALL SELECT 'c', 'd'; DO 0")
	if err != nil {
		t.Fatal(err)
	}
	sets := 0
	for {
		for rows.Next() {
		}
		sets++
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil || sets < 2 {
		t.Fatalf("%d result sets, %v", sets, err)
	}
	rows.Close()
	var big string
	if err := c.QueryRowContext(x, "SELECT REPEAT('x', ?)", 3<<20).Scan(&big); err != nil || len(big) != 3<<20 {
		t.Fatalf("3 MiB value: %d bytes, %v", len(big), err)
	}
	var empty int
	if err := c.QueryRowContext(x, "SELECT 1 FROM DUAL WHERE 1 = 0").Scan(&empty); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("no rows: %v", err)
	}
	if _, err := c.ExecContext(x, "SELECT * FROM no_such_table_at_all"); err == nil {
		t.Fatal("a missing table: no error")
	}
	if _, err := c.ExecContext(x, "SELECT ?", 1); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.QueryRowContext(x, "SELECT ? + 1", 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("after it all: %d, %v", n, err)
	}
	if got := p.Counts(); got.Malformed+got.Unfollowed != 0 {
		t.Fatalf("counts %+v", got)
	}
}

// A client that insists on TLS learns that the proxy offers none.
func TestTLSIsNotOffered(t *testing.T) {
	p := startProxy(t)
	cfg := p.Config(testCfg)
	cfg.TLSConfig = "true"
	db := openCfg(cfg)
	defer db.Close()
	err := db.PingContext(ctx(t))
	if !errors.Is(err, driver.ErrNoTLS) {
		t.Fatalf("ping with tls=true: %v, want ErrNoTLS", err)
	}
	cfg.TLSConfig = "preferred" // falls back to plain text
	db2 := openCfg(cfg)
	defer db2.Close()
	if err := db2.PingContext(ctx(t)); err != nil {
		t.Fatalf("ping with tls=preferred: %v", err)
	}
}

// The n-th statement's hook runs once the server applied it and before the
// client hears: a Kill there, inside an acquire's transaction, loses the
// grant, and the server rolls it back.
func TestAfterStatementsKillInsideAcquire(t *testing.T) {
	designs(t, func(t *testing.T, d dbsem.Design) {
		p := startProxy(t)
		admin := direct(t)
		s, o := semaphore(t, through(t, p), admin, d)
		// A first acquire sets the key up; a second shows how many
		// statements an acquire of a set-up key is.
		for range 2 {
			before := p.Counts()
			l, err := s.Acquire(ctx(t), "k", 10*time.Second, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx(t), "k", l.Token); err != nil {
				t.Fatal(err)
			}
			t.Logf("acquire and release: %v", p.Counts().Sub(before).Statements)
		}
		before := p.Counts()
		if _, err := s.Acquire(ctx(t), "k", 10*time.Second, 2); err != nil {
			t.Fatal(err)
		}
		perAcquire := p.Counts().Sub(before).Total()
		if n := live(t, admin, o, "k"); n != 1 {
			t.Fatalf("%d live leases, want 1", n)
		}

		// Strike right after the statement before COMMIT: the grant's
		// INSERT (master-row) or UPDATE (row-per-slot).
		start := p.Counts()
		var returned atomic.Bool
		type seen struct {
			sent     map[string]int // the statements sent when the hook ran
			returned bool           // the acquire had returned
		}
		hook := make(chan seen, 1)
		p.AfterStatements(start.Total()+perAcquire-1, func() {
			hook <- seen{p.Counts().Sub(start).Statements, returned.Load()}
			p.Kill()
		})
		_, err := s.Acquire(ctx(t), "k", 10*time.Second, 2)
		returned.Store(true)
		var h seen
		select {
		case h = <-hook:
		default:
			t.Fatal("the hook did not run")
		}
		if h.returned {
			t.Fatal("the hook ran after the client heard its reply")
		}
		sent := h.sent
		if err == nil || errors.Is(err, dbsem.ErrUnknownOutcome) {
			t.Fatalf("acquire killed mid-transaction: %v, want a plain error", err)
		}
		want := KindInsert
		if d == dbsem.RowPerSlot {
			want = KindUpdate
		}
		if sent[want] != 1 || sent[KindCommit] != 0 || p.Counts().Sub(start).Total() != perAcquire-1 {
			t.Fatalf("struck when %v were sent, want the %s and not the COMMIT", sent, want)
		}
		t.Logf("acquire: %v", err)
		// The server rolled back: the grant is gone (polling: the
		// rollback follows the socket's close).
		deadline := time.Now().Add(5 * time.Second)
		for live(t, admin, o, "k") != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%d live leases 5 s after the kill, want the first one only", live(t, admin, o, "k"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		// And the proxy serves the client again. The killed session's row
		// lock goes only once the server has noticed the socket close and
		// rolled back, which a loaded server does later than the rollback
		// of its data shows: until then SKIP LOCKED passes over that slot
		// and the acquire finds every slot held.
		for {
			_, err := s.Acquire(ctx(t), "k", 10*time.Second, 2)
			if err == nil {
				break
			}
			if !errors.Is(err, dbsem.ErrFull) || time.Now().After(deadline.Add(5*time.Second)) {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// A sleeping hook holds the reply, and only that one.
func TestAfterStatementsHoldsTheReply(t *testing.T) {
	p := startProxy(t)
	c := session(t, through(t, p))
	x := ctx(t)
	n := p.Counts().Total()
	p.AfterStatements(n+2, func() { time.Sleep(300 * time.Millisecond) })
	var took [3]time.Duration
	for i := range took {
		start := time.Now()
		var v int
		if err := c.QueryRowContext(x, "SELECT 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		took[i] = time.Since(start)
	}
	if took[1] < 300*time.Millisecond || took[0] > took[1]-150*time.Millisecond || took[2] > took[1]-150*time.Millisecond {
		t.Fatalf("statements took %v; want only the second held 300 ms", took)
	}
}

// A lost COMMIT reply: dbsem answers ErrUnknownOutcome, and the lease is in
// the table; its token releases it.
func TestDropCommitReply(t *testing.T) {
	designs(t, func(t *testing.T, d dbsem.Design) {
		p := startProxy(t)
		admin := direct(t)
		s, o := semaphore(t, through(t, p), admin, d)
		// Set the key up first: row-per-slot commits its rows.
		l, err := s.Acquire(ctx(t), "k", 10*time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx(t), "k", l.Token); err != nil {
			t.Fatal(err)
		}
		p.DropCommitReply()
		l, err = s.Acquire(ctx(t), "k", 10*time.Second, 1)
		if !errors.Is(err, dbsem.ErrUnknownOutcome) {
			t.Fatalf("acquire: %v, want ErrUnknownOutcome", err)
		}
		if n := live(t, admin, o, "k"); n != 1 {
			t.Fatalf("%d live leases, want the committed one", n)
		}
		if got := p.Counts(); got.Dropped != 1 {
			t.Fatalf("Dropped = %d, want 1", got.Dropped)
		}
		// The arm is spent: the next COMMIT's reply passes.
		if _, err := s.Acquire(ctx(t), "k", 10*time.Second, 1); !errors.Is(err, dbsem.ErrFull) {
			t.Fatalf("next acquire: %v, want ErrFull", err)
		}
		if err := s.Release(ctx(t), "k", l.Token); err != nil {
			t.Fatalf("release of the unknown outcome's lease: %v", err)
		}
		if _, err := s.Acquire(ctx(t), "k", 10*time.Second, 1); err != nil {
			t.Fatal(err)
		}
		if got := p.Counts(); got.Dropped != 1 {
			t.Fatalf("Dropped = %d, want 1", got.Dropped)
		}
	})
}

// A partition holds a statement's reply and a new connection until Heal.
func TestPartitionHoldsHealReleases(t *testing.T) {
	p := startProxy(t)
	db := through(t, p)
	c := session(t, db)
	x := ctx(t)
	if err := c.PingContext(x); err != nil {
		t.Fatal(err)
	}
	p.Partition()
	done := make(chan error, 2)
	go func() {
		var v int
		done <- c.QueryRowContext(x, "SELECT 1").Scan(&v)
	}()
	fresh := through(t, p) // a connection opened during the partition
	go func() { done <- fresh.PingContext(x) }()
	select {
	case err := <-done:
		t.Fatalf("a statement passed the partition: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.Heal()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("still held 5 s after Heal")
		}
	}
}

// Kill closes the connections; their transactions roll back; the client
// can connect again.
func TestKill(t *testing.T) {
	p := startProxy(t)
	admin := direct(t)
	name := table(t, admin, "k INT PRIMARY KEY")
	db := through(t, p)
	c := session(t, db)
	x := ctx(t)
	tx, err := c.BeginTx(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(x, "INSERT INTO "+name+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if err := tx.Commit(); err == nil {
		t.Fatal("commit after Kill succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Rolled back: the row lock is free again.
		c2, err := admin.Conn(x)
		if err != nil {
			t.Fatal(err)
		}
		c2.ExecContext(x, "SET SESSION innodb_lock_wait_timeout = 1")
		_, err = c2.ExecContext(x, "INSERT INTO "+name+" VALUES (1)")
		c2.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed transaction still holds its row 5 s later: %v", err)
		}
	}
	if err := db.PingContext(x); err != nil {
		t.Fatalf("a new connection after Kill: %v", err)
	}
	if n := p.Counts().Connections; n != 2 {
		t.Fatalf("Connections = %d, want 2", n)
	}
}

// ConnectionIDs names the server's ids of the proxy's connections, and
// KillConnections closes them from the server's side.
func TestKillConnectionsByID(t *testing.T) {
	p := startProxy(t)
	admin := direct(t)
	db := through(t, p)
	c := session(t, db)
	x := ctx(t)
	var id int64
	if err := c.QueryRowContext(x, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	ids := p.ConnectionIDs()
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("ConnectionIDs = %v, CONNECTION_ID() = %d", ids, id)
	}
	if err := KillConnections(x, admin, ids...); err != nil {
		t.Fatal(err)
	}
	var v int
	err := c.QueryRowContext(x, "SELECT 1").Scan(&v)
	if err == nil {
		t.Fatal("a killed connection still answers")
	}
	t.Logf("after KILL CONNECTION: %v", err)
	deadline := time.Now().Add(5 * time.Second)
	for len(p.ConnectionIDs()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still lists %v", p.ConnectionIDs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Gone already: no error.
	if err := KillConnections(x, admin, id); err != nil {
		t.Fatalf("killing a connection that is gone: %v", err)
	}

	// A connection waiting for its reply reads EOF, as it would without
	// the proxy (MariaDB closes the socket without an error packet).
	c2 := session(t, db)
	if err := c2.PingContext(x); err != nil {
		t.Fatal(err)
	}
	ids = p.ConnectionIDs()
	done := make(chan error, 1)
	go func() {
		_, err := c2.ExecContext(x, "DO SLEEP(5)")
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := KillConnections(x, admin, ids...); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, driver.ErrInvalidConn) {
		t.Fatalf("a statement under way when killed: %v, want ErrInvalidConn", err)
	}
	if err := db.PingContext(x); err != nil {
		t.Fatal(err)
	}
}

// clockOffset reads UTC_TIMESTAMP(6) on c (through a skewed proxy) and on
// the server directly, and returns the difference.
func clockOffset(t testing.TB, c *sql.Conn, admin *sql.DB, prepared bool) time.Duration {
	t.Helper()
	x := ctx(t)
	var skewed, truth string
	q, args := "SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')", []any(nil)
	if prepared {
		q, args = "SELECT DATE_FORMAT(UTC_TIMESTAMP(6) + INTERVAL ? SECOND, '%Y-%m-%d %H:%i:%s.%f')", []any{0}
	}
	if err := c.QueryRowContext(x, q, args...).Scan(&skewed); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRowContext(x, "SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')").Scan(&truth); err != nil {
		t.Fatal(err)
	}
	const layout = "2006-01-02 15:04:05.000000"
	a, err1 := time.Parse(layout, skewed)
	b, err2 := time.Parse(layout, truth)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return a.Sub(b)
}

// Skew: the session's clock reads offset from the true one, and runs.
func TestSkew(t *testing.T) {
	p := startProxy(t)
	admin := direct(t)
	c := session(t, through(t, p))
	near := func(got, want time.Duration) bool { return got > want-time.Second && got < want+time.Second }

	p.Skew(time.Hour)
	if off := clockOffset(t, c, admin, false); !near(off, time.Hour) {
		t.Fatalf("offset %v with Skew(1h)", off)
	}
	var a, b float64
	x := ctx(t)
	if err := c.QueryRowContext(x, "SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP(6))").Scan(&a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := c.QueryRowContext(x, "SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP(6))").Scan(&b); err != nil {
		t.Fatal(err)
	}
	if moved := b - a; moved < 0.29 || moved > 1.5 {
		t.Fatalf("the skewed clock moved %.3f s in 300 ms", moved)
	}

	p.Skew(-90 * time.Second)
	if off := clockOffset(t, c, admin, true); !near(off, -90*time.Second) {
		t.Fatalf("offset %v with Skew(-90s), prepared", off)
	}

	// ROW_COUNT() still reads the client's statement's.
	name := table(t, admin, "k INT PRIMARY KEY")
	if _, err := c.ExecContext(x, "INSERT INTO "+name+" VALUES (1), (2), (3)"); err != nil {
		t.Fatal(err)
	}
	var rc int
	if err := c.QueryRowContext(x, "SELECT ROW_COUNT()").Scan(&rc); err != nil || rc != 3 {
		t.Fatalf("ROW_COUNT() = %d, %v; want 3", rc, err)
	}

	p.Skew(0)
	if off := clockOffset(t, c, admin, false); !near(off, 0) {
		t.Fatalf("offset %v after Skew(0)", off)
	}
	got := p.Counts()
	if got.Injected == 0 || got.InjectFailed != 0 || got.Statements[KindSet] != 0 {
		t.Fatalf("counts %+v: want SETs injected, none failed, none counted as the client's", got)
	}
	n := got.Injected
	if off := clockOffset(t, c, admin, false); !near(off, 0) {
		t.Fatalf("offset %v", off)
	}
	if got := p.Counts().Injected; got != n {
		t.Fatalf("%d SETs injected after the skew ended and DEFAULT was set", got-n)
	}
}

// A client whose clock is ahead (Skew) takes a lease that is still live.
func TestSkewStealsALiveLease(t *testing.T) {
	p := startProxy(t)
	admin := direct(t)
	honest, o := semaphore(t, admin, admin, dbsem.MasterRow)
	if _, err := honest.Acquire(ctx(t), "k", 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	ahead, err := dbsem.Open(ctx(t), through(t, p), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ahead.Acquire(ctx(t), "k", 10*time.Second, 1); !errors.Is(err, dbsem.ErrFull) {
		t.Fatalf("acquire with a true clock: %v, want ErrFull", err)
	}
	p.Skew(time.Minute)
	if _, err := ahead.Acquire(ctx(t), "k", 10*time.Second, 1); err != nil {
		t.Fatalf("acquire with a clock a minute ahead: %v, want it granted", err)
	}
}

// Close ends every goroutine even with connections open and a partition
// holding them.
func TestCloseWithPartitionedConnections(t *testing.T) {
	p := startProxy(t)
	c := session(t, through(t, p))
	if err := c.PingContext(ctx(t)); err != nil {
		t.Fatal(err)
	}
	p.Partition()
	x, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c.PingContext(x)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	faultnettest.NoGoroutines(t)
}

// A hook whose statement never gets its reply runs when its connection
// ends.
func TestAfterStatementsWhenTheConnectionDies(t *testing.T) {
	p := startProxy(t)
	c := session(t, through(t, p))
	x := ctx(t)
	if err := c.PingContext(x); err != nil {
		t.Fatal(err)
	}
	fired := make(chan struct{})
	p.AfterStatements(p.Counts().Total()+1, func() { close(fired) })
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.Kill()
	}()
	if _, err := c.ExecContext(x, "DO SLEEP(5)"); err == nil {
		t.Fatal("the statement survived the Kill")
	}
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the hook did not run")
	}
}

// LOAD DATA LOCAL INFILE: the file's packets pass between the request and
// the reply, and the stream stays in step.
func TestLocalInfile(t *testing.T) {
	p := startProxy(t)
	admin := direct(t)
	var on int
	if err := admin.QueryRowContext(ctx(t), "SELECT @@local_infile").Scan(&on); err != nil || on != 1 {
		t.Skipf("the server refuses LOCAL INFILE (local_infile %d, %v)", on, err)
	}
	name := table(t, admin, "k INT PRIMARY KEY")
	reader := unique("rows")
	driver.RegisterReaderHandler(reader, func() io.Reader { return strings.NewReader("1\n2\n3\n") })
	defer driver.DeregisterReaderHandler(reader)
	c := session(t, through(t, p))
	x := ctx(t)
	res, err := c.ExecContext(x, "LOAD DATA LOCAL INFILE 'Reader::"+reader+"' INTO TABLE "+name)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 3 {
		t.Fatalf("%d rows loaded", n)
	}
	var n int
	if err := c.QueryRowContext(x, "SELECT COUNT(*) FROM "+name+" WHERE k > ?", 0).Scan(&n); err != nil || n != 3 {
		t.Fatalf("count %d, %v", n, err)
	}
	if got := p.Counts(); got.Statements[KindOther] != 1 || got.Malformed != 0 {
		t.Fatalf("counts %+v", got)
	}
}

// The mariadb command-line client (libmariadb, another driver) works
// through the proxy and is counted the same way.
func TestMariaDBClient(t *testing.T) {
	cli, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skip("no mariadb client")
	}
	p := startProxy(t)
	admin := direct(t)
	name := table(t, admin, "k INT PRIMARY KEY, v VARCHAR(10)")
	host, port, _ := net.SplitHostPort(p.Addr())
	script := "INSERT INTO " + name + " VALUES (1, 'a'), (2, NULL);" +
		"SELECT k, v FROM " + name + " ORDER BY k;" +
		"PREPARE s FROM 'SELECT v FROM " + name + " WHERE k = ?'; SET @k = 1; EXECUTE s USING @k;" +
		"SELECT CAST('x' AS SIGNED); SHOW WARNINGS;" +
		"START TRANSACTION; UPDATE " + name + " SET v = 'b' WHERE k = 2; COMMIT;"
	run := func(args ...string) string {
		args = append([]string{"--no-defaults", "--protocol=tcp", "-h", host, "-P", port, "-u", testCfg.User, testCfg.DBName}, args...)
		out, err := exec.CommandContext(ctx(t), cli, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mariadb %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("-e", script)
	if !strings.Contains(out, "Truncated incorrect") || !strings.Contains(out, "NULL") {
		t.Fatalf("output:\n%s", out)
	}
	got := p.Counts()
	t.Logf("counts %v %v", got.Statements, got.Commands)
	for kind, n := range map[string]int{KindInsert: 1, KindUpdate: 1, KindCommit: 1, KindBegin: 1} {
		if got.Statements[kind] != n {
			t.Errorf("%s: %d, want %d", kind, got.Statements[kind], n)
		}
	}
	if got.Malformed+got.Unfollowed+got.Refused != 0 {
		t.Fatalf("counts %+v", got)
	}
	var v string
	if err := admin.QueryRowContext(ctx(t), "SELECT v FROM "+name+" WHERE k = 2").Scan(&v); err != nil || v != "b" {
		t.Fatalf("v = %q, %v", v, err)
	}
}

// A hook set for a statement already sent runs after the next one, as the
// simulator's does; hooks due together run in the order of their n.
func TestAfterStatementsLate(t *testing.T) {
	p := startProxy(t)
	c := session(t, through(t, p))
	x := ctx(t)
	for range 2 {
		if _, err := c.ExecContext(x, "DO 0"); err != nil {
			t.Fatal(err)
		}
	}
	ran := make(chan int, 3)
	p.AfterStatements(2, func() { ran <- 2 })
	p.AfterStatements(1, func() { ran <- 1 })
	p.AfterStatements(4, func() { ran <- 4 })
	if _, err := c.ExecContext(x, "DO 0"); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 || <-ran != 1 || <-ran != 2 {
		t.Fatalf("after statement 3: %d hooks ran, want those of 1 and 2, in order", len(ran))
	}
	if _, err := c.ExecContext(x, "DO 0"); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || <-ran != 4 {
		t.Fatal("the hook of statement 4 did not run after it")
	}
}
