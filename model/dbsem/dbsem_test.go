package dbsem

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func acquire(t testing.TB, s *Semaphore, key string, ttl time.Duration, max int) Lease {
	t.Helper()
	l, err := s.Acquire(ctx(t), key, ttl, max)
	if err != nil {
		t.Fatalf("acquire %s max %d: %v", key, max, err)
	}
	return l
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

func TestAcquireUpToMaxThenFull(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d})
		seen := map[string]bool{}
		var leases []Lease
		for range 3 {
			l := acquire(t, s, "jobs", 10*time.Second, 3)
			uuid := l.Token
			if d == RowPerSlot {
				uuid = strings.TrimLeft(uuid, "0123456789")[1:]
			}
			if seen[l.Token] || len(uuid) != 36 || l.Fence != 0 {
				t.Fatalf("lease %+v: want a fresh UUID and fence 0", l)
			}
			seen[l.Token] = true
			leases = append(leases, l)
		}
		_, err := s.Acquire(ctx(t), "jobs", 10*time.Second, 3)
		wantErr(t, "4th acquire", err, ErrFull)
		acquire(t, s, "other", time.Second, 1) // keys are independent

		// Release frees a slot, once.
		wantErr(t, "release", s.Release(ctx(t), "jobs", leases[1].Token), nil)
		wantErr(t, "second release", s.Release(ctx(t), "jobs", leases[1].Token), ErrExpired)
		wantErr(t, "release under another key", s.Release(ctx(t), "other", leases[0].Token), ErrExpired)
		wantErr(t, "release of a made-up token", s.Release(ctx(t), "jobs", newToken(nil)), ErrExpired)
		wantErr(t, "release of a made-up token", s.Release(ctx(t), "jobs", "1:"+newToken(nil)), ErrExpired)
		acquire(t, s, "jobs", 10*time.Second, 3)
		_, err = s.Acquire(ctx(t), "jobs", 10*time.Second, 3)
		wantErr(t, "acquire after re-filling", err, ErrFull)
		if n := live(t, db, s, "jobs"); n != 3 {
			t.Fatalf("%d live leases, want 3", n)
		}
	})
}

func TestRefreshExtends(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		s := open(t, openDB(t), Options{Design: d})
		// A second's lease: the refresh comes well before its end, even on
		// a loaded machine.
		l := acquire(t, s, "k", time.Second, 1)
		time.Sleep(100 * time.Millisecond)
		wantErr(t, "refresh", s.Refresh(ctx(t), "k", l.Token, 5*time.Second), nil)
		time.Sleep(time.Second) // past the first deadline
		_, err := s.Acquire(ctx(t), "k", time.Second, 1)
		wantErr(t, "acquire past the first deadline", err, ErrFull)
		wantErr(t, "second refresh", s.Refresh(ctx(t), "k", l.Token, 5*time.Second), nil)
		wantErr(t, "release", s.Release(ctx(t), "k", l.Token), nil)
		wantErr(t, "refresh after release", s.Refresh(ctx(t), "k", l.Token, 5*time.Second), ErrExpired)
	})
}

func TestExpiredLeaseIsTakenOver(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d})
		a := acquire(t, s, "k", 200*time.Millisecond, 1)
		time.Sleep(300 * time.Millisecond)
		b := acquire(t, s, "k", 10*time.Second, 1)
		wantErr(t, "refresh of the lost lease", s.Refresh(ctx(t), "k", a.Token, time.Second), ErrExpired)
		wantErr(t, "release of the lost lease", s.Release(ctx(t), "k", a.Token), ErrExpired)
		if n := live(t, db, s, "k"); n != 1 {
			t.Fatalf("%d live leases, want b's only", n)
		}
		wantErr(t, "release by the new holder", s.Release(ctx(t), "k", b.Token), nil)
	})
}

// Unlike upstream, an expired lease stays expired even while its row is
// still there.
func TestExpiredLeaseCannotBeRevived(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d})
		a := acquire(t, s, "k", 200*time.Millisecond, 1)
		b := acquire(t, s, "k2", 200*time.Millisecond, 1)
		time.Sleep(300 * time.Millisecond)
		wantErr(t, "refresh after expiry", s.Refresh(ctx(t), "k", a.Token, 10*time.Second), ErrExpired)
		wantErr(t, "release after expiry", s.Release(ctx(t), "k2", b.Token), ErrExpired)
		if n := live(t, db, s, "k"); n != 0 {
			t.Fatalf("%d live leases after a refused refresh, want 0", n)
		}
		acquire(t, s, "k", time.Second, 1)
		acquire(t, s, "k2", time.Second, 1)
	})
}

func TestFencesFollowGrantOrder(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d, Fencing: true})
		other, err := Open(ctx(t), openDB(t), Options{Design: d, Fencing: true, Prefix: s.o.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		// One after another, from two clients, through releases and expiry.
		var last int64
		for i := range 8 {
			c := []*Semaphore{s, other}[i%2]
			// A second's lease, released at once, or let expire.
			l := acquire(t, c, "f", time.Second, 1)
			if l.Fence != last+1 {
				t.Fatalf("grant %d: fence %d after %d, want %d", i, l.Fence, last, last+1)
			}
			last = l.Fence
			if i%3 == 2 {
				time.Sleep(1100 * time.Millisecond) // let it expire
			} else {
				wantErr(t, "release", c.Release(ctx(t), "f", l.Token), nil)
			}
		}

		// Concurrent grants: a grant that returned before another was
		// invoked has the smaller fence; no two fences are equal.
		type grant struct {
			fence        int64
			invoke, done time.Time
		}
		var mu sync.Mutex
		var grants []grant
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				for range 4 {
					start := time.Now()
					l, err := s.Acquire(ctx(t), "g", 5*time.Second, 3)
					end := time.Now()
					if errors.Is(err, ErrFull) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					grants = append(grants, grant{l.Fence, start, end})
					mu.Unlock()
					s.Release(ctx(t), "g", l.Token)
				}
			})
		}
		wg.Wait()
		fences := map[int64]bool{}
		for _, g := range grants {
			if fences[g.fence] {
				t.Fatalf("fence %d granted twice", g.fence)
			}
			fences[g.fence] = true
			for _, h := range grants {
				if g.done.Before(h.invoke) && g.fence >= h.fence {
					t.Fatalf("fence %d returned before the acquire that got fence %d began", g.fence, h.fence)
				}
			}
		}
		if len(grants) < 3 {
			t.Fatalf("only %d concurrent grants", len(grants))
		}
	})
}

func TestMaxMustAgree(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		s := open(t, openDB(t), Options{Design: d})
		acquire(t, s, "k", 10*time.Second, 2)
		_, err := s.Acquire(ctx(t), "k", 10*time.Second, 3)
		wantErr(t, "acquire with another max", err, ErrMismatch)
		if msg := err.Error(); !strings.Contains(msg, "max 2") || !strings.Contains(msg, "max 3") {
			t.Fatalf("%q does not name both maxes", msg)
		}
		_, err = s.Acquire(ctx(t), "k", 10*time.Second, 1)
		wantErr(t, "acquire with a smaller max", err, ErrMismatch)
		acquire(t, s, "k", 10*time.Second, 2)
		_, err = s.Acquire(ctx(t), "k", 10*time.Second, 2)
		wantErr(t, "acquire with the agreed max", err, ErrFull)

		// The other design on the same tables disagrees too.
		o := Options{Prefix: s.o.Prefix, Design: 1 - d}
		x, err := Open(ctx(t), openDB(t), o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = x.Acquire(ctx(t), "k", 10*time.Second, 2)
		wantErr(t, "acquire with the other design", err, ErrMismatch)
		if msg := err.Error(); !strings.Contains(msg, d.String()) || !strings.Contains(msg, o.Design.String()) {
			t.Fatalf("%q does not name both designs", msg)
		}
	})
}

func TestLargeMax(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d, Fencing: true})
		for range 3 {
			acquire(t, s, "big", 10*time.Second, MaxSlots)
		}
		if d == RowPerSlot {
			var n int
			q := s.tables.Replace("SELECT COUNT(*) FROM {slots} WHERE lock_key = ?")
			if err := db.QueryRowContext(ctx(t), q, "big").Scan(&n); err != nil || n != MaxSlots {
				t.Fatalf("%d rows (%v), want %d", n, err, MaxSlots)
			}
		}
	})
}

func TestConcurrentAcquirersNeverExceedMax(t *testing.T) {
	for _, o := range []Options{{Design: MasterRow}, {Design: RowPerSlot}, {Design: MasterRow, Fencing: true}, {Design: RowPerSlot, Fencing: true}} {
		name := o.Design.String()
		if o.Fencing {
			name += "/fencing"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t)
			s := open(t, db, o)
			const max = 3
			var holders, most, granted, full atomic.Int64
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					for range 5 {
						l, err := s.Acquire(ctx(t), "c", 10*time.Second, max)
						if errors.Is(err, ErrFull) {
							full.Add(1)
							continue
						}
						if err != nil {
							t.Error(err)
							return
						}
						granted.Add(1)
						n := holders.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(2 * time.Millisecond)
						holders.Add(-1)
						if err := s.Release(ctx(t), "c", l.Token); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d granted, %d full, at most %d held at once", name, granted.Load(), full.Load(), most.Load())
			if most.Load() > max {
				t.Fatalf("%d leases held at once, max %d", most.Load(), max)
			}
			if granted.Load() < max {
				t.Fatalf("only %d grants", granted.Load())
			}
			if n := live(t, db, s, "c"); n != 0 {
				t.Fatalf("%d live leases after every release", n)
			}
		})
	}
}

// The database session's clock decides expiry (package doc): a session
// ahead takes a live lease; a session behind grants a lease the others see
// expired at once.
func TestSessionClockDecidesExpiry(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		s := open(t, openDB(t), Options{Design: d})
		reopen := func(skew time.Duration) *Semaphore {
			x, err := Open(ctx(t), clientDB(t, skew), Options{Design: d, Prefix: s.o.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		ahead, behind := reopen(time.Hour), reopen(-time.Hour)

		a := acquire(t, s, "ahead", 10*time.Second, 1)
		acquire(t, ahead, "ahead", 10*time.Second, 1) // an hour ahead, a's lease is over
		wantErr(t, "refresh of the lease taken over", s.Refresh(ctx(t), "ahead", a.Token, time.Second), ErrExpired)

		b := acquire(t, behind, "behind", 10*time.Second, 1)
		acquire(t, s, "behind", 10*time.Second, 1) // b's deadline is an hour ago
		wantErr(t, "refresh of the lease granted behind", behind.Refresh(ctx(t), "behind", b.Token, time.Second), ErrExpired)

		// A frozen clock still refreshes: the same deadline again is no miss.
		c := acquire(t, ahead, "frozen", 10*time.Second, 1)
		wantErr(t, "refresh", ahead.Refresh(ctx(t), "frozen", c.Token, 10*time.Second), nil)
		wantErr(t, "refresh to the same deadline", ahead.Refresh(ctx(t), "frozen", c.Token, 10*time.Second), nil)
	})
}

func TestOpenIsIdempotent(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d})
		l := acquire(t, s, "k", 10*time.Second, 1)
		for range 2 {
			again, err := Open(ctx(t), db, Options{Design: d, Prefix: s.o.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			_, err = again.Acquire(ctx(t), "k", 10*time.Second, 1)
			wantErr(t, "acquire after reopening", err, ErrFull)
			wantErr(t, "refresh after reopening", again.Refresh(ctx(t), "k", l.Token, time.Second), nil)
		}
	})
}

func TestDropLeavesNoTables(t *testing.T) {
	db := openDB(t)
	prefix := uniquePrefix()
	count := func() int {
		var n int
		q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND LEFT(table_name, ?) = ?"
		if err := db.QueryRowContext(ctx(t), q, len(prefix), prefix).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var s *Semaphore
	for _, d := range []Design{MasterRow, RowPerSlot} {
		var err error
		if s, err = Open(ctx(t), db, Options{Design: d, Prefix: prefix}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Drop(context.Background()) })
		acquire(t, s, d.String(), time.Second, 2)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d tables, want keys, tokens and slots", n)
	}
	if err := s.Drop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d tables left after Drop", n)
	}
	if err := s.Drop(ctx(t)); err != nil {
		t.Fatalf("second drop: %v", err)
	}
}

func TestArgumentsChecked(t *testing.T) {
	for _, o := range []Options{
		{Prefix: "no-dashes"},
		{Prefix: strings.Repeat("p", 51)},
		{Design: 7},
		{Defects: Defects{NoSkipLocked: true}},
		{Design: RowPerSlot, Defects: Defects{CountWithoutLock: true}},
		{Defects: Defects{FenceFromUUID: true}},
		{Defects: Defects{Now: time.Now}},
	} {
		if _, err := Open(context.Background(), nil, o); err == nil {
			t.Errorf("Open accepted %+v", o)
		}
	}
	s := &Semaphore{} // arguments are checked before any statement
	for _, c := range []struct {
		key string
		ttl time.Duration
		max int
	}{{"", time.Second, 1}, {strings.Repeat("k", 256), time.Second, 1}, {"k", 999 * time.Microsecond, 1}, {"k", time.Second, 0}, {"k", time.Second, MaxSlots + 1}} {
		if _, err := s.Acquire(context.Background(), c.key, c.ttl, c.max); err == nil {
			t.Errorf("Acquire accepted %d-byte key, ttl %v, max %d", len(c.key), c.ttl, c.max)
		}
	}
	if err := s.Refresh(context.Background(), "k", "t", 0); err == nil {
		t.Error("Refresh accepted ttl 0")
	}
}

// A context ends an acquire that waits for a row lock.
func TestContextEndsAWait(t *testing.T) {
	db := openDB(t)
	s := open(t, db, Options{})
	acquire(t, s, "k", time.Second, 1)
	tx, err := db.BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx(t), s.tables.Replace(lockMaster), "k"); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Acquire(c, "k", time.Second, 1)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("acquire behind a locked master row: %v after %v, want the deadline", err, time.Since(start))
	}
}

// A lost reply to the acquire's COMMIT: the outcome is unknown, and the
// lease that may have been granted comes with the error.
func TestLostCommitReply(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		p := startProxy(t)
		db := openDB(t, p.addr())
		s := open(t, db, Options{Design: d})
		// Set the key up first: a row-per-slot key's set-up commits too.
		wantErr(t, "release", s.Release(ctx(t), "k", acquire(t, s, "k", time.Second, 2).Token), nil)
		p.dropCommitReplies(1)
		l, err := s.Acquire(ctx(t), "k", 10*time.Second, 2)
		wantErr(t, "acquire whose COMMIT reply is lost", err, ErrUnknownOutcome)
		if l.Token == "" {
			t.Fatal("no lease with the unknown outcome")
		}
		if n := live(t, db, s, "k"); n != 1 {
			t.Fatalf("%d live leases, want the one that committed", n)
		}
		wantErr(t, "release of the lease that may have been granted", s.Release(ctx(t), "k", l.Token), nil)
	})
}

// Holders that refresh and release just as their leases expire, while
// others take those leases over: every answer is a grant, ErrFull or
// ErrExpired, never a deadlock or another error.
func TestTakeoverRacesAnswerCleanly(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		s := open(t, openDB(t), Options{Design: d, Fencing: true})
		var ops, expired atomic.Int64
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				for j := range 15 {
					l, err := s.Acquire(ctx(t), "k", 20*time.Millisecond, 2)
					ops.Add(1)
					if errors.Is(err, ErrFull) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("acquire: %v", err)
						return
					}
					time.Sleep(time.Duration(15+(i+j)%10) * time.Millisecond) // around the deadline
					if err := s.Refresh(ctx(t), "k", l.Token, 20*time.Millisecond); errors.Is(err, ErrExpired) {
						expired.Add(1)
					} else if err != nil {
						t.Errorf("refresh: %v", err)
					}
					time.Sleep(time.Duration(15+(i*j)%10) * time.Millisecond)
					if err := s.Release(ctx(t), "k", l.Token); errors.Is(err, ErrExpired) {
						expired.Add(1)
					} else if err != nil {
						t.Errorf("release: %v", err)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d acquires, %d refreshes or releases too late", ops.Load(), expired.Load())
	})
}
