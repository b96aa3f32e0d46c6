package mariadbsim

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/model/dbsem"
)

// setUp is a process that opens the semaphore and sets keys up (max 1,
// or n), then registers the processes of then.
func setUp(w *World, d dbsem.Design, keys []string, then func(), n ...int) {
	w.Go("setup", func(p *Process) {
		s := open(p, dbsem.Options{Design: d})
		for _, k := range keys {
			must("release", s.Release(bg, k, acquire(s, k, time.Second, append(n, 1)[0]).Token), nil)
		}
		then()
	})
}

// atLockMaster runs f after the next lockMaster of the master-row acquire
// that process name starts at its statement first: selectKey, SET
// TRANSACTION, START TRANSACTION, lockMaster.
func atLockMaster(w *World, name string, first int, f func()) {
	w.AfterStatements(name, first+3, func() {
		if c := w.Counters(name); c.Begin != 1 || c.Select != 2 {
			panic(fmt.Sprintf("%s: hook after %+v, not after its lockMaster", name, c))
		}
		f()
	})
}

func wantMySQL(what string, err error, number uint16) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != number {
		panic(fmt.Sprintf("%s: got %v, want error %d", what, err, number))
	}
}

// A killed process's transaction rolls back: the master-row lock another
// acquire is waiting for is released, and that acquire wins.
func TestKillFreesLock(t *testing.T) {
	w := New(Options{})
	var granted int64
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("a", func(p *Process) {
			acquire(open(p, dbsem.Options{}), "k", time.Second, 1)
			panic("a's acquire went on")
		})
		atLockMaster(w, "a", 3, func() {
			w.Pause("a")
			w.After(50*time.Millisecond, func() { w.Kill("a") })
		})
		w.Go("b", func(p *Process) {
			s := open(p, dbsem.Options{})
			p.Sleep(10 * time.Millisecond)
			acquire(s, "k", time.Second, 1)
			granted = w.Now()
		})
	})
	run(t, w)
	if granted < int64(50*time.Millisecond) {
		t.Fatalf("b was granted at %v, before a was killed", time.Duration(granted))
	}
	if n := w.Rows(prefix)[prefix+"tokens"]; n != 1 {
		t.Fatalf("%d token rows, want b's only", n)
	}
}

const lockMaster = "SELECT max_count FROM `t_keys` WHERE lock_key = ? FOR UPDATE"

// begin starts a READ COMMITTED transaction on a connection of p's own.
func begin(p *Process) *sql.Tx {
	tx, err := p.DB().BeginTx(bg, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	must("begin", err, nil)
	return tx
}

// A process killed while waiting for a lock keeps its transaction's locks
// until the wait ends, as MariaDB notices a gone client only when it
// answers (checked against MariaDB 10.11: a closed socket does not end a
// lock wait).
func TestKillWhileWaiting(t *testing.T) {
	w := New(Options{})
	var bLocked int64
	setUp(w, dbsem.MasterRow, []string{"k1", "k2"}, func() {
		w.Go("c", func(p *Process) {
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k2")
			must("c locks k2", err, nil)
			p.Sleep(100 * time.Millisecond)
			must("c commits", tx.Commit(), nil)
		})
		w.Go("a", func(p *Process) {
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k1")
			must("a locks k1", err, nil)
			tx.Exec(lockMaster, "k2") // waits for c, killed meanwhile
			panic("a went on")
		})
		w.After(20*time.Millisecond, func() { w.Kill("a") })
		w.Go("b", func(p *Process) {
			p.Sleep(30 * time.Millisecond)
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k1")
			must("b locks k1", err, nil)
			bLocked = w.Now()
			must("b commits", tx.Commit(), nil)
		})
	})
	run(t, w)
	if bLocked < int64(100*time.Millisecond) {
		t.Fatalf("b locked k1 at %v, before a's wait ended (100ms)", time.Duration(bLocked))
	}
}

// KILL CONNECTION: the acquire in progress fails with "invalid
// connection", its lock goes at once (the acquire waiting for it wins),
// and the process's next operations work on new connections; a killed
// pooled connection is replaced without the caller noticing.
func TestKillConnections(t *testing.T) {
	w := New(Options{})
	setUp(w, dbsem.MasterRow, []string{"k", "j"}, func() {
		w.Go("a", func(p *Process) {
			s := open(p, dbsem.Options{})
			_, err := s.Acquire(bg, "k", time.Second, 1)
			must("acquire on a killed connection", err, mysql.ErrInvalidConn)
			l := acquire(s, "j", time.Second, 1)
			w.KillConnections("a")
			must("refresh on a pool whose connection was killed", s.Refresh(bg, "j", l.Token, time.Second), nil)
			if c := w.Counters("a").Connections; c != 3 {
				panic(fmt.Sprintf("a opened %d connections, want 3", c))
			}
		})
		atLockMaster(w, "a", 3, func() { w.KillConnections("a") })
		w.Go("b", func(p *Process) {
			s := open(p, dbsem.Options{})
			acquire(s, "k", time.Second, 1)
		})
	})
	run(t, w)

	// A statement waiting for a lock ends at once.
	w = New(Options{})
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("holder", func(p *Process) {
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k")
			must("lock", err, nil)
			p.Sleep(time.Second)
			must("commit", tx.Commit(), nil)
		})
		w.Go("a", func(p *Process) {
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k")
			must("waiting statement, killed", err, mysql.ErrInvalidConn)
			if w.Now() > int64(100*time.Millisecond) {
				panic("the killed statement waited on")
			}
			must("commit", tx.Commit(), mysql.ErrInvalidConn)
		})
		w.After(50*time.Millisecond, func() { w.KillConnections("a") })
	})
	run(t, w)
}

// A restart keeps committed leases and loses uncommitted ones; while the
// server is down connections are refused.
func TestRestart(t *testing.T) {
	for _, d := range designs {
		w := New(Options{})
		var a, b dbsem.Lease
		setUp(w, d, []string{"k"}, func() {
			w.Go("a", func(p *Process) {
				s := open(p, dbsem.Options{Design: d})
				a = acquire(s, "k", 10*time.Second, 2)
				w.Go("b", func(p *Process) {
					var err error
					b, err = open(p, dbsem.Options{Design: d}).Acquire(bg, "k", 10*time.Second, 2)
					must("acquire whose COMMIT meets a restart", err, dbsem.ErrUnknownOutcome)
				})
				// b's statements: 2 to open, 7 (master-row) or 5 (row-per-slot)
				// to its INSERT or UPDATE of the lease.
				w.AfterStatements("b", map[dbsem.Design]int{dbsem.MasterRow: 9, dbsem.RowPerSlot: 7}[d], func() {
					if c := w.Counters("b"); c.Insert+c.Update != 1 {
						panic(fmt.Sprintf("b: hook after %+v", c))
					}
					w.Restart(time.Second)
				})
				p.Sleep(100 * time.Millisecond)
				err := s.Refresh(bg, "k", a.Token, 10*time.Second)
				if err == nil || !strings.Contains(err.Error(), "connection refused") {
					panic(fmt.Sprint("refresh while the server is down: ", err))
				}
				p.Sleep(time.Second)
				must("refresh of a committed lease after the restart", s.Refresh(bg, "k", a.Token, 10*time.Second), nil)
				must("refresh of the uncommitted one", s.Refresh(bg, "k", b.Token, 10*time.Second), dbsem.ErrExpired)
			})
		}, 2)
		run(t, w)
		if n := live(w, d, "k"); n != 1 {
			t.Fatalf("%v: %d live leases, want a's", d, n)
		}
	}
}

// A process paused past its lease's ttl loses the slot to another; a
// statement it was waiting in completes meanwhile (its lock is held) and
// it learns so once resumed.
func TestPause(t *testing.T) {
	w := New(Options{})
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("a", func(p *Process) {
			s := open(p, dbsem.Options{})
			l := acquire(s, "k", 100*time.Millisecond, 1)
			w.Pause("a")
			must("refresh once resumed", s.Refresh(bg, "k", l.Token, 100*time.Millisecond), dbsem.ErrExpired)
		})
		w.Go("b", func(p *Process) {
			s := open(p, dbsem.Options{})
			p.Sleep(200 * time.Millisecond)
			acquire(s, "k", 100*time.Millisecond, 1)
		})
		w.After(500*time.Millisecond, func() { w.Resume("a") })
	})
	run(t, w)

	// a is granted its lock at 100 ms, while paused, and moves on only
	// once resumed; c waits for the lock a holds meanwhile.
	aHeard, cLocked := heldThrough(t, func(w *World) { w.Pause("a") }, func(w *World) { w.Resume("a") })
	if aHeard < int64(time.Second) {
		t.Errorf("a moved on at %v, while paused", time.Duration(aHeard))
	}
	if cLocked < int64(time.Second) {
		t.Fatalf("c locked at %v, while paused a held the lock", time.Duration(cLocked))
	}
}

// heldThrough runs a holder that keeps k's master row for 100 ms; a, which
// asks for it at once and is held from 50 ms to 1 s (hold, release); and
// c, which asks for it at 200 ms. It returns when a heard of its lock and
// when c got it.
func heldThrough(t *testing.T, hold, release func(w *World)) (aHeard, cLocked int64) {
	t.Helper()
	w := New(Options{})
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("holder", func(p *Process) {
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k")
			must("lock", err, nil)
			p.Sleep(100 * time.Millisecond)
			must("commit", tx.Commit(), nil)
		})
		w.Go("a", func(p *Process) {
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k") // granted at 100ms, while held
			must("lock", err, nil)
			aHeard = w.Now()
			must("commit", tx.Commit(), nil)
		})
		w.After(50*time.Millisecond, func() { hold(w) })
		w.After(time.Second, func() { release(w) })
		w.Go("c", func(p *Process) {
			p.Sleep(200 * time.Millisecond)
			tx := begin(p)
			_, err := tx.Exec(lockMaster, "k")
			must("lock", err, nil)
			cLocked = w.Now()
			must("commit", tx.Commit(), nil)
		})
	})
	run(t, w)
	return aHeard, cLocked
}

// A partitioned process runs on, but its statements and the server's
// replies wait for the heal; the server keeps its locks meanwhile.
func TestPartition(t *testing.T) {
	w := New(Options{})
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("a", func(p *Process) {
			s := open(p, dbsem.Options{})
			l := acquire(s, "k", 100*time.Millisecond, 1)
			w.Partition("a")
			p.Sleep(50 * time.Millisecond)
			if got := w.Now(); got > int64(200*time.Millisecond) {
				t.Errorf("a's sleep ended at %v: a partition does not stop the process", time.Duration(got))
			}
			// Sent at once, it reaches the server at the heal (500 ms),
			// after b took the lease.
			must("refresh after the heal", s.Refresh(bg, "k", l.Token, 100*time.Millisecond), dbsem.ErrExpired)
			if got := w.Now(); got < int64(500*time.Millisecond) {
				t.Errorf("a's refresh returned at %v, before the heal", time.Duration(got))
			}
		})
		w.Go("b", func(p *Process) {
			s := open(p, dbsem.Options{})
			p.Sleep(200 * time.Millisecond)
			acquire(s, "k", 100*time.Millisecond, 1)
		})
		w.After(500*time.Millisecond, func() { w.Heal("a") })
	})
	run(t, w)

	// A reply the server sends during the partition waits too: a's lock
	// is granted at 100 ms, and a hears of it at the heal, while c waits
	// for the lock a holds.
	aHeard, cLocked := heldThrough(t, func(w *World) { w.Partition("a") }, func(w *World) { w.Heal("a") })
	if aHeard < int64(time.Second) {
		t.Errorf("a heard of its lock at %v, before the heal", time.Duration(aHeard))
	}
	if cLocked < aHeard {
		t.Errorf("c locked at %v, while partitioned a held the lock (until %v)", time.Duration(cLocked), time.Duration(aHeard))
	}
}

// A wait longer than innodb_lock_wait_timeout ends in error 1205 at that
// virtual time; only the statement rolls back.
func TestLockWaitTimeout(t *testing.T) {
	w := New(Options{LockWaitTimeout: 2 * time.Second})
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("a", func(p *Process) {
			acquire(open(p, dbsem.Options{}), "k", time.Second, 1)
		})
		atLockMaster(w, "a", 3, func() {
			w.Pause("a")
			w.After(5*time.Second, func() { w.Resume("a") })
		})
		w.Go("b", func(p *Process) {
			s := open(p, dbsem.Options{})
			p.Sleep(10 * time.Millisecond)
			start := w.Now()
			_, err := s.Acquire(bg, "k", time.Second, 1)
			wantMySQL("acquire", err, 1205)
			if waited := time.Duration(w.Now() - start); waited < 2*time.Second || waited > 2*time.Second+10*time.Millisecond {
				panic(fmt.Sprintf("1205 after %v, want 2s", waited))
			}
		})
	})
	run(t, w)
}

// Two transactions locking two rows in opposite orders: the one whose
// wait closes the cycle (the requester, as the weights tie) gets 1213,
// the other goes on.
func TestDeadlock(t *testing.T) {
	w := New(Options{})
	var errs []error
	setUp(w, dbsem.MasterRow, []string{"k1", "k2"}, func() {
		for _, order := range [][2]string{{"k1", "k2"}, {"k2", "k1"}} {
			w.Go(order[0], func(p *Process) {
				tx := begin(p)
				_, err := tx.Exec(lockMaster, order[0])
				must("first lock", err, nil)
				p.Sleep(10 * time.Millisecond)
				_, err = tx.Exec(lockMaster, order[1])
				errs = append(errs, err)
				tx.Rollback()
			})
		}
	})
	run(t, w)
	if len(errs) != 2 || errs[0] == nil || errs[1] != nil {
		t.Fatalf("errors %v, want the second requester's 1213 first, then the first's success", errs)
	}
	wantMySQL("deadlock", errs[0], 1213)
}

// A session whose clock is ahead takes a lease others still see live, as
// dbsem's documentation says; a clock put right again does not.
func TestSkewClock(t *testing.T) {
	w := New(Options{})
	setUp(w, dbsem.MasterRow, []string{"k"}, func() {
		w.Go("a", func(p *Process) {
			acquire(open(p, dbsem.Options{}), "k", 10*time.Second, 1)
			w.Go("b", func(p *Process) {
				s := open(p, dbsem.Options{})
				w.SkewClock("b", time.Hour)
				l := acquire(s, "k", 10*time.Second, 1)
				w.SkewClock("b", 0)
				must("refresh, the clock put right", s.Refresh(bg, "k", l.Token, time.Second), nil)
				_, err := s.Acquire(bg, "k", 10*time.Second, 1)
				must("acquire, the clock put right", err, dbsem.ErrFull)
			})
		})
	})
	run(t, w)
}
