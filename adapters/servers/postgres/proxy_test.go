package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockprover/lockprover/adapters/host/faultnet/faultnettest"
)

// newProxy starts a proxy in front of s, closed when the test ends (which
// fails if the proxy leaves goroutines behind).
func newProxy(t *testing.T, s *Server) *Proxy {
	t.Helper()
	p, err := NewProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	faultnettest.CloseAtEnd(t, p)
	return p
}

// silentFor checks that a statement on c gets no answer at all (neither a
// result nor an error from the server or the socket) within d: the
// client is not told. pgx closes the connection when the context ends.
func silentFor(t *testing.T, c *pgx.Conn, d time.Duration, what string) {
	t.Helper()
	x, cancel := context.WithTimeout(ctx(t), d)
	defer cancel()
	_, err := c.Exec(x, "SELECT 1")
	if !errors.Is(err, context.DeadlineExceeded) && x.Err() == nil {
		t.Fatalf("%s: the client was answered (%v), want silence", what, err)
	}
	if err == nil {
		t.Fatalf("%s: the statement succeeded, want silence", what)
	}
}

// Kill and Reset end the session behind the proxy: the server releases
// its advisory lock at once, and the client reads an error at its next
// statement; a new connection through the proxy works.
func TestProxyKillAndReset(t *testing.T) {
	s := startPrivate(t)
	p := newProxy(t, s)
	for _, tc := range []struct {
		name   string
		strike func()
	}{{"Kill", p.Kill}, {"Reset", p.Reset}} {
		t.Run(tc.name, func(t *testing.T) {
			a := connect(t, p.URL())
			if !tryLock(t, a, 11) {
				t.Fatal("pg_try_advisory_lock(11) failed")
			}
			tc.strike()
			eventually(t, s, 11, nil, tc.name)
			if _, err := a.Exec(ctx(t), "SELECT 1"); err == nil {
				t.Fatalf("the holder's statement after %s succeeded", tc.name)
			} else {
				t.Logf("the holder read: %v", err)
			}
			b := connect(t, p.URL())
			if !tryLock(t, b, 11) {
				t.Fatal("a new session through the proxy could not take the lock")
			}
			b.Exec(ctx(t), "SELECT pg_advisory_unlock(11)")
		})
	}
}

// A partition holds everything: the session and its lock live on, another
// session cannot take it, and after Heal the holder's statement (held
// meanwhile) is answered and it still holds the lock.
func TestProxyPartitionKeepsTheSession(t *testing.T) {
	s := startPrivate(t)
	p := newProxy(t, s)
	a, b := connect(t, p.URL()), connect(t, s.URL())
	if !tryLock(t, a, 12) {
		t.Fatal("pg_try_advisory_lock(12) failed")
	}
	p.Partition()
	done := make(chan error, 1)
	go func() {
		var held bool
		err := a.QueryRow(ctx(t), "SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").Scan(&held)
		if err == nil && !held {
			err = errors.New("it no longer holds the lock")
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the holder was answered during the partition: %v", err)
	default:
	}
	if tryLock(t, b, 12) {
		t.Fatal("another session took the lock during the partition")
	}
	if h := holders(t, s, 12); len(h) != 1 || h[0] != a.PgConn().PID() {
		t.Fatalf("holders during the partition are %v, want [%d]", h, a.PgConn().PID())
	}
	p.Heal()
	if err := <-done; err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

// Cut leaves the session alive on the server, lock and all, until the
// server's own timer ends it (idle_session_timeout, here 1 s); the
// client, silent, is never told.
func TestProxyCutLeavesTheServerTimerToEndTheSession(t *testing.T) {
	s := startPrivate(t)
	p := newProxy(t, s)
	a := connect(t, p.URL())
	if _, err := a.Exec(ctx(t), "SET idle_session_timeout = '1s'"); err != nil {
		t.Fatal(err)
	}
	if !tryLock(t, a, 13) {
		t.Fatal("pg_try_advisory_lock(13) failed")
	}
	pid := a.PgConn().PID()
	p.Cut()
	time.Sleep(300 * time.Millisecond)
	if h := holders(t, s, 13); len(h) != 1 || h[0] != pid {
		t.Fatalf("holders 300 ms after Cut are %v, want [%d]: Cut must not end the session", h, pid)
	}
	eventually(t, s, 13, nil, "idle_session_timeout after Cut")
	silentFor(t, a, 1500*time.Millisecond, "after Cut")
	b := connect(t, p.URL())
	if !tryLock(t, b, 13) {
		t.Fatal("a new session through the proxy could not take the lock")
	}
}

// Sever ends the session on the server at once (its lock is released)
// and never tells the client.
func TestProxySeverEndsTheSessionUntold(t *testing.T) {
	s := startPrivate(t)
	p := newProxy(t, s)
	a := connect(t, p.URL())
	if !tryLock(t, a, 14) {
		t.Fatal("pg_try_advisory_lock(14) failed")
	}
	p.Sever()
	eventually(t, s, 14, nil, "Sever")
	silentFor(t, a, time.Second, "after Sever")
}

// Delay slows every statement by twice the delay.
func TestProxyDelay(t *testing.T) {
	s := startPrivate(t)
	p := newProxy(t, s)
	a := connect(t, p.URL())
	p.Delay(100 * time.Millisecond)
	start := time.Now()
	if _, err := a.Exec(ctx(t), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("a statement took %v with 100 ms of delay each way", d)
	}
	p.Delay(0)
}

// The sessions a proxy carries are found by its ports, and only they.
func TestSessionsFromProxyPorts(t *testing.T) {
	s := startPrivate(t)
	p := newProxy(t, s)
	a := connect(t, p.URL())
	connect(t, s.URL()) // another session, not through the proxy
	pids, err := s.SessionsFrom(ctx(t), p.UpstreamPorts())
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 || pids[0] != a.PgConn().PID() {
		t.Fatalf("sessions from the proxy's ports %v: %v, want [%d]", p.UpstreamPorts(), pids, a.PgConn().PID())
	}
	if pids, err := s.SessionsFrom(ctx(t), nil); err != nil || len(pids) != 0 {
		t.Fatalf("sessions from no port: %v, %v", pids, err)
	}
}
