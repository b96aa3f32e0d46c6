package redlockrun

import (
	"context"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/redlock"
	"github.com/lockprover/lockprover/sim/redissim"
)

// A place is where a plan's processes run and its faults strike: the
// simulated servers (simPlace) or real redis-servers the run starts
// (redisPlace). The runner is the same on both.
//
// The runner's state is guarded by the place's Locker: a process holds
// it while it records and decides, and lets go of it around every call
// that may wait (an operation, a sleep, a restart). The simulator runs one
// process at a time and needs no lock (its Locker does nothing); a real
// place's processes run at once and share a mutex. Servers are numbered
// from 0.
type place interface {
	sync.Locker
	// Target is the history's clock (the time since the run began) and
	// the faults: kill a client's process (Aim.Process); partition it
	// from a server (Aim.Server) until the heal (bytes wait both ways);
	// pause a server (SIGSTOP) until its resume; drop-reply, the server's
	// next reply to the process lost (the place reports it when it is
	// lost: see newSimPlace); restart-broker, a server taken down (a
	// crash) for Aim.Down and up again, as the nemesis's process (Aim.Wait
	// its sleep), calling Aim.Struck, with the lock held, once it is down
	// (before any process can record what the crash did), and returning
	// once it is up, or with why it could not; clock-jump, a server's
	// clock moved by Aim.Offset (an error: it did not move).
	run.Target
	// Go starts process name running f.
	Go(name string, f func(proc))
	// left is how long the validity of l lasts after recorded, a time
	// of the history: the lock's clock (redlock.Env.Now) is the
	// simulator's virtual time, or CLOCK_MONOTONIC.
	left(l redlock.Lease, recorded int64) time.Duration
	// stuckAfter is how long the runner waits for its clients to finish
	// before it calls the plan stuck.
	stuckAfter() time.Duration
}

// A proc is one process's view of the place.
type proc interface {
	// Sleep lets d pass for the process.
	Sleep(d time.Duration)
	// open makes the process's lock, client name of the run: the
	// reference with options o on every server, or the implementation's
	// process (real servers only).
	open(name string, o redlock.Options) (Client, error)
	// openPriority makes the process's priority lock, of priority prio:
	// the reference with options o on every server (no implementation's
	// process yet).
	openPriority(name string, o redlock.Options, prio int64) (Client, error)
	// arm has f run when the operation about to be called first reads
	// the lock's clock (its start, from which it counts the validity),
	// before it sends anything: the simulator runs f at once (nothing
	// comes between); a real process then, from inside the call. fired
	// says whether f ran, and disarms it.
	arm(f func())
	fired() bool
}

// simPlace is the simulated servers: deterministic, in virtual time. With
// an implementation (served), the clients are its processes, each on the
// servers served to it on the wire.
type simPlace struct {
	w      *redissim.World
	served *servedImpl
}

// servedImpl is an implementation under test on the simulated servers
// served on the wire: each incarnation of a client is a process of impl,
// told session with the addresses wire serves to its World process.
type servedImpl struct {
	impl    Impl
	wire    Wire
	session Session
	// procs are the implementation's processes by World process: a
	// kill of the World's kills its process too.
	procs map[string]ProcessClient
}

// newSimPlace makes p's simulated servers, deciding by p's Decisions;
// lost reports each reply DropReply lost, as it is lost. Under an
// exhaustive search each choice's state is the servers' and runner's
// (the history among it), fingerprinted.
func newSimPlace(p *Plan, trace io.Writer, lost func(proc string, server int), runner any) (simPlace, error) {
	pers := redissim.None
	if p.Persistence == PersistAlways {
		pers = redissim.Always
	}
	var w *redissim.World
	decide, state := p.Decider(scheduleSalt, func() int { return w.Keep() })
	w, err := redissim.New(redissim.Options{Servers: p.Servers, Persistence: pers, KeepInputs: p.Searched(), Trace: trace, OnDrop: lost, Decide: decide})
	if err == nil {
		state(w.Unseen(), w, runner) // an exhaustive search's state at a choice
	}
	return simPlace{w: w}, err
}

func (simPlace) Lock()                     {}
func (simPlace) Unlock()                   {}
func (b simPlace) Now() int64              { return b.w.Now() }
func (simPlace) stuckAfter() time.Duration { return time.Hour }

// Strike kills a client's process, partitions it from a server, loses
// the server's next reply to it, pauses a server, restarts one or jumps
// its clock. (The simulator's one error, a server out of range, the
// plan's validation rules out.)
func (b simPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.RestartBroker:
		return b.restart(a)
	case histories.ClockJump:
		return b.w.ClockJump(a.Server, a.Offset)
	}
	return strike(a, b.kill, func(name string, i int) { b.w.Partition(name, i) }, func(name string, i int) { b.w.DropReply(name, i) },
		func(i int) { b.w.Pause(i) })
}

// End heals a client's partition from a server, or resumes a server.
func (b simPlace) End(a run.Aim) error {
	return end(a, func(name string, i int) { b.w.Heal(name, i) }, func(i int) { b.w.Resume(i) })
}

func (b simPlace) Go(name string, f func(proc)) {
	b.w.Go(name, func(p *redissim.Process) { f(simProc{p, b}) })
}

// KillSelf strikes a process's own kill from a timer of the World, due
// now, while the process sleeps a nanosecond: the timer comes first, and
// the kill stops the process in its sleep.
func (b simPlace) KillSelf(p proc, strike func()) {
	b.w.After(0, strike)
	p.Sleep(time.Nanosecond)
}

// kill kills World process name, and its implementation's process (a
// SIGKILL first, so that the close its runner then makes finds it gone).
func (b simPlace) kill(name string) {
	if b.served != nil {
		if pc := b.served.procs[name]; pc != nil {
			pc.Signal(syscall.SIGKILL)
			delete(b.served.procs, name)
		}
	}
	b.w.Kill(name)
}

// restart crashes a's server and has it come back once its downtime has
// passed; the nemesis waits as long.
func (b simPlace) restart(a run.Aim) error {
	if err := b.w.Restart(a.Server, a.Down); err != nil {
		return err
	}
	a.Struck()
	a.Wait(a.Down)
	return nil
}

// simProc is a process of the simulator.
type simProc struct {
	p *redissim.Process
	b simPlace
}

func (s simProc) Sleep(d time.Duration) { s.p.Sleep(d) }
func (s simProc) arm(f func())          { f() }
func (s simProc) fired() bool           { return true }
func (s simProc) open(name string, o redlock.Options) (Client, error) {
	if s.b.served != nil {
		return s.connect(name, s.b.served.session)
	}
	rl, err := redlock.NewOn(s.p.Env(), o)
	if err != nil {
		return nil, err
	}
	return rl, nil
}

func (s simProc) openPriority(name string, o redlock.Options, prio int64) (Client, error) {
	if s.b.served != nil {
		ss := s.b.served.session
		ss.Priority, ss.Prio, ss.OnLost = true, prio, o.OnLost
		return s.connect(name, ss)
	}
	pl, err := redlock.NewPriorityOn(s.p.PriorityEnv(), o)
	if err != nil {
		return nil, err
	}
	return priorityClient{pl, prio}, nil
}

// connect starts the implementation's process of client name for ss, on
// the servers served to this World process: it waits on the process
// through the World (its commands are the World's steps).
func (s simProc) connect(name string, ss Session) (Client, error) {
	sv := s.b.served
	addrs, ctx, err := sv.wire.Process(context.Background(), s.p)
	if err != nil {
		return nil, err
	}
	ss.Addrs = addrs
	pc, err := sv.impl.Connect(ctx, name, ss)
	if err != nil {
		return nil, err
	}
	sv.procs[s.p.Name()] = pc
	return pc, nil
}

// left is the validity left at the simulator's time: nothing comes between
// the lock's return and its record, but for the nanosecond the recorder
// may add to keep times increasing.
func (b simPlace) left(l redlock.Lease, _ int64) time.Duration {
	return time.Duration(l.ValidUntil - b.w.Now())
}

// strike strikes a with a place's own methods: a kill of the process it
// names, its partition from a server or a reply of the server's lost, a
// pause of a server.
func strike(a run.Aim, kill func(name string), partition, dropReply func(name string, server int), pause func(server int)) error {
	switch a.Fault {
	case histories.Kill:
		kill(a.Process)
	case histories.Partition:
		partition(a.Process, a.Server)
	case histories.DropReply:
		dropReply(a.Process, a.Server)
	case histories.Pause:
		pause(a.Server)
	default:
		return run.CannotStrike(a)
	}
	return nil
}

// end ends a with a place's own methods: the heal of a process's
// partition from a server, the resume of a server.
func end(a run.Aim, heal func(name string, server int), resume func(server int)) error {
	switch a.Fault {
	case histories.Partition:
		heal(a.Process, a.Server)
	case histories.Pause:
		resume(a.Server)
	default:
		return run.CannotStrike(a)
	}
	return nil
}
