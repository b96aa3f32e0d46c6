package consulsemrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// scheduleSalt seeds the simulator's choices once a plan's Schedule runs
// out (with its ScheduleSeed).
const scheduleSalt = 0x6373

// Simulate runs p against the reference (or p's mutant of it) on a fresh
// simulated server: the same plan always gives the same history. trace,
// if set, receives the simulator's trace.
func Simulate(p *Plan, trace io.Writer) (*prover.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &runner{p: p, clients: map[string]*client{}, armed: map[string]bool{}, ctx: context.Background()}
	var w *consulsim.World
	decide, state := p.Decider(scheduleSalt, func() int { return w.Keep() })
	o := consulsim.Options{Kind: kindOf(p.Backend), Persistent: p.Persistent, KeepInputs: p.Searched(), Decide: decide,
		Timeout: time.Duration(p.TTLMs) * time.Millisecond, Trace: trace, OnDrop: r.dropped}
	if len(p.Cluster) > 0 {
		// A cluster's servers keep their state on disk, as the real
		// cluster targets' do.
		o.Persistent = true
		o.Cluster = &consulsim.ClusterOptions{NodeOf: p.nodeOf}
	}
	w, err := consulsim.New(o)
	if err != nil {
		return nil, err
	}
	r.sim = w
	state(w.Unseen(), w, r) // an exhaustive search's state at a choice
	if len(p.Cluster) > 0 {
		r.nodes = &simNodes{w: w}
	}
	r.begin(simPlace{w})
	if err := w.Run(); err != nil {
		return nil, err
	}
	return r.Result(r.p.Prefix)
}

// begin starts the plan's clients and its nemesis in w.
func (r *runner) begin(w place) {
	r.w = w
	r.Init(leaserun.RunConfig(w, w.Now))
	w.Lock()
	defer w.Unlock()
	for i, script := range r.p.Clients {
		st := r.add(leaserun.ClientName(i), script, r.p.limitOf(i))
		r.start(st)
	}
	r.nemesis()
}

// A place is where a plan's processes run and where the faults aimed at
// one client strike: the simulator (simPlace) or a real server reached
// through a fault proxy per process (realPlace). Its lock guards the
// runner's state: the simulator's does nothing (it moves one process at a
// time); a real place's is a mutex, which a process lets go of while it
// calls the server or sleeps (outside).
type place interface {
	sync.Locker
	// Target is the history's clock and the faults on a process
	// (Aim.Process, a client's current incarnation): kill, pause and its
	// resume, partition and its heal; force-close, its connections
	// closed from the server's side (the client connects again at its
	// next call; run.ErrStruckNothing when it had none open); and
	// restart-broker, the server down for Aim.Down, as the nemesis's
	// process (Aim.Wait its sleep), returning once it answers again, with
	// Aim.Struck called once the restart is under way: on the simulator
	// once the server is down, on a real server as it begins to stop.
	run.Target
	Go(name string, f func(proc))
	// outside runs f, a call of p's that may wait, without the lock; a
	// real place's paused process goes on only once it is resumed.
	outside(p proc, f func())
}

// A proc is one process of a place.
type proc interface {
	Sleep(d time.Duration)
	Backend() consulsem.Backend
}

// simPlace is the simulator as a place.
type simPlace struct{ *consulsim.World }

func (simPlace) Lock()                    {}
func (simPlace) Unlock()                  {}
func (simPlace) outside(_ proc, f func()) { f() }

// Strike kills, pauses or partitions the process a names, closes its
// connections, or restarts the server (the nemesis waits while it is
// down).
func (w simPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.ForceClose:
		return struck(w.World.ForceClose(a.Process))
	case histories.RestartBroker:
		if err := w.World.Restart(a.Down); err != nil {
			return err
		}
		a.Struck()
		a.Wait(a.Down)
		return nil
	}
	return run.StrikeProcess(a, w.World.Kill, w.World.Pause, w.World.Partition)
}

// End resumes or heals the process a names.
func (w simPlace) End(a run.Aim) error { return run.EndProcess(a, w.World.Resume, w.World.Heal) }

func (w simPlace) Go(name string, f func(proc)) {
	w.World.Go(name, func(p *consulsim.Process) { f(p) })
}

// A client is a process's place in its script and the lease it believes
// it holds; the place survives a kill (the restarted process goes on with
// its script, holding nothing).
type client struct {
	run.Proc
	script    []Step
	pos       int
	limit     int
	token     string // the lease it holds, "" for none
	acquiring bool   // an acquire is in flight (a drop-reply strikes its grant)
	// others are limits to try again with when the lock key disagrees
	// with limit (the probe's: the plan's clients may disagree).
	others []int
}

// runner runs one plan on the simulator, on the skeleton every family's
// runner shares (run.Runner).
type runner struct {
	run.Runner
	p     *Plan
	ctx   context.Context
	w     place
	sim   *consulsim.World // the simulator (its World), nil on a real server
	nodes nodes            // the cluster's nodes, real or simulated; nil on a single server
	// struck are the faults on the cluster in force, by their index in
	// the plan: the cut a partition made (a node's resolved), or the
	// node a pause stopped.
	struck  map[int]histories.Fault
	timeout time.Duration // a real server's bound on one operation
	// impl, if set, is the implementation under test, run in processes
	// of its own instead of the reference (real servers only).
	impl    Impl
	clients map[string]*client
	armed   map[string]bool // clients whose next granting write loses its reply
	failed  []error         // what ends the run without a history (a restart that failed)
	// made are the sessions (leases) the run's clients created on a real
	// server, by token: on a given server, the only ones that are the
	// run's.
	made map[string]bool
}

// add registers client name with its script and limit.
func (r *runner) add(name string, script []Step, limit int) *client {
	st := &client{Proc: run.Proc{Name: name}, script: script, limit: limit}
	return run.Register(&r.Runner, r.clients, &st.Proc, st)
}

// start starts an incarnation of a client: a process of its own in the
// simulator (c1, then c1#2 after a kill, ...).
func (r *runner) start(st *client) {
	run.Start(&r.Runner, &st.Proc, r.w.Go, func(p proc, gen int) { r.run(p, st, gen) })
}

// run is one incarnation of a client: the reference (or the plan's
// mutant), or the implementation's process, through the rest of its
// script. A process that crashed or hung is taken for killed (and said
// among the run's problems); one that got to the end is closed.
func (r *runner) run(p proc, st *client, gen int) {
	sem, err := r.open(p, st, gen)
	if !st.Live(gen) {
		return // killed while it started: its successor goes on
	}
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", st.Name, err))
		st.Done = true
		return
	}
	pc, _ := sem.(ProcessClient)
	for st.pos < len(st.script) && st.Live(gen) {
		s := st.script[st.pos]
		st.pos++
		r.step(p, sem, st, gen, s)
		if pc == nil || !st.Live(gen) {
			continue
		}
		if why := pc.Crashed(); why != "" {
			// The process is gone (it exited, or hung and was given up):
			// what it held is lost, and the client goes on as a new
			// process, as after a kill. The kill is recorded after the
			// operation ended, so it excuses nothing.
			r.Problems = append(r.Problems, fmt.Sprintf("%s %s", st.Name, why))
			r.strike(Fault{Fault: histories.Kill, Target: st.Name}, false)
			return
		}
	}
	if st.Live(gen) {
		st.Done = true
	}
	if pc != nil {
		r.w.outside(p, func() { pc.Close() }) // its stdin closes: it exits
	}
}

// open makes the client of an incarnation: the reference (or the plan's
// mutant) on the process's backend, or the implementation's process,
// started outside the runner's lock.
func (r *runner) open(p proc, st *client, gen int) (Client, error) {
	if r.impl != nil {
		var pc ProcessClient
		var err error
		s := Session{Prefix: r.p.Prefix, Backend: r.p.Backend, Limit: st.limit, TTL: time.Duration(r.p.TTLMs) * time.Millisecond, Run: r.p.Prefix}
		r.w.outside(p, func() { pc, err = p.(starter).start(r.impl, st.Process, s) })
		if err != nil {
			return nil, err
		}
		return pc, nil
	}
	o := consulsem.Options{StaleReads: r.p.StaleReads, BehaviorRelease: r.p.BehaviorRelease}
	if r.p.LockDelay {
		o.LockDelay = time.Duration(r.p.TTLMs) * time.Millisecond
	}
	if m := MutantNamed(r.p.Mutant); m != nil {
		m.defects(&o.Defects)
	}
	sem, err := consulsem.On(dropping{p.Backend(), r, st, gen}, o)
	if err != nil {
		return nil, err
	}
	return sem, nil
}

// A starter is a process that starts an implementation's (a real
// server's, or the served simulator's).
type starter interface {
	start(impl Impl, name string, s Session) (ProcessClient, error)
}

// dropping is a client's backend: a drop-reply armed for the client
// strikes its next granting write.
type dropping struct {
	consulsem.Backend
	r   *runner
	st  *client
	gen int
}

// CreateSession creates a session, whose token a real run keeps (made).
func (d dropping) CreateSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (string, time.Duration, error) {
	tok, granted, err := d.Backend.CreateSession(ctx, ttl, release, lockDelay)
	if err == nil && d.r.made != nil {
		d.r.w.Lock()
		d.r.made[tok] = true
		d.r.w.Unlock()
	}
	return tok, granted, err
}

func (d dropping) WriteLock(ctx context.Context, w consulsem.LockWrite) (uint64, error) {
	if d.r.sim == nil {
		return d.loseReply(ctx, w)
	}
	if d.st.acquiring && d.st.Live(d.gen) && d.r.armed[d.st.Name] {
		delete(d.r.armed, d.st.Name)
		d.r.sim.DropReply(d.st.Process)
	}
	return d.Backend.WriteLock(ctx, w)
}

// step runs one line of a client's script: the call outside the
// runner's lock, bounded by the runner's timeout on a real server (an
// implementation's process by its launcher's).
func (r *runner) step(p proc, sem Client, st *client, gen int, s Step) {
	prefix := r.p.Prefix
	ttl := time.Duration(r.p.TTLMs) * time.Millisecond
	e := histories.Event{Process: st.Name, Type: histories.Invoke, F: s.Op, Lock: prefix, Kind: histories.Lease}
	call := func(f func(ctx context.Context)) {
		r.w.outside(p, func() {
			ctx, cancel := r.ctx, context.CancelFunc(func() {})
			if r.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, r.timeout)
			}
			defer cancel()
			f(ctx)
		})
	}
	switch {
	case s.Op == Sleep:
		r.w.outside(p, func() { p.Sleep(time.Duration(s.Ms) * time.Millisecond) })
	case s.Op == histories.Acquire && st.token == "":
		e.Value = &lease.Value{Max: histories.Int(st.limit), TTLMs: histories.Int(r.p.TTLMs)}
		r.Invoke(&st.Proc, e)
		st.acquiring = true
		var l consulsem.Lease
		var err error
		limit := st.limit
		call(func(ctx context.Context) { l, err = sem.Acquire(ctx, prefix, limit, ttl) })
		st.acquiring = false
		if st.Live(gen) {
			r.acquired(st, l, err)
			if errors.Is(err, consulsem.ErrMismatch) && len(st.others) > 0 {
				st.limit, st.others = st.others[0], st.others[1:]
				st.pos-- // again, with the next limit
			}
		}
	case s.Op == histories.Refresh && st.token != "":
		e.Value = &lease.Value{Token: st.token, TTLMs: histories.Int(r.p.TTLMs)}
		r.Invoke(&st.Proc, e)
		var err error
		tok := st.token
		call(func(ctx context.Context) { err = sem.Refresh(ctx, prefix, tok) })
		if st.Live(gen) {
			r.changed(st, err)
		}
	case s.Op == histories.Verify && st.token != "":
		e.Value = &lease.Value{Token: st.token}
		r.Invoke(&st.Proc, e)
		var held bool
		var err error
		tok := st.token
		call(func(ctx context.Context) { held, err = sem.Verify(ctx, prefix, tok) })
		if st.Live(gen) {
			r.verified(st, held, err)
		}
	case s.Op == histories.Release && st.token != "":
		e.Value = &lease.Value{Token: st.token}
		r.Invoke(&st.Proc, e)
		var err error
		tok := st.token
		call(func(ctx context.Context) { err = sem.Release(ctx, prefix, tok) })
		if st.Live(gen) {
			st.token = "" // the client gives up on it either way
			r.changed(st, err)
		}
	}
}

// acquired records an acquire's outcome.
func (r *runner) acquired(st *client, l consulsem.Lease, err error) {
	switch {
	case err == nil:
		st.token = l.Token
		if r.made != nil {
			r.made[l.Token] = true // an implementation's session: the run's
		}
		v := &lease.Value{Token: l.Token, TTLMs: histories.Int(int(l.TTL.Milliseconds()))}
		if l.Fence != NoFence {
			v.Fence = histories.Int(int(l.Fence))
		}
		r.complete(st, histories.Ok, v, nil)
	case errors.Is(err, consulsem.ErrFull):
		r.complete(st, histories.Fail, &lease.Value{Reason: histories.Full}, nil)
	case errors.Is(err, consulsem.ErrUnknownOutcome):
		// Its session may hold a slot until it expires.
		r.complete(st, histories.Info, nil, err)
	default:
		// Refused (ErrNotGranted, ErrMismatch) or failed before the
		// grant's write was sent: not granted.
		r.complete(st, histories.Fail, nil, err)
	}
}

// changed records a refresh's or release's outcome.
func (r *runner) changed(st *client, err error) {
	switch {
	case err == nil:
		r.complete(st, histories.Ok, nil, nil)
	case errors.Is(err, consulsem.ErrExpired):
		st.token = ""
		r.complete(st, histories.Fail, &lease.Value{Reason: histories.Expired}, nil)
	default:
		r.complete(st, histories.Info, nil, err)
	}
}

// verified records a verify's outcome: a holder told it no longer holds
// gives its lease up; an error leaves the answer unknown.
func (r *runner) verified(st *client, held bool, err error) {
	if err != nil {
		r.complete(st, histories.Info, nil, err)
		return
	}
	if !held {
		st.token = ""
	}
	r.complete(st, histories.Ok, &lease.Value{Held: &held}, nil)
}

// complete records the completion of the client's operation in flight.
func (r *runner) complete(st *client, typ histories.Type, v *lease.Value, err error) {
	r.Finish(&st.Proc, typ, histories.Of(v), err)
}

// struck is a force-close's error: run.ErrStruckNothing when it closed
// nothing.
func struck(closed bool) error {
	if !closed {
		return run.ErrStruckNothing
	}
	return nil
}
