package pgadvisory

import (
	"context"
	"errors"
	"testing"
	"time"
)

// lateServer is a PostgreSQL whose idle timer never fires in time, as a
// loaded server's may not: a session lives until it is closed. Its clock
// is set by the test.
type lateServer struct {
	now    time.Time
	holder *lateConn // the session that holds the key, nil when none
}

func (s *lateServer) Now() time.Time { return s.now }

func (s *lateServer) Open(context.Context, time.Duration) (Conn, error) {
	return &lateConn{s: s}, nil
}

type lateConn struct {
	s      *lateServer
	closed bool
}

func (c *lateConn) TryLock(context.Context, int64) (bool, error) {
	if c.s.holder != nil && c.s.holder != c {
		return false, nil
	}
	c.s.holder = c
	return true, nil
}

func (c *lateConn) Holds(context.Context, int64) (bool, error) { return c.s.holder == c, nil }

func (c *lateConn) Unlock(context.Context, int64) (bool, error) {
	ok := c.s.holder == c
	if ok {
		c.s.holder = nil
	}
	return ok, nil
}

func (c *lateConn) Close() {
	c.closed = true
	if c.s.holder == c {
		c.s.holder = nil
	}
}

func (c *lateConn) IsClosed() bool { return c.closed }
func (c *lateConn) PID() uint32    { return 1 }

// A holder counts its lease from the start of its acquire or of its last
// check: past that by its own clock, it takes nobody's word that it holds,
// even where the server's idle timer has not ended its session yet (the
// soak of issue 55: a refresh 2 ms past the lease's certain end answered
// held, a no-revival FAIL). It ends its session instead, which frees the
// lock for the next client at once. Within its lease, the server's word
// goes.
func TestLeaseOverByTheHoldersCount(t *testing.T) {
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	for _, op := range []string{"refresh", "release"} {
		t.Run(op, func(t *testing.T) {
			s := &lateServer{now: time.Unix(0, 0)}
			l := NewLockOn(s, 1, ttl, Defects{})
			if err := l.Acquire(ctx); err != nil {
				t.Fatalf("acquire: %v", err)
			}
			s.now = s.now.Add(ttl - time.Millisecond)
			if err := l.Refresh(ctx); err != nil {
				t.Fatalf("refresh within the lease: %v", err)
			}
			s.now = s.now.Add(ttl + 2*time.Millisecond) // the session still holds the key
			do := l.Refresh
			if op == "release" {
				do = l.Release
			}
			if err := do(ctx); !errors.Is(err, ErrLost) {
				t.Fatalf("%s past the lease: %v, want ErrLost", op, err)
			}
			if s.holder != nil {
				t.Fatalf("%s past the lease left its session holding the key", op)
			}
			other := NewLockOn(s, 1, ttl, Defects{})
			if err := other.Acquire(ctx); err != nil {
				t.Fatalf("another client's acquire after the lease: %v", err)
			}
		})
	}
}
