package consulsem

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestAcquireUpToTheLimitThenFull(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{}), uniquePrefix()
		a1 := acquire(t, s, p, 2, 10*time.Second)
		a2 := acquire(t, s, p, 2, 10*time.Second)
		if a1.Token == a2.Token {
			t.Fatalf("two leases with token %s", a1.Token)
		}
		_, err := s.Acquire(ctx(t), p, 2, 10*time.Second)
		wantErr(t, "third acquire, limit 2", err, ErrFull)
		wantErr(t, "release", s.Release(ctx(t), p, a1.Token), nil)
		a3 := acquire(t, s, p, 2, 10*time.Second)
		if !(a1.Fence < a2.Fence && a2.Fence < a3.Fence) {
			t.Fatalf("fences %d, %d, %d: not increasing", a1.Fence, a2.Fence, a3.Fence)
		}
		for _, l := range []Lease{a2, a3} {
			wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
		}
		assertEmpty(t, s, p)
	})
}

// assertEmpty checks that nothing but the lock key, with no holder, is
// left under p.
func assertEmpty(t *testing.T, s *Semaphore, p string) {
	t.Helper()
	st, err := s.read(ctx(t), p, false)
	if err != nil {
		t.Fatal(err)
	}
	for k := range st.l.Entries {
		if k != lockKey(p) {
			t.Errorf("key %s left behind", k)
		}
	}
	if len(st.lock.Holders) != 0 {
		t.Errorf("holders %v left behind", st.lock.Holders)
	}
}

func TestReleaseFrees(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{}), uniquePrefix()
		l := acquire(t, s, p, 1, 10*time.Second)
		if !verify(t, s, p, l) {
			t.Fatal("a fresh lease is not held")
		}
		wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
		if verify(t, s, p, l) {
			t.Fatal("a released lease is held")
		}
		assertEmpty(t, s, p)
		wantErr(t, "second release", s.Release(ctx(t), p, l.Token), ErrExpired)
		wantErr(t, "refresh after release", s.Refresh(ctx(t), p, l.Token), ErrExpired)
		wantErr(t, "release", s.Release(ctx(t), p, acquire(t, s, p, 1, 10*time.Second).Token), nil)
	})
}

func TestMismatchedLimit(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{}), uniquePrefix()
		l := acquire(t, s, p, 1, 10*time.Second)
		_, err := s.Acquire(ctx(t), p, 2, 10*time.Second)
		wantErr(t, "acquire with limit 2 of a limit-1 prefix", err, ErrMismatch)
		wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
		assertEmpty(t, s, p)
	})
}

// A lease refreshed every TTL/3 outlives several TTLs (and the factor
// times the TTL), and keeps its slot.
func TestRefreshKeepsALease(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{}), uniquePrefix()
		l := acquire(t, s, p, 1, time.Second)
		horizon := s.Timing().Horizon(l.TTL)
		for end := time.Now().Add(horizon + 2*l.TTL); time.Now().Before(end); {
			time.Sleep(l.TTL / 3)
			wantErr(t, "refresh", s.Refresh(ctx(t), p, l.Token), nil)
		}
		if !verify(t, s, p, l) {
			t.Fatal("a refreshed lease is not held")
		}
		_, err := s.Acquire(ctx(t), p, 1, time.Second)
		wantErr(t, "acquire beside a refreshed lease", err, ErrFull)
		wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
	})
}

// A lease nobody refreshes expires after about Factor x TTL (never
// before), and its holder is then pruned: another acquire gets the slot,
// and the expired lease can be neither refreshed nor released.
func TestUnrefreshedLeaseExpires(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{}), uniquePrefix()
		invoked := time.Now()
		l := acquire(t, s, p, 1, time.Second)
		tm := s.Timing()
		var granted time.Duration
		for {
			_, err := s.Acquire(ctx(t), p, 1, 10*time.Second)
			if err == nil {
				granted = time.Since(invoked)
				break
			}
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			if time.Since(invoked) > 10*tm.Horizon(l.TTL) {
				t.Fatalf("slot still held %v after a lease of TTL %v was granted", time.Since(invoked), l.TTL)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: TTL %v (factor %d) freed for another acquire %v after the first acquire's invoke",
			b.name, l.TTL, tm.Factor, granted.Round(time.Millisecond))
		if min := time.Duration(tm.Factor) * l.TTL; granted < min {
			t.Fatalf("the slot was free again %v after the grant's invoke, before factor x TTL = %v", granted, min)
		}
		if verify(t, s, p, l) {
			t.Fatal("an expired lease is held")
		}
		wantErr(t, "refresh of an expired lease", s.Refresh(ctx(t), p, l.Token), ErrExpired)
		wantErr(t, "release of an expired lease", s.Release(ctx(t), p, l.Token), ErrExpired)
	})
}

// Contenders racing for two slots: exactly two win, whatever the CAS
// interleaving.
func TestConcurrentAcquires(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{CASRetries: 100}), uniquePrefix()
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		leases := make([]Lease, n)
		for i := range n {
			wg.Go(func() { leases[i], errs[i] = s.Acquire(ctx(t), p, 2, 10*time.Second) })
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
				defer s.Release(ctx(t), p, leases[i].Token)
			case !errors.Is(err, ErrFull):
				t.Errorf("acquire %d: %v", i, err)
			}
		}
		if won != 2 {
			t.Fatalf("%d of %d acquires granted with limit 2", won, n)
		}
	})
}

func TestWaitForASlot(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		p := uniquePrefix()
		s := b.open(t, Options{})
		w := b.open(t, Options{Wait: 20 * time.Second})
		l := acquire(t, s, p, 1, 10*time.Second)
		go func() {
			time.Sleep(300 * time.Millisecond)
			s.Release(ctx(t), p, l.Token)
		}()
		began := time.Now()
		got := acquire(t, w, p, 1, 10*time.Second)
		t.Logf("waited %v for the released slot", time.Since(began).Round(time.Millisecond))

		// A wait longer than the TTL keeps the waiter's session alive, and
		// ends in ErrFull.
		w = b.open(t, Options{Wait: 3 * time.Second})
		began = time.Now()
		_, err := w.Acquire(ctx(t), p, 1, time.Second)
		wantErr(t, "acquire with a 3s wait beside a held slot", err, ErrFull)
		if d := time.Since(began); d < 3*time.Second {
			t.Fatalf("ErrFull after %v, before the 3s wait", d)
		}
		wantErr(t, "release", s.Release(ctx(t), p, got.Token), nil)
		assertEmpty(t, s, p)
	})
}

// Correct variants: stale reads before the grant, Consul sessions with
// Behavior release. Both keep the semaphore's promises.
func TestStaleReads(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{StaleReads: true}), uniquePrefix()
		l := acquire(t, s, p, 1, time.Second)
		_, err := s.Acquire(ctx(t), p, 1, time.Second)
		wantErr(t, "second acquire", err, ErrFull)
		awaitGone(t, s, p, l, time.Now(), 10*time.Second)
		wantErr(t, "release", s.Release(ctx(t), p, acquire(t, s, p, 1, time.Second).Token), nil)
	})
}

func TestBehaviorRelease(t *testing.T) {
	b := testBackends[0]
	s, p := b.open(t, Options{BehaviorRelease: true}), uniquePrefix()
	l := acquire(t, s, p, 1, time.Second)
	_, err := s.Acquire(ctx(t), p, 1, time.Second)
	wantErr(t, "second acquire", err, ErrFull)
	awaitGone(t, s, p, l, time.Now(), 10*time.Second)
	st, err := s.read(ctx(t), p, false)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := st.l.get(contenderKey(p, l.Token)); !ok || e.Owner != "" {
		t.Fatalf("contender key after its session died: %+v (present %v), want it kept without session", e, ok)
	}
	wantErr(t, "acquire after the holder died", s.Release(ctx(t), p, acquire(t, s, p, 1, time.Second).Token), nil)

	if _, err := Etcd(nil, Options{BehaviorRelease: true}); err == nil {
		t.Error("Etcd accepted a nil client")
	}
}

func TestBadArguments(t *testing.T) {
	s, err := Consul("127.0.0.1:1", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "/a", "a/", "a//b", "a b", "a?b"} {
		if _, err := s.Acquire(ctx(t), p, 1, time.Second); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	if _, err := s.Acquire(ctx(t), "a", 0, time.Second); err == nil {
		t.Error("limit 0 accepted")
	}
	if _, err := s.Acquire(ctx(t), "a", 1, 0); err == nil {
		t.Error("ttl 0 accepted")
	}
	for _, tok := range []string{"", "../x", "a/b", "a?b"} {
		wantErr(t, "refresh of token "+tok, s.Refresh(ctx(t), "a", tok), ErrExpired)
		wantErr(t, "release of token "+tok, s.Release(ctx(t), "a", tok), ErrExpired)
		if held, err := s.Verify(ctx(t), "a", tok); held || err != nil {
			t.Errorf("verify of token %q: %v, %v", tok, held, err)
		}
	}
	if _, err := Consul("::", nil, Options{}); err == nil {
		t.Error("a bad address accepted")
	}
}

// dropTxnReply is a transport that sends every request but loses the
// answer of the first n transactions (PUT /v1/txn), as a connection cut
// after the write reached Consul.
type dropTxnReply struct {
	mu sync.Mutex
	n  int
}

func (d *dropTxnReply) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.URL.Path != "/v1/txn" {
		return resp, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return resp, nil
	}
	d.n--
	resp.Body.Close()
	return nil, errors.New("connection reset (by the test)")
}

// A grant whose answer is lost: ErrUnknownOutcome with the lease that was
// in fact granted, which Verify finds held and Release frees.
func TestUnknownOutcome(t *testing.T) {
	skipWithout(t, noConsul)
	hc := &http.Client{Transport: &dropTxnReply{n: 1}}
	s, err := Consul(consulAgent.Addr(), hc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := uniquePrefix()
	l, err := s.Acquire(ctx(t), p, 1, 10*time.Second)
	wantErr(t, "acquire whose grant's answer is lost", err, ErrUnknownOutcome)
	if l.Token == "" || !verify(t, s, p, l) {
		t.Fatalf("lease %+v after the lost answer: want the granted one, held", l)
	}
	_, err = s.Acquire(ctx(t), p, 1, 10*time.Second)
	wantErr(t, "acquire beside it", err, ErrFull)
	wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
	assertEmpty(t, s, p)
}
