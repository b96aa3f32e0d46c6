package postgressim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// run runs w, failing t on a process's panic.
func run(t *testing.T, w *World) {
	t.Helper()
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
}

// connect opens a session of p, failing t if it cannot.
func connect(t *testing.T, p *Process, idle time.Duration) *Conn {
	t.Helper()
	c, err := p.Connect(idle)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// try is c's pg_try_advisory_lock(key), failing t on an error.
func try(t *testing.T, c *Conn, key int64) bool {
	t.Helper()
	ok, err := c.TryLock(key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// An idle session ends once its timeout has passed, its lock with it:
// another session takes the key, and the idle one's next statement says
// why it ended.
func TestWorldIdleSessionEnds(t *testing.T) {
	w := NewWorld(Options{})
	var took, other bool
	var err error
	w.Go("c1", func(p *Process) {
		c := connect(t, p, 100*time.Millisecond)
		took = try(t, c, 7)
		p.Sleep(150 * time.Millisecond)
		_, err = c.Holds(7)
	})
	w.Go("c2", func(p *Process) {
		p.Sleep(50 * time.Millisecond)
		c := connect(t, p, 0)
		if ok, _ := c.TryLock(7); ok {
			t.Errorf("c2 took the key at 50 ms, while c1's session lived")
		}
		p.Sleep(70 * time.Millisecond)
		other = try(t, c, 7)
	})
	run(t, w)
	if !took || !other || !errors.Is(err, ErrIdle) {
		t.Errorf("c1 took %v, c2 took after c1's idle end %v, c1's statement after: %v", took, other, err)
	}
}

// A killed process's connections close, and its lock is free; a process
// that returns leaves its session, and its lock, as they were.
func TestWorldKillFreesReturnKeeps(t *testing.T) {
	for _, kill := range []bool{true, false} {
		w := NewWorld(Options{})
		var got bool
		w.Go("c1", func(p *Process) {
			c := connect(t, p, 0)
			try(t, c, 7)
			if kill {
				p.Sleep(time.Second)
			}
		})
		w.Go("c2", func(p *Process) {
			p.Sleep(20 * time.Millisecond)
			if kill {
				w.Kill("c1")
			}
			got = try(t, connect(t, p, 0), 7)
		})
		run(t, w)
		if got != kill {
			t.Errorf("c1 killed %v: c2 took the key %v", kill, got)
		}
	}
}

// A partition holds a statement; past the timeout the client hears
// ErrTimeout and closes the connection; on the heal the statement, then
// the close, reach the server, which frees what it took. (A process that
// has ended is healed no more: what it held never reaches the server.)
func TestWorldPartitionTimeoutAndHeal(t *testing.T) {
	var trace strings.Builder
	w := NewWorld(Options{Timeout: 50 * time.Millisecond, Trace: &trace})
	var err error
	var at int64
	var during, after bool
	w.Go("c1", func(p *Process) {
		c := connect(t, p, 0)
		p.Sleep(10 * time.Millisecond) // c2 partitions it meanwhile
		_, err = c.TryLock(7)
		at = w.Now()
		p.Sleep(time.Second) // alive at the heal
	})
	w.Go("c2", func(p *Process) {
		w.Partition("c1")
		p.Sleep(100 * time.Millisecond)
		during = try(t, connect(t, p, 0), 8) // another key: nothing held yet
		w.Heal("c1")
		after = try(t, connect(t, p, 0), 7)
	})
	run(t, w)
	if !errors.Is(err, ErrTimeout) || at < int64(60*time.Millisecond) || at > int64(61*time.Millisecond) {
		t.Errorf("c1's statement: %v at %v, want ErrTimeout at 60 ms", err, time.Duration(at))
	}
	if !during || !after {
		t.Errorf("c2 took key 8 %v, key 7 after the heal %v (c1's held statement took it, its close freed it)", during, after)
	}
	if !strings.Contains(trace.String(), "pg_try_advisory_lock(7) -> true") || !strings.Contains(trace.String(), "closed by its client") {
		t.Errorf("the trace does not show the held statement, then the close:\n%s", trace.String())
	}
}

// Terminate ends every live session of a client's processes (c1, c1#2),
// and no other's; a restart ends every session and refuses connects while
// the server is down.
func TestWorldTerminateAndRestart(t *testing.T) {
	w := NewWorld(Options{})
	var errs []error
	var refused, back error
	w.Go("c1#2", func(p *Process) {
		c := connect(t, p, 0)
		try(t, c, 7)
		p.Sleep(10 * time.Millisecond)
		_, err := c.Holds(7)
		errs = append(errs, err)
	})
	w.Go("c10", func(p *Process) {
		c := connect(t, p, 0)
		try(t, c, 8)
		p.Sleep(10 * time.Millisecond)
		_, err := c.Holds(8)
		errs = append(errs, err)
		p.Sleep(10 * time.Millisecond)
		_, err = c.Holds(8)
		errs = append(errs, err)
	})
	w.Go("admin", func(p *Process) {
		p.Sleep(5 * time.Millisecond)
		if n := w.Terminate("c1"); n != 1 {
			t.Errorf("Terminate(c1) ended %d sessions, want 1", n)
		}
		p.Sleep(10 * time.Millisecond)
		w.Restart(100 * time.Millisecond)
		_, refused = p.Connect(0)
		p.Sleep(100 * time.Millisecond)
		_, back = p.Connect(0)
	})
	run(t, w)
	if len(errs) != 3 || !errors.Is(errs[0], ErrTerminated) || errs[1] != nil || !errors.Is(errs[2], ErrTerminated) {
		t.Errorf("statements after the terminate (c1#2, c10) and the restart (c10): %v", errs)
	}
	if !errors.Is(refused, ErrRefused) || back != nil {
		t.Errorf("a connect while down: %v; after: %v", refused, back)
	}
}

// A close the client sends while partitioned reaches the server on the
// heal: until then its session, and its lock, live on.
func TestWorldPartitionHoldsAClose(t *testing.T) {
	w := NewWorld(Options{})
	var during, after bool
	w.Go("c1", func(p *Process) {
		c := connect(t, p, 0)
		try(t, c, 7)
		p.Sleep(10 * time.Millisecond) // c2 partitions it meanwhile
		c.Close()
		p.Sleep(time.Second) // alive at the heal
	})
	w.Go("c2", func(p *Process) {
		w.Partition("c1")
		p.Sleep(20 * time.Millisecond)
		during = try(t, connect(t, p, 0), 7)
		w.Heal("c1")
		after = try(t, connect(t, p, 0), 7)
	})
	run(t, w)
	if during || !after {
		t.Errorf("c2 took the key during the partition %v (want false), after the heal %v (want true)", during, after)
	}
}
