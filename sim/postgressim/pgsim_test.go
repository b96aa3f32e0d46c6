package postgressim

import (
	"errors"
	"testing"
	"time"
)

// Session locks are exclusive between sessions and re-entrant, counted,
// within one; unlock of a key not held says false.
func TestLocks(t *testing.T) {
	s := New()
	a, b := s.Open(0), s.Open(0)
	check := func(what string, got bool, err error, want bool) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s: %v, %v; want %v", what, got, err, want)
		}
	}
	got, err := s.TryLock(a, 7)
	check("a takes 7", got, err, true)
	got, err = s.TryLock(b, 7)
	check("b takes 7 that a holds", got, err, false)
	got, err = s.TryLock(a, 7)
	check("a takes 7 again", got, err, true)
	got, err = s.Unlock(b, 7)
	check("b unlocks 7 that a holds", got, err, false)
	got, err = s.Unlock(a, 7)
	check("a unlocks 7 once", got, err, true)
	got, err = s.TryLock(b, 7)
	check("b takes 7, a still holding it once", got, err, false)
	got, err = s.Unlock(a, 7)
	check("a unlocks 7 twice", got, err, true)
	got, err = s.Holds(a, 7)
	check("a holds 7 after two unlocks", got, err, false)
	got, err = s.TryLock(b, 7)
	check("b takes 7 once a let go", got, err, true)
}

// A session idle past its timeout, terminated, or on a restarted server
// ends and frees its locks; its next statement says why.
func TestSessionsEnd(t *testing.T) {
	s := New()
	idle, other, victim := s.Open(100*time.Millisecond), s.Open(0), s.Open(0)
	s.TryLock(idle, 1)
	s.TryLock(victim, 2)
	s.Sleep(100 * time.Millisecond)
	if s.Holder(1) != idle {
		t.Fatal("a session idle exactly its timeout ended")
	}
	s.Sleep(time.Millisecond)
	if s.Holder(1) != 0 {
		t.Fatal("a session idle past its timeout still holds its lock")
	}
	if _, err := s.TryLock(idle, 1); !errors.Is(err, ErrIdle) {
		t.Fatalf("the idle session's statement: %v, want ErrIdle", err)
	}
	if ok, err := s.Terminate(other, victim); !ok || err != nil {
		t.Fatalf("terminate: %v, %v", ok, err)
	}
	if s.Holder(2) != 0 {
		t.Fatal("a terminated session still holds its lock")
	}
	if _, err := s.Holds(victim, 2); !errors.Is(err, ErrTerminated) {
		t.Fatalf("the terminated session's statement: %v, want ErrTerminated", err)
	}
	if ok, _ := s.Terminate(other, victim); ok {
		t.Fatal("terminating an ended session said true")
	}
	s.TryLock(other, 3)
	s.Restart()
	if _, err := s.TryLock(other, 3); !errors.Is(err, ErrTerminated) || s.Holder(3) != 0 {
		t.Fatalf("after a restart: %v, holder %d", err, s.Holder(3))
	}
}
