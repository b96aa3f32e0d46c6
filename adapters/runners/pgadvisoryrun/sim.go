package pgadvisoryrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/pgadvisory"
	"github.com/lockprover/lockprover/sim/postgressim"
)

// scheduleSalt mixes the family into the simulator's schedule seed.
const scheduleSalt = 0x7067

// simKey is the advisory key plans lock on the simulator (a run has a
// server of its own).
const simKey = 1

// Simulate runs p against the reference (or p's mutant of it) on a fresh
// simulated PostgreSQL (sim/postgressim): the same plan always gives the same
// history. trace, if set, receives the simulator's trace.
func Simulate(p *Plan, trace io.Writer) (*prover.Result, error) {
	var w *postgressim.World
	decide, state := p.Decider(scheduleSalt, func() int { return w.Keep() })
	w = postgressim.NewWorld(postgressim.Options{Decide: decide, KeepInputs: p.Searched(),
		Trace: trace, Timeout: opTimeout(time.Duration(p.TTLMs) * time.Millisecond)})
	r := newRunner(context.Background(), p, simPlace{w}, simKey)
	state(w.Unseen(), w, r) // an exhaustive search's state at a choice
	if err := r.begin(); err != nil {
		return nil, err
	}
	if err := w.Run(); err != nil {
		return nil, err
	}
	return r.result()
}

// simPlace is the simulated server: deterministic, in virtual time.
type simPlace struct{ w *postgressim.World }

func (simPlace) Lock()                   {}
func (simPlace) Unlock()                 {}
func (b simPlace) Now() int64            { return b.w.Now() }
func (simPlace) add(string) error        { return nil }
func (simPlace) patience() time.Duration { return time.Hour }
func (simPlace) poll() run.Poll {
	return run.Poll{First: 10 * time.Millisecond, Max: 10 * time.Millisecond}
}
func (b simPlace) Go(process string, f func(proc)) {
	b.w.Go(process, func(p *postgressim.Process) { f(simProc{p}) })
}

// Strike kills, pauses or partitions a client's incarnation, ends the
// client's sessions, or restarts the server.
func (b simPlace) Strike(a run.Aim) error {
	if a.Fault == histories.RestartBroker {
		// The server is down; the nemesis waits while it is.
		b.w.Restart(a.Down)
		a.Wait(a.Down)
		return nil
	}
	return clientFaults(a, b.on(b.w.Kill), b.on(b.w.Pause), b.on(b.w.Partition), b.terminate)
}

// terminate ends the client's sessions (force-close).
func (b simPlace) terminate(name string) error { b.w.Terminate(name); return nil }

// End resumes or heals a client's incarnation.
func (b simPlace) End(a run.Aim) error { return clientEnds(a, b.on(b.w.Resume), b.on(b.w.Heal)) }

// on is a fault of the simulator's, aimed at a process alone.
func (simPlace) on(f func(process string)) func(_, process string) {
	return func(_, process string) { f(process) }
}

// simProc is a process of the simulator.
type simProc struct{ p *postgressim.Process }

func (s simProc) Sleep(d time.Duration) { s.p.Sleep(d) }
func (simProc) wait()                   {} // a pause stops the process itself
func (simProc) context(time.Duration) (context.Context, context.CancelFunc) {
	return context.Background(), func() {} // the simulator times statements out itself (postgressim.Options.Timeout)
}

func (s simProc) open(name string, se Session, d pgadvisory.Defects) (Client, error) {
	return reference{Lock: pgadvisory.NewLockOn(simServer{s.p}, se.Key, se.TTL, d), name: name, grants: new(int)}, nil
}

// simServer is the simulated server as the reference's Server, seen from
// one process.
type simServer struct{ p *postgressim.Process }

func (s simServer) Now() time.Time { return s.p.Now() }

func (s simServer) Open(_ context.Context, idle time.Duration) (pgadvisory.Conn, error) {
	c, err := s.p.Connect(idle)
	if err != nil {
		return nil, simError(err)
	}
	return simConn{c}, nil
}

// simConn is a simulated session as the reference's Conn.
type simConn struct{ c *postgressim.Conn }

func (c simConn) TryLock(_ context.Context, key int64) (bool, error) {
	ok, err := c.c.TryLock(key)
	return ok, simError(err)
}

func (c simConn) Holds(_ context.Context, key int64) (bool, error) {
	ok, err := c.c.Holds(key)
	return ok, simError(err)
}

func (c simConn) Unlock(_ context.Context, key int64) (bool, error) {
	ok, err := c.c.Unlock(key)
	return ok, simError(err)
}

func (c simConn) Close()         { c.c.Close() }
func (c simConn) IsClosed() bool { return c.c.Closed() }
func (c simConn) PID() uint32    { return uint32(c.c.PID()) }

// simError says what the simulator's error means for the Lock, as
// classify does pgx's: a refused connect or a statement on a closed
// connection sent nothing, a session the server ended (for idling, or
// terminated), or unknown (a timeout).
func simError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, postgressim.ErrRefused), errors.Is(err, postgressim.ErrClosed):
		return fmt.Errorf("%w: %w", pgadvisory.ErrNotSent, err)
	case errors.Is(err, postgressim.ErrIdle):
		return fmt.Errorf("%w: %w", pgadvisory.ErrIdled, err)
	case errors.Is(err, postgressim.ErrTerminated):
		return fmt.Errorf("%w: %w", pgadvisory.ErrEnded, err)
	}
	return err
}
