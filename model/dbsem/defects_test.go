package dbsem

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// Each defect shows its effect, next to the correct code's answer in the
// same situation.

func TestDefectRefreshRevivesExpired(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d, Defects: Defects{RefreshRevivesExpired: true}})
		l := acquire(t, s, "k", 200*time.Millisecond, 1)
		time.Sleep(300 * time.Millisecond)
		wantErr(t, "refresh after expiry", s.Refresh(ctx(t), "k", l.Token, 10*time.Second), nil)
		_, err := s.Acquire(ctx(t), "k", time.Second, 1)
		wantErr(t, "acquire after the revival", err, ErrFull)
	})
}

func TestDefectReleaseAfterExpirySucceeds(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		s := open(t, openDB(t), Options{Design: d, Defects: Defects{ReleaseAfterExpirySucceeds: true}})
		l := acquire(t, s, "k", 200*time.Millisecond, 1)
		time.Sleep(300 * time.Millisecond)
		wantErr(t, "release after expiry", s.Release(ctx(t), "k", l.Token), nil)
		wantErr(t, "release of a live lease", s.Release(ctx(t), "k", acquire(t, s, "k", time.Second, 1).Token), nil)
	})
}

// With the client's clock an hour ahead, the mutant takes a live lease;
// the correct code, whose clock is the database's, does not care.
func TestDefectClientClockExpiry(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d})
		ahead := func() time.Time { return time.Now().Add(time.Hour) }
		m, err := Open(ctx(t), db, Options{Design: d, Prefix: s.o.Prefix,
			Defects: Defects{ClientClockExpiry: true, Now: ahead}})
		if err != nil {
			t.Fatal(err)
		}
		a := acquire(t, s, "k", 10*time.Second, 1)
		acquire(t, m, "k", 10*time.Second, 1)
		wantErr(t, "refresh of the lease the mutant took", s.Refresh(ctx(t), "k", a.Token, time.Second), ErrExpired)

		// The database session's clock no longer matters to the mutant.
		behind, err := Open(ctx(t), clientDB(t, -time.Hour), Options{Design: d, Prefix: s.o.Prefix,
			Defects: Defects{ClientClockExpiry: true}})
		if err != nil {
			t.Fatal(err)
		}
		b := acquire(t, behind, "b", 10*time.Second, 1)
		_, err = s.Acquire(ctx(t), "b", 10*time.Second, 1)
		wantErr(t, "acquire of a lease granted by a mutant in a session an hour behind", err, ErrFull)
		wantErr(t, "refresh", behind.Refresh(ctx(t), "b", b.Token, time.Second), nil)
	})
}

// interleave runs a's acquire up to its decision (the free slot or the
// count it read), then b's acquire, for at most 500 ms (b may wait for a's
// row lock), then lets a finish; it returns both outcomes.
func interleave(t *testing.T, a, b *Semaphore, key string, max int) (errA, errB error) {
	t.Helper()
	reached, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.pause = func(point string) {
		if point == "decided" {
			once.Do(func() { close(reached); <-resume })
		}
	}
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneA)
		_, errA = a.Acquire(ctx(t), key, 10*time.Second, max)
	}()
	<-reached
	go func() {
		defer close(doneB)
		_, errB = b.Acquire(ctx(t), key, 10*time.Second, max)
	}()
	select {
	case <-doneB:
	case <-time.After(500 * time.Millisecond):
	}
	close(resume)
	<-doneA
	<-doneB
	return errA, errB
}

// twoClients opens two semaphores on the same (new) tables, the key set up.
func twoClients(t *testing.T, o Options, key string, max int) (a, b *Semaphore) {
	db := openDB(t)
	a = open(t, db, o)
	o.Prefix = a.o.Prefix
	b, err := Open(ctx(t), db, o)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "release", a.Release(ctx(t), key, acquire(t, a, key, time.Second, max).Token), nil)
	return a, b
}

func TestDefectNoSkipLocked(t *testing.T) {
	a, b := twoClients(t, Options{Design: RowPerSlot}, "k", 1)
	errA, errB := interleave(t, a, b, "k", 1)
	if errA != nil || !errors.Is(errB, ErrFull) {
		t.Fatalf("correct code: %v and %v, want a grant and ErrFull", errA, errB)
	}

	a, b = twoClients(t, Options{Design: RowPerSlot, Defects: Defects{NoSkipLocked: true}}, "k", 1)
	errA, errB = interleave(t, a, b, "k", 1)
	if errA != nil || errB != nil {
		t.Fatalf("mutant: %v and %v, want two grants of the one slot", errA, errB)
	}
}

func TestDefectCountWithoutLock(t *testing.T) {
	a, b := twoClients(t, Options{Design: MasterRow}, "k", 1)
	errA, errB := interleave(t, a, b, "k", 1)
	if errA != nil || !errors.Is(errB, ErrFull) {
		t.Fatalf("correct code: %v and %v, want a grant and ErrFull", errA, errB)
	}

	a, b = twoClients(t, Options{Design: MasterRow, Defects: Defects{CountWithoutLock: true}}, "k", 1)
	errA, errB = interleave(t, a, b, "k", 1)
	if errA != nil || errB != nil {
		t.Fatalf("mutant: %v and %v, want two grants with max 1", errA, errB)
	}
	if n := live(t, a.db, a, "k"); n != 2 {
		t.Fatalf("%d live leases, want 2", n)
	}
}

func TestDefectMixedMax(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		db := openDB(t)
		s := open(t, db, Options{Design: d, Defects: Defects{MixedMax: true}})
		acquire(t, s, "k", 10*time.Second, 1)
		acquire(t, s, "k", 10*time.Second, 2) // the correct code: ErrMismatch
		if n := live(t, db, s, "k"); n != 2 {
			t.Fatalf("%d live leases, want 2 although the key was set up with max 1", n)
		}
		_, err := s.Acquire(ctx(t), "k", 10*time.Second, 1)
		wantErr(t, "acquire with max 1", err, ErrFull)
	})
}

func TestDefectFenceFromUUID(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		s := open(t, openDB(t), Options{Design: d, Fencing: true, Defects: Defects{FenceFromUUID: true}})
		var fences []int64
		for range 12 {
			l := acquire(t, s, "k", time.Second, 1)
			wantErr(t, "release", s.Release(ctx(t), "k", l.Token), nil)
			fences = append(fences, l.Fence)
		}
		for i := 1; i < len(fences); i++ {
			if fences[i] <= fences[i-1] {
				return // out of grant order: the defect
			}
		}
		t.Fatalf("fences %v increase (odds 1 in 12!)", fences)
	})
}

// One acquire, whose COMMIT's reply is lost, ends up holding two slots.
func TestDefectAmbiguousCommitRetry(t *testing.T) {
	designs(t, func(t *testing.T, d Design) {
		p := startProxy(t)
		db := openDB(t, p.addr())
		s := open(t, db, Options{Design: d, Defects: Defects{AmbiguousCommitRetry: true}})
		wantErr(t, "release", s.Release(ctx(t), "k", acquire(t, s, "k", time.Second, 2).Token), nil)
		p.dropCommitReplies(1)
		l := acquire(t, s, "k", 10*time.Second, 2) // the correct code: ErrUnknownOutcome
		if n := live(t, db, s, "k"); n != 2 {
			t.Fatalf("%d live leases after one acquire, want 2", n)
		}
		_, err := s.Acquire(ctx(t), "k", 10*time.Second, 2)
		wantErr(t, "acquire", err, ErrFull)
		wantErr(t, "release", s.Release(ctx(t), "k", l.Token), nil)
	})
}
