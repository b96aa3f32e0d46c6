package consulsim

import (
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/model/consulsem"
)

// one runs f as the only client of a World of o, and returns the World.
func one(t *testing.T, o Options, f func(p *Process, b consulsem.Backend)) *World {
	t.Helper()
	w := world(t, o)
	w.Go("a", func(p *Process) { f(p, p.Backend()) })
	runWorld(t, w)
	return w
}

// until sleeps p until virtual time d.
func until(p *Process, d time.Duration) { p.Sleep(time.Duration(int64(d) - p.Now())) }

// alive says whether key is listed, held by tok.
func alive(b consulsem.Backend, key, tok string) bool {
	l, err := b.List(bg, "p", false)
	if err != nil {
		panic(err)
	}
	e, ok := l.Entries[key]
	return ok && e.Owner == tok
}

func must[V any](v V, err error) V {
	if err != nil {
		panic(err)
	}
	return v
}

// contender creates a session of ttl and its contender key p/<token>.
func contender(b consulsem.Backend, ttl time.Duration, release bool) (tok, key string) {
	tok, _ = must2(b.CreateSession(bg, ttl, release, 0))
	key = "p/" + tok
	if !must(b.PutContender(bg, key, tok, true)) {
		panic("contender refused")
	}
	return tok, key
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// A Consul session is invalidated 2 x TTL after its last renewal, as
// v1.20.2 does; with Decide, at 1, 1.25, 1.5 or 1.75 x TTL instead, never
// before one TTL. A renewal restarts the timer.
func TestConsulExpiryIsADecision(t *testing.T) {
	for choice, want := range []time.Duration{4 * time.Second, 2 * time.Second, 2500 * ms, 3 * time.Second, 3500 * ms} {
		o := Options{Decide: func(n int) int {
			if n != 5 {
				t.Fatalf("Decide(%d) with one client", n)
			}
			return choice
		}}
		one(t, o, func(p *Process, b consulsem.Backend) {
			tok, key := contender(b, 2*time.Second, false)
			start := time.Duration(p.Now())
			until(p, start+want-5*ms)
			if !alive(b, key, tok) {
				t.Errorf("choice %d: gone before %v", choice, want)
			}
			until(p, start+want+5*ms)
			if alive(b, key, tok) {
				t.Errorf("choice %d: alive after %v", choice, want)
			}
			if err := b.RenewSession(bg, tok); !errors.Is(err, consulsem.ErrSessionGone) {
				t.Errorf("choice %d: renewal of an invalidated session: %v", choice, err)
			}
		})
	}
	one(t, Options{}, func(p *Process, b consulsem.Backend) {
		tok, key := contender(b, 2*time.Second, false)
		until(p, 3*time.Second)
		if err := b.RenewSession(bg, tok); err != nil {
			t.Fatal(err)
		}
		until(p, 6900*ms)
		if !alive(b, key, tok) {
			t.Error("gone 3.9 s after a renewal at 3 s (2 x TTL is 4 s)")
		}
	})
}

// Consul refuses a TTL under session_ttl_min; etcd rounds a TTL up to
// whole seconds and raises it to its floor.
func TestTTLFloors(t *testing.T) {
	one(t, Options{SessionTTLMin: time.Second}, func(p *Process, b consulsem.Backend) {
		if _, _, err := b.CreateSession(bg, 500*ms, false, 0); err == nil {
			t.Error("Consul: a TTL of 500ms under session_ttl_min 1s was granted")
		}
		if _, ttl := must2(b.CreateSession(bg, 1500*ms, false, 0)); ttl != 1500*ms {
			t.Errorf("Consul granted %v for 1.5s", ttl)
		}
	})
	one(t, Options{Kind: Etcd, MinTTL: 2 * time.Second}, func(p *Process, b consulsem.Backend) {
		for _, c := range [][2]time.Duration{{300 * ms, 2 * time.Second}, {2100 * ms, 3 * time.Second}, {5 * time.Second, 5 * time.Second}} {
			if _, ttl := must2(b.CreateSession(bg, c[0], false, 0)); ttl != c[1] {
				t.Errorf("etcd granted %v for %v, want %v", ttl, c[0], c[1])
			}
		}
	})
}

// An etcd lease is past its deadline at one TTL, and revoked (its keys
// deleted) at the lessor's next look, every 500 ms: meanwhile its key is
// listed still, and a renewal waits for the revocation and answers gone.
func TestEtcdExpiryAndSweep(t *testing.T) {
	one(t, Options{Kind: Etcd}, func(p *Process, b consulsem.Backend) {
		until(p, 200*ms)
		tok, key := contender(b, time.Second, false) // granted at 200 ms
		until(p, 1300*ms)
		if !alive(b, key, tok) {
			t.Error("revoked before the sweep at 1.5 s")
		}
		err := b.RenewSession(bg, tok)
		if !errors.Is(err, consulsem.ErrSessionGone) || p.Now() != int64(1501*ms) {
			t.Errorf("renewal at 1.3 s of a lease expired at 1.2 s: %v at %v, want gone at the sweep (1.5 s) + the call", err, time.Duration(p.Now()))
		}
		if alive(b, key, tok) {
			t.Error("its key outlived the revocation")
		}
	})
}

// Consul's Behavior: delete removes a session's keys when it ends;
// release leaves them without a session, LockIndex kept, ModifyIndex
// moved on. etcd's keys always go with their lease.
func TestBehaviorDeleteAndRelease(t *testing.T) {
	for _, c := range []struct {
		kind    Kind
		release bool
		kept    bool
	}{{Consul, false, false}, {Consul, true, true}, {Etcd, true, false}} {
		one(t, Options{Kind: c.kind}, func(p *Process, b consulsem.Backend) {
			tok, key := contender(b, 10*time.Second, c.release)
			before := must(b.List(bg, "p", false)).Entries[key]
			if err := b.DestroySession(bg, tok); err != nil {
				t.Fatal(err)
			}
			e, ok := must(b.List(bg, "p", false)).Entries[key]
			if ok != c.kept || ok && (e.Owner != "" || e.LockIndex != before.LockIndex || e.ModIndex <= before.ModIndex) {
				t.Errorf("%s release %v: after the session ended: %+v (listed %v), before %+v", c.kind, c.release, e, ok, before)
			}
		})
	}
}

// The lock key's write checks the contender's session, then the lock
// key's index; on Consul a write that changes nothing keeps the key's
// ModifyIndex. Fences (indexes) increase.
func TestWriteLockChecks(t *testing.T) {
	for _, k := range []Kind{Consul, Etcd} {
		one(t, Options{Kind: k}, func(p *Process, b consulsem.Backend) {
			tok, key := contender(b, 10*time.Second, false)
			w := consulsem.LockWrite{Key: "p/.lock", Value: []byte("v1"), CAS: true, Live: key, Session: tok}
			f1 := must(b.WriteLock(bg, w))
			if _, err := b.WriteLock(bg, w); !errors.Is(err, consulsem.ErrCASLost) {
				t.Errorf("%s: a second create of the lock key: %v", k, err)
			}
			w.Index = f1
			if _, err := b.WriteLock(bg, consulsem.LockWrite{Key: w.Key, CAS: true, Index: f1, Live: "p/x", Session: tok}); !errors.Is(err, consulsem.ErrNotLive) {
				t.Errorf("%s: a write checking a key the session does not hold: %v", k, err)
			}
			f2 := must(b.WriteLock(bg, w)) // the same value
			w.Index, w.Value = f2, []byte("v2")
			f3 := must(b.WriteLock(bg, w))
			if k == Consul && f2 != f1 || k == Etcd && f2 <= f1 || f3 <= f2 {
				t.Errorf("%s: fences %d, %d (the same value), %d", k, f1, f2, f3)
			}
		})
	}
}

// A Consul -dev agent forgets everything in a restart, and its indexes
// start again; a persistent agent and etcd keep sessions and keys, give
// each session a fresh TTL from when they are back, and keep counting.
// Calls meanwhile are refused.
func TestRestart(t *testing.T) {
	for _, c := range []struct {
		o        Options
		keeps    bool
		deadline time.Duration // of a session of TTL 2 s made at 0 and a restart at 1 s, down 3 s
	}{{Options{}, false, 0}, {Options{Persistent: true}, true, 8 * time.Second}, {Options{Kind: Etcd}, true, 6500 * ms}} {
		one(t, c.o, func(p *Process, b consulsem.Backend) {
			tok, key := contender(b, 2*time.Second, false)
			f1 := must(b.WriteLock(bg, consulsem.LockWrite{Key: "p/.lock", Value: []byte("v"), CAS: true}))
			until(p, time.Second)
			if err := p.w.Restart(3 * time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := b.List(bg, "p", false); err == nil {
				t.Errorf("%+v: a listing while the server is down", c.o)
			}
			until(p, 4*time.Second)
			if alive(b, key, tok) != c.keeps {
				t.Errorf("%+v: alive after the restart: %v", c.o, !c.keeps)
			}
			f2 := must(b.WriteLock(bg, consulsem.LockWrite{Key: "p/.lock", Value: []byte("w")}))
			if c.keeps != (f2 > f1) {
				t.Errorf("%+v: fences %d before the restart, %d after", c.o, f1, f2)
			}
			if c.keeps {
				until(p, c.deadline-10*ms)
				if !alive(b, key, tok) {
					t.Errorf("%+v: gone before %v", c.o, c.deadline)
				}
				until(p, c.deadline+510*ms) // etcd's sweep
				if alive(b, key, tok) {
					t.Errorf("%+v: alive after %v", c.o, c.deadline)
				}
			}
		})
	}
}

// A wait for a change returns when another client writes under the
// prefix, or after its max; on etcd, a watch from a revision already
// passed returns at the server's next sync of its watchers (every 100
// ms).
func TestWaitChange(t *testing.T) {
	for _, k := range []Kind{Consul, Etcd} {
		w := world(t, Options{Kind: k})
		var woke, timedOut, synced int64
		w.Go("waiter", func(p *Process) {
			b := p.Backend()
			l := must(b.List(bg, "p", false)) // at 0, answered at 1 ms
			must(0, b.WaitChange(bg, "p", l.Index, time.Second))
			woke = p.Now()
			l = must(b.List(bg, "p", false))
			must(0, b.WaitChange(bg, "p", l.Index, 300*ms))
			timedOut = p.Now() - woke
			p.Sleep(50 * ms)
			must(0, b.DeleteKey(bg, "p/x"))
			must(0, b.WaitChange(bg, "p", l.Index, 300*ms)) // the delete came after l
			synced = p.Now()
		})
		w.Go("writer", func(p *Process) {
			p.Sleep(200 * ms)
			must(p.Backend().PutContender(bg, "p/x", "", false))
		})
		runWorld(t, w)
		if woke != int64(201*ms) || timedOut != int64(302*ms) {
			t.Errorf("%s: woke at %v (want the write at 200 ms + the answer's time), a wait with no change took %v", k, time.Duration(woke), time.Duration(timedOut))
		}
		want := woke + int64(302*ms+50*ms+2*ms) // the delete, then the wait: at once on Consul
		if k == Etcd {
			want = int64(601 * ms) // the sync after 554 ms, and the answer's time
		}
		if synced != want {
			t.Errorf("%s: a wait after a listing that a change followed returned at %v, want %v", k, time.Duration(synced), time.Duration(want))
		}
	}
}

// A partition holds calls both ways until it heals: the call takes effect
// then (and, with a timeout, after its caller gave up). A lost reply's
// write takes effect. A paused client's session expires. A killed
// client's call in flight takes effect.
func TestClientFaults(t *testing.T) {
	w := world(t, Options{Timeout: 100 * ms})
	var dropped []string
	w.o.OnDrop = func(c string) { dropped = append(dropped, c) }
	var errPart, errDrop error
	var healedAt int64
	w.Go("cut", func(p *Process) {
		p.w.Partition("cut")
		_, _, errPart = p.Backend().CreateSession(bg, 10*time.Second, false, 0)
		p.Sleep(time.Second)
	})
	w.Go("drop", func(p *Process) {
		p.w.DropReply("drop")
		_, errDrop = p.Backend().PutContender(bg, "p/dropped", "", false)
	})
	w.Go("paused", func(p *Process) {
		contender(p.Backend(), time.Second, false)
		p.w.Pause("paused")
		p.Sleep(time.Millisecond) // paused: runs again only on Resume
	})
	w.Go("nemesis", func(p *Process) {
		p.Sleep(500 * ms)
		if len(p.w.Sessions()) != 1 {
			t.Errorf("sessions %v at 500 ms: want the paused client's only", p.w.Sessions())
		}
		p.w.Heal("cut")
		healedAt = p.Now()
		p.Sleep(3 * time.Second)
		p.w.Resume("paused")
	})
	runWorld(t, w)
	var te interface{ Timeout() bool }
	if !errors.As(errPart, &te) || !te.Timeout() || healedAt != int64(500*ms) {
		t.Errorf("partitioned: %v (healed at %v)", errPart, time.Duration(healedAt))
	}
	if errDrop == nil || !slices.Equal(dropped, []string{"drop"}) {
		t.Errorf("lost reply: %v, OnDrop %v", errDrop, dropped)
	}
	keys := w.Keys()
	if !slices.Equal(keys, []string{"p/dropped="}) || len(w.Sessions()) != 0 {
		t.Errorf("keys %v, sessions %v: want the dropped reply's key, the partitioned session expired after the heal, the paused one's too", keys, w.Sessions())
	}
}

// The reference's Options.Wait runs on the simulator's clock: an acquire
// of a full semaphore waits, in virtual time, and is granted once the
// holder releases.
func TestAcquireWaitsInVirtualTime(t *testing.T) {
	for _, k := range []Kind{Consul, Etcd} {
		w := world(t, Options{Kind: k})
		var granted int64
		var err error
		w.Go("holder", func(p *Process) {
			s := sem(p, consulsem.Options{})
			l := must(s.Acquire(bg, "p", 1, 10*time.Second))
			p.Sleep(3 * time.Second)
			must(0, s.Release(bg, "p", l.Token))
		})
		w.Go("waiter", func(p *Process) {
			p.Sleep(100 * ms)
			_, err = sem(p, consulsem.Options{Wait: time.Minute}).Acquire(bg, "p", 1, 10*time.Second)
			granted = p.Now()
		})
		start := time.Now()
		runWorld(t, w)
		if err != nil || granted < int64(3*time.Second) || granted > int64(3200*ms) || time.Since(start) > 2*time.Second {
			t.Errorf("%s: the waiting acquire: %v at %v (virtual), after %v (real)", k, err, time.Duration(granted), time.Since(start))
		}
	}
}

// The simulator's Timing is consulsem's for the real backends.
func TestTimingIsConsulsems(t *testing.T) {
	c := must(consulsem.Consul("127.0.0.1:1", nil, consulsem.Options{}))
	cli := must(clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()}))
	defer cli.Close()
	e := must(consulsem.Etcd(cli, consulsem.Options{}))
	for _, c := range []struct {
		k    Kind
		want consulsem.Timing
	}{{Consul, c.Timing()}, {Etcd, e.Timing()}} {
		var got consulsem.Timing
		one(t, Options{Kind: c.k}, func(p *Process, b consulsem.Backend) { got = b.Timing() })
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.k, got, c.want)
		}
	}
}

// Consul's lock-delay: once a session with a lock-delay is invalidated
// (destroyed, or its TTL timer fired), ?acquire of each key it held is
// refused (false, no Raft index taken, whichever session asks, one that
// does not exist included) until the delay has run out from the
// invalidation, at most 60 s; a key deleted before the session ended is
// not delayed (a release starts nothing); etcd has no lock-delay.
func TestConsulLockDelay(t *testing.T) {
	acquire := func(b consulsem.Backend, key, tok string) bool { return must(b.PutContender(bg, key, tok, true)) }
	index := func(b consulsem.Backend) uint64 { return must(b.List(bg, "p", false)).Index }
	// destroyed
	one(t, Options{}, func(p *Process, b consulsem.Backend) {
		a, _ := must2(b.CreateSession(bg, 10*time.Second, false, 2*time.Second))
		c, _ := must2(b.CreateSession(bg, 10*time.Second, false, 0))
		if !acquire(b, "p/x", a) {
			t.Fatal("first acquire refused")
		}
		if err := b.DestroySession(bg, a); err != nil {
			t.Fatal(err)
		}
		end := time.Duration(p.Now()) - ms // the destroy took effect as it was sent
		until(p, end+time.Second)
		before := index(b)
		if acquire(b, "p/x", c) {
			t.Error("acquired 1 s into a 2 s lock-delay")
		}
		if after := index(b); after != before {
			t.Errorf("a refused ?acquire took an index: %d, then %d", before, after)
		}
		if _, err := b.PutContender(bg, "p/x", "00000000-0000-4000-8000-00000000dead", true); err != nil {
			t.Errorf("?acquire by a session that does not exist, within a lock-delay: %v, want false", err)
		}
		until(p, end+2*time.Second+ms)
		if !acquire(b, "p/x", c) {
			t.Error("refused once the 2 s lock-delay was over")
		}
	})
	// its TTL timer fired (2 x 1 s), Behavior release (the key stays)
	one(t, Options{}, func(p *Process, b consulsem.Backend) {
		a, _ := must2(b.CreateSession(bg, time.Second, true, 2*time.Second))
		start := time.Duration(p.Now())
		if !acquire(b, "p/x", a) {
			t.Fatal("first acquire refused")
		}
		c, _ := must2(b.CreateSession(bg, time.Minute, false, 0))
		until(p, start+3900*ms)
		if acquire(b, "p/x", c) {
			t.Error("acquired 1.9 s after the invalidation (at 2 s), within a 2 s lock-delay")
		}
		until(p, start+4100*ms)
		if !acquire(b, "p/x", c) {
			t.Error("refused 2.1 s after the invalidation, a 2 s lock-delay")
		}
	})
	// capped at 60 s
	one(t, Options{}, func(p *Process, b consulsem.Backend) {
		a, _ := must2(b.CreateSession(bg, time.Minute, false, 90*time.Second))
		c, _ := must2(b.CreateSession(bg, time.Hour, false, 0))
		acquire(b, "p/x", a)
		must(0, b.DestroySession(bg, a))
		end := time.Duration(p.Now()) - ms
		until(p, end+59*time.Second)
		if acquire(b, "p/x", c) {
			t.Error("acquired 59 s into the lock-delay")
		}
		until(p, end+60*time.Second+ms)
		if !acquire(b, "p/x", c) {
			t.Error("refused past 60 s: Consul applies at most 60 s")
		}
	})
	// a key deleted before its session ended is not delayed
	one(t, Options{}, func(p *Process, b consulsem.Backend) {
		a, _ := must2(b.CreateSession(bg, time.Minute, false, 10*time.Second))
		c, _ := must2(b.CreateSession(bg, time.Minute, false, 0))
		acquire(b, "p/x", a)
		must(0, b.DeleteKey(bg, "p/x"))
		must(0, b.DestroySession(bg, a))
		if !acquire(b, "p/x", c) {
			t.Error("refused a key its session had let go before it ended")
		}
	})
	// etcd: no lock-delay
	one(t, Options{Kind: Etcd}, func(p *Process, b consulsem.Backend) {
		a, _ := must2(b.CreateSession(bg, 10*time.Second, false, 10*time.Second))
		c, _ := must2(b.CreateSession(bg, 10*time.Second, false, 10*time.Second))
		acquire(b, "p/x", a)
		must(0, b.DestroySession(bg, a))
		if !acquire(b, "p/x", c) {
			t.Error("etcd refused a key at once after its lease was revoked")
		}
	})
}
