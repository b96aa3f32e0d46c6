package postgres

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockprover/lockprover/internal/quick"
)

// ctx is a context that ends with the test, or after a minute.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// startPrivate starts a private server, its log in the test's directory,
// stopped when the test ends; it skips the test without the binaries, or
// under -short.
func startPrivate(t *testing.T) *Server {
	t.Helper()
	quick.Skip(t, "a private PostgreSQL server")
	start := time.Now()
	s, err := StartPrivate(ctx(t), t.TempDir())
	if errors.Is(err, ErrNoServer) || errors.Is(err, ErrNoUser) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("initialised and started in %v (pid %d, %s)", time.Since(start).Round(time.Millisecond), s.PID(), s.Addr())
	t.Cleanup(func() { s.Stop() })
	return s
}

// connect opens a session at url, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := Connect(ctx(t), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// tryLock is pg_try_advisory_lock(key) on c.
func tryLock(t *testing.T, c *pgx.Conn, key int64) bool {
	t.Helper()
	var ok bool
	if err := c.QueryRow(ctx(t), "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		t.Fatalf("pg_try_advisory_lock(%d): %v", key, err)
	}
	return ok
}

// holders is AdvisoryHolders, failing the test on an error.
func holders(t *testing.T, s *Server, key int64) []uint32 {
	t.Helper()
	h, err := s.AdvisoryHolders(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// eventually waits up to 10 s for key's holders to be want.
func eventually(t *testing.T, s *Server, key int64, want []uint32, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := holders(t, s, key)
		if slices.Equal(h, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: holders of %d are %v, want %v", why, key, h, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone reports whether no process has the pid any more.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// ownDirs are the private servers' own directories in the temporary
// directory.
func ownDirs(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "lockprover-pg-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A private server answers, takes advisory locks, and once stopped leaves
// no process, no listener and no data behind (its log stays, the
// caller's).
func TestPrivateStartStopLeavesNothing(t *testing.T) {
	s := startPrivate(t)
	a, b := connect(t, s.URL()), connect(t, s.URL())
	if !tryLock(t, a, 42) {
		t.Fatal("a first pg_try_advisory_lock(42) failed")
	}
	if tryLock(t, b, 42) {
		t.Fatal("a second session took advisory lock 42 that the first holds")
	}
	if h := holders(t, s, 42); len(h) != 1 || h[0] != a.PgConn().PID() {
		t.Fatalf("holders of 42 are %v, want [%d]", h, a.PgConn().PID())
	}
	pid, own := s.PID(), s.Dir()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Errorf("postmaster %d still running after Stop", pid)
	}
	if _, err := os.Stat(own); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server's directory %s is still there after Stop (%v)", own, err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Errorf("something still listens on %s after Stop", s.Addr())
	}
	if s.PID() != 0 {
		t.Errorf("PID is %d after Stop, want 0", s.PID())
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// A start that fails after initdb (its log cannot be written) leaves no
// data directory behind.
func TestPrivateFailedStartLeavesNothing(t *testing.T) {
	quick.Skip(t, "PostgreSQL's initdb")
	// A temporary directory of the test's own, so that other tests'
	// servers (other packages run at once) are not taken for leftovers;
	// user postgres must reach it.
	tmp := t.TempDir()
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	before := ownDirs(t)
	_, err := StartPrivate(ctx(t), filepath.Join(t.TempDir(), "no", "such", "dir"))
	if errors.Is(err, ErrNoServer) || errors.Is(err, ErrNoUser) {
		t.Skip(err)
	}
	if err == nil {
		t.Fatal("StartPrivate with a log in a missing directory succeeded")
	}
	t.Logf("the failed start said: %v", err)
	for _, d := range ownDirs(t) {
		if !slices.Contains(before, d) {
			t.Errorf("the failed start left %s behind", d)
		}
	}
}

// terminated says whether err is the end of a session the server
// terminated (SQLSTATE 57P01), or of a connection it closed.
func terminated(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01"
	}
	return err != nil
}

// Restart, Crash and Terminate each end the session that holds an
// advisory lock, which releases it: another session takes it, and the
// holder's next statement fails.
func TestServerEndsSessions(t *testing.T) {
	s := startPrivate(t)
	for i, tc := range []struct {
		name   string
		strike func(holder uint32) error
	}{
		{"Terminate", func(pid uint32) error {
			n, err := s.Terminate(ctx(t), pid)
			if err == nil && n != 1 {
				t.Errorf("Terminate ended %d sessions, want 1", n)
			}
			return err
		}},
		{"Restart", func(uint32) error { return s.Restart(ctx(t), 100*time.Millisecond) }},
		{"Crash", func(uint32) error { return s.Crash(ctx(t), 0) }},
	} {
		// A key of each case's own: the last case's sessions may still be
		// exiting, their locks with them.
		key := int64(7 + i)
		t.Run(tc.name, func(t *testing.T) {
			a := connect(t, s.URL())
			if !tryLock(t, a, key) {
				t.Fatalf("pg_try_advisory_lock(%d) failed on a fresh server", key)
			}
			pid := s.PID()
			if err := tc.strike(a.PgConn().PID()); err != nil {
				t.Fatal(err)
			}
			if tc.name != "Terminate" && s.PID() == pid {
				t.Errorf("the postmaster's pid is still %d", pid)
			}
			eventually(t, s, key, nil, tc.name)
			b := connect(t, s.URL())
			if !tryLock(t, b, key) {
				t.Fatal("another session could not take the released lock")
			}
			_, err := a.Exec(ctx(t), "SELECT 1")
			if !terminated(err) {
				t.Fatalf("the holder's next statement after %s: %v, want its session ended", tc.name, err)
			}
			t.Logf("the holder read: %v", err)
		})
	}
}
