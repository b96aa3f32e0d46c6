package consulsem

import (
	"sync"
	"testing"
	"time"
)

// Each defect shows its effect, next to the correct code's answer in the
// same situation, on both backends.

// interleave runs a's acquire up to its decision (after the listing, before
// the grant's write), then between(), then lets a finish; it returns a's
// outcome.
func interleave(t *testing.T, a *Semaphore, prefix string, limit int, between func()) (Lease, error) {
	t.Helper()
	reached, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.pause = func(point string) {
		if point == "decided" {
			once.Do(func() { close(reached); <-resume })
		}
	}
	defer func() { a.pause = nil }()
	var l Lease
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err = a.Acquire(ctx(t), prefix, limit, 10*time.Second)
	}()
	select {
	case <-reached:
		between()
		close(resume)
		<-done
	case <-done: // it never decided to write
		t.Errorf("the acquire ended without deciding to write (%v)", err)
	}
	return l, err
}

// A contender that decided on a listing loses its grant to one that wrote
// meanwhile, unless the lock key is written without the check on its
// index.
func TestDefectPlainPut(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		for _, defect := range []bool{false, true} {
			p, other := uniquePrefix(), b.open(t, Options{})
			a := b.open(t, Options{Defects: Defects{PlainPut: defect}})
			_, err := interleave(t, a, p, 1, func() { acquire(t, other, p, 1, 10*time.Second) })
			switch {
			case !defect:
				wantErr(t, "correct code: the acquire that lost the race", err, ErrFull)
			case err != nil:
				t.Fatalf("mutant: %v, want a second grant with limit 1", err)
			}
		}
	})
}

func TestDefectLimitGreater(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		p, s := uniquePrefix(), b.open(t, Options{})
		acquire(t, s, p, 1, 10*time.Second)
		_, err := s.Acquire(ctx(t), p, 1, 10*time.Second)
		wantErr(t, "correct code: second acquire, limit 1", err, ErrFull)

		p, m := uniquePrefix(), b.open(t, Options{Defects: Defects{LimitGreater: true}})
		acquire(t, m, p, 1, 10*time.Second)
		acquire(t, m, p, 1, 10*time.Second)
		_, err = m.Acquire(ctx(t), p, 1, 10*time.Second)
		wantErr(t, "mutant: third acquire, limit 1", err, ErrFull)
	})
}

func TestDefectLocalLimit(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		p, s := uniquePrefix(), b.open(t, Options{})
		acquire(t, s, p, 1, 10*time.Second)
		_, err := s.Acquire(ctx(t), p, 2, 10*time.Second)
		wantErr(t, "correct code: acquire with limit 2 beside a limit-1 holder", err, ErrMismatch)

		p, m := uniquePrefix(), b.open(t, Options{Defects: Defects{LocalLimit: true}})
		acquire(t, m, p, 1, 10*time.Second)
		acquire(t, m, p, 2, 10*time.Second) // the holder under limit 1 is no longer alone
		st, err := m.read(ctx(t), p, false)
		if err != nil {
			t.Fatal(err)
		}
		if st.lock.Limit != 2 || len(st.lock.Holders) != 2 {
			t.Fatalf("mutant: lock key %+v, want limit 2 and two holders", st.lock)
		}
	})
}

// A holder that died keeps its slot for ever without pruning.
func TestDefectNoPrune(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		p, s := uniquePrefix(), b.open(t, Options{})
		m := b.open(t, Options{Defects: Defects{NoPrune: true}})
		dead := acquire(t, m, p, 1, time.Second)
		awaitGone(t, s, p, dead, time.Now(), 10*time.Second)
		_, err := m.Acquire(ctx(t), p, 1, 10*time.Second)
		wantErr(t, "mutant: acquire after the only holder died", err, ErrFull)
		acquire(t, s, p, 1, 10*time.Second) // the correct code prunes it
	})
}

// A contender key put without binding it to the session is not held by
// the session: the grant's check refuses every acquire; without that
// check, the holder looks dead to the next acquire at once.
func TestDefectPlainContender(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		p, m := uniquePrefix(), b.open(t, Options{Defects: Defects{PlainContender: true}})
		_, err := m.Acquire(ctx(t), p, 1, 10*time.Second)
		wantErr(t, "mutant: acquire", err, ErrNotGranted)

		p, m = uniquePrefix(), b.open(t, Options{Defects: Defects{PlainContender: true, NoLiveCheck: true}})
		first := acquire(t, m, p, 1, 10*time.Second)
		st, err := m.read(ctx(t), p, false)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := st.l.get(contenderKey(p, first.Token)); !ok || e.Owner != "" {
			t.Fatalf("mutant: contender key %+v (present %v), want one held by no session", e, ok)
		}
		acquire(t, m, p, 1, 10*time.Second) // a second holder with limit 1: the first was pruned
	})
}

// Releasing a lease whose session is gone: ErrExpired, or nil (upstream).
func TestDefectReleaseOKAfterPruned(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		for _, defect := range []bool{false, true} {
			p, s := uniquePrefix(), b.open(t, Options{Defects: Defects{ReleaseOKAfterPruned: defect}})
			l := acquire(t, s, p, 1, time.Second)
			awaitGone(t, s, p, l, time.Now(), 10*time.Second)
			acquire(t, s, p, 1, 10*time.Second) // prunes l
			err := s.Release(ctx(t), p, l.Token)
			if defect {
				wantErr(t, "mutant: release after pruning", err, nil)
			} else {
				wantErr(t, "correct code: release after pruning", err, ErrExpired)
			}
		}
	})
}

// A holder whose session died (nobody renewed it) but whom nobody has
// pruned yet is still listed in the lock key: the correct Verify looks at
// the session too, the mutant only at the list. And the mutant answers
// held when the backend cannot be read.
func TestDefectVerifyHeldThroughFailures(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		p, s := uniquePrefix(), b.open(t, Options{})
		m := b.open(t, Options{Defects: Defects{VerifyHeldThroughFailures: true}})
		l := acquire(t, m, p, 1, time.Second)
		awaitGone(t, s, p, l, time.Now(), 10*time.Second)
		wantErr(t, "refresh", m.Refresh(ctx(t), p, l.Token), ErrExpired)
		if verify(t, s, p, l) {
			t.Fatal("correct code: held after the session died")
		}
		if !verify(t, m, p, l) {
			t.Fatal("mutant: not held after the session died")
		}
	})
	m, err := Consul("127.0.0.1:1", nil, Options{Defects: Defects{VerifyHeldThroughFailures: true}})
	if err != nil {
		t.Fatal(err)
	}
	m.remember("t", true)
	if held, err := m.Verify(ctx(t), "p", "t"); !held || err != nil {
		t.Fatalf("mutant on an unreachable agent: held %v, %v; want held", held, err)
	}
	s, _ := Consul("127.0.0.1:1", nil, Options{})
	if held, err := s.Verify(ctx(t), "p", "t"); held || err == nil {
		t.Fatalf("correct code on an unreachable agent: held %v, %v; want an error", held, err)
	}
}

func TestDefectFenceRestarts(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		for _, defect := range []bool{false, true} {
			p, s := uniquePrefix(), b.open(t, Options{Defects: Defects{FenceRestarts: defect}})
			l1 := acquire(t, s, p, 1, 10*time.Second)
			wantErr(t, "release", s.Release(ctx(t), p, l1.Token), nil)
			l2 := acquire(t, s, p, 1, 10*time.Second)
			switch {
			case !defect && l2.Fence <= l1.Fence:
				t.Fatalf("correct code: fences %d then %d", l1.Fence, l2.Fence)
			case defect && (l1.Fence != 1 || l2.Fence != 1):
				t.Fatalf("mutant: fences %d then %d, want 1 and 1 (each new contender key's counter)", l1.Fence, l2.Fence)
			}
		}
	})
}

// A session that dies between the listing and the grant: the grant's
// check refuses it, unless the check is dropped.
func TestDefectNoLiveCheck(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		for _, defect := range []bool{false, true} {
			p, s := uniquePrefix(), b.open(t, Options{Defects: Defects{NoLiveCheck: defect}})
			l, err := interleave(t, s, p, 1, func() {
				st, err := s.read(ctx(t), p, false)
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range st.l.Entries {
					if e.Owner != "" {
						if err := s.st.destroySession(ctx(t), e.Owner); err != nil {
							t.Error(err)
						}
					}
				}
			})
			if !defect {
				wantErr(t, "correct code: grant after the session died", err, ErrNotGranted)
				continue
			}
			if err != nil {
				t.Fatalf("mutant: %v, want a grant to a dead session", err)
			}
			if verify(t, s, p, l) {
				t.Fatal("mutant: the lease granted to a dead session is held")
			}
		}
	})
}
