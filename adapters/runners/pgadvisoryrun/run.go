package pgadvisoryrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// restartDowntime is how long a restarted server stays down.
const restartDowntime = 200 * time.Millisecond

// opTimeout bounds one operation of a client: a statement a partition
// holds ends unknown after it.
func opTimeout(ttl time.Duration) time.Duration { return 2*ttl + time.Second }

// A client that cannot start (an implementation's process, its server
// restarting) tries openTries times, openBackoff apart.
const (
	openTries   = 40
	openBackoff = 50 * time.Millisecond
)

// A place is where a plan's processes run and its faults strike: the
// simulated server (simPlace, sim/postgressim) or a private PostgreSQL with a
// fault proxy per client (postgresPlace). The runner is the same on both.
//
// The runner's state is guarded by the place's Locker: a process holds
// it while it records and decides, and lets go of it around every call
// that may wait (a statement, a sleep, a restart). The simulator runs
// one process at a time and needs no lock; a real place's processes
// run at once and share a mutex. The faults are called with the lock
// held (but a restart), on the client name (c1, c2, ...) and its current
// incarnation's process (c1, c1#2, ...).
type place interface {
	sync.Locker
	// Target is the history's clock (the time since the run began) and
	// the faults on a client (Aim.Client, its current incarnation's
	// process Aim.Process): a kill ends the incarnation (its connections
	// close, the server ends its sessions and their locks; it runs no
	// more, no longer paused or partitioned); a pause stops it (SIGSTOP:
	// its sessions idle) until its resume; a partition holds what it and
	// the server send each other until the heal; force-close ends every
	// session the client has on the server (pg_terminate_backend), and
	// may wait; restart-broker takes the server down, as a fast shutdown
	// does, for Aim.Down, as the nemesis's process (Aim.Wait its sleep),
	// returning once it is up: it waits, without the lock.
	run.Target
	// Go starts process (the nemesis, or a client's incarnation) running
	// f.
	Go(process string, f func(proc))
	// add readies the place for client name (a real one: its proxy).
	add(name string) error
	// patience is how long the nemesis waits for the clients, and then
	// for the probe.
	patience() time.Duration
	// poll is how often the runner looks whether its clients are done.
	poll() run.Poll
}

// A proc is one process's view of the place.
type proc interface {
	// Sleep lets d pass for the process (it may be cut short when the
	// run is interrupted).
	Sleep(d time.Duration)
	// wait waits while the client is paused, where the place cannot
	// stop the process itself (the reference, in this process, on a real
	// server: its proxy holds its bytes, and its next step waits here).
	wait()
	// open makes the process's handle on the lock, as client name: the
	// reference with defects d, or the implementation's process, told s
	// (with the URL of the client's proxy). It is called without the
	// lock.
	open(name string, s Session, d pgadvisory.Defects) (Client, error)
	// context is the context of the process's operations: one bounded by
	// opTimeout for the reference on a real server (the protocol has the
	// implementation's own timeout).
	context(ttl time.Duration) (context.Context, context.CancelFunc)
}

// runner runs one plan on a place, on the skeleton every family's
// runner shares (its lock is the place's).
type runner struct {
	run.Runner
	ctx     context.Context
	p       *Plan
	b       place
	ttl     time.Duration
	key     int64
	defects pgadvisory.Defects
	clients map[string]*client
}

// A client is a process's place in its script and the lease it believes
// it holds; they outlive its incarnations.
type client struct {
	run.Proc
	script []lease.Step
	pos    int
	token  string
}

// newRunner makes a runner of p on b, recording by b's clock, with the
// lock's key.
func newRunner(ctx context.Context, p *Plan, b place, key int64) *runner {
	r := &runner{ctx: ctx, p: p, b: b, ttl: time.Duration(p.TTLMs) * time.Millisecond, key: key, clients: map[string]*client{}}
	if m := MutantNamed(p.Mutant); m != nil {
		r.defects = m.Defects()
	}
	r.Init(run.Config{Lock: b, Now: b.Now, Poll: b.poll(), Ends: []string{histories.Partition, histories.Pause}})
	return r
}

// begin starts the clients and the nemesis (with the lock held).
func (r *runner) begin() error {
	for i, script := range r.p.Clients {
		name := leaserun.ClientName(i)
		st, err := r.add(name, script)
		if err != nil {
			return err
		}
		r.start(st)
	}
	r.nemesis()
	return nil
}

// add registers client name with its script.
func (r *runner) add(name string, script []lease.Step) (*client, error) {
	if err := r.b.add(name); err != nil {
		return nil, err
	}
	st := &client{Proc: run.Proc{Name: name}, script: script}
	return run.Register(&r.Runner, r.clients, &st.Proc, st), nil
}

// start starts the client's next incarnation (with the lock held).
func (r *runner) start(st *client) {
	run.Start(&r.Runner, &st.Proc, r.b.Go, func(pr proc, gen int) { r.run(pr, st, gen) })
}

// run is one incarnation of a client (with the lock held): the
// reference or a process of the implementation, and the rest of the
// script.
//
// A client done with its script leaves its session open and idle, a
// lock in it as a lease left to expire: the server ends the session once
// it has been idle for the ttl (closing it now would free the lock while
// the lease is still certainly valid). The run closes sessions and
// processes at its end.
func (r *runner) run(pr proc, st *client, gen int) {
	// The run's name (the launcher counts an implementation's failed
	// starts by it) is its key's: each run's own.
	s := Session{Key: r.key, TTL: r.ttl, Run: fmt.Sprintf("lp-%x", r.key)}
	var c Client
	err := run.Retry(openTries, openBackoff, func(d time.Duration) error { r.Outside(func() { pr.Sleep(d) }); return r.ctx.Err() }, func() error {
		if r.ctx.Err() != nil || !st.Live(gen) {
			return run.Stop
		}
		var err error
		r.Outside(func() { c, err = pr.open(st.Process, s, r.defects) })
		return err
	})
	if !st.Live(gen) {
		return
	}
	if c == nil || err != nil {
		if err == nil {
			err = errors.New("the run ended")
		}
		r.Problems = append(r.Problems, fmt.Sprintf("%s could not start: %v", st.Name, err))
		st.Done = true
		return
	}
	for st.pos < len(st.script) && st.Live(gen) && r.ctx.Err() == nil {
		step := st.script[st.pos]
		st.pos++
		r.step(pr, st, gen, c, step)
		if pc, ok := c.(ProcessClient); ok && st.Live(gen) {
			if why := pc.Crashed(); why != "" {
				// The process is gone: what it held goes with its
				// session, and the client goes on as a new process, as
				// after a kill (recorded after the operation ended, so
				// that it excuses nothing).
				r.Problems = append(r.Problems, fmt.Sprintf("%s %s", st.Name, why))
				r.strike(nil, Fault{Fault: histories.Kill, Target: st.Name}, false)
				return
			}
		}
	}
	if st.Live(gen) {
		st.Done = true
	}
}

// step runs one line of a client's script.
func (r *runner) step(pr proc, st *client, gen int, c Client, s lease.Step) {
	pr.wait()
	if !st.Live(gen) {
		return
	}
	if s.Op == lease.Sleep {
		r.Outside(func() { pr.Sleep(time.Duration(s.Ms) * time.Millisecond) })
		return
	}
	e := histories.Event{Process: st.Name, Type: histories.Invoke, F: s.Op, Lock: r.p.Key, Kind: histories.Lease}
	ttlMs := r.p.TTLMs
	switch {
	case s.Op == histories.Acquire && st.token == "":
		one := 1
		e.Value = &lease.Value{Max: &one, TTLMs: &ttlMs}
	case s.Op == histories.Refresh && st.token != "":
		e.Value = &lease.Value{Token: st.token, TTLMs: &ttlMs}
	case s.Op == histories.Release && st.token != "":
		e.Value = &lease.Value{Token: st.token}
	default:
		return // nothing to refresh or release, or already held
	}
	r.Invoke(&st.Proc, e)
	var token string
	var err error
	r.Outside(func() {
		x, cancel := pr.context(r.ttl)
		defer cancel()
		switch s.Op {
		case histories.Acquire:
			token, err = c.Acquire(x)
		case histories.Refresh:
			err = c.Refresh(x, st.token)
		case histories.Release:
			err = c.Release(x, st.token)
		}
	})
	if !st.Live(gen) {
		return // killed meanwhile: the kill ended the operation
	}
	r.complete(st, c, s.Op, token, err)
}

// complete records an operation's outcome.
func (r *runner) complete(st *client, c Client, op, token string, err error) {
	switch {
	case err == nil && op == histories.Acquire:
		st.token = token
		r.Finish(&st.Proc, histories.Ok, &lease.Value{Token: st.token}, nil)
	case err == nil:
		if op == histories.Release {
			st.token = ""
		}
		r.Finish(&st.Proc, histories.Ok, nil, nil)
	case op == histories.Acquire && errors.Is(err, pgadvisory.ErrFull):
		r.Finish(&st.Proc, histories.Fail, &lease.Value{Reason: histories.Full}, nil)
	case op == histories.Acquire && errors.Is(err, pgadvisory.ErrNotSent):
		r.Finish(&st.Proc, histories.Fail, nil, err)
	case op != histories.Acquire && errors.Is(err, pgadvisory.ErrLost):
		st.token = ""
		r.Finish(&st.Proc, histories.Fail, &lease.Value{Reason: histories.Expired}, err)
	case op != histories.Acquire && errors.Is(err, pgadvisory.ErrNotSent):
		// Nothing reached the server: the lease is as it was, and the
		// holder cannot tell for how long; it lets it go.
		st.token = ""
		r.Finish(&st.Proc, histories.Fail, nil, err)
	default:
		// Unknown: the client gives up its lease; the reference ends its
		// session, and a lock the session may hold goes with it (an
		// implementation does as it does).
		st.token = ""
		r.Finish(&st.Proc, histories.Info, nil, err)
		if ref, ok := c.(reference); ok {
			r.Outside(ref.Close)
		}
	}
}

// nemesis starts the nemesis's process: it strikes the plan's timed
// faults and brings the run to its quiescent end: the holds ended, every
// lease expired, and a probe that must take the lock.
func (r *runner) nemesis() {
	timeline := run.Timeline(len(r.p.Nemesis), func(i int) (int, int, bool) {
		f := r.p.Nemesis[i]
		return f.At, f.For, true
	})
	r.b.Go("nemesis", func(pr proc) {
		r.Nemesis(timeline, run.Nemesis{
			Sleep:  run.Sleeper(r.ctx, pr.Sleep),
			Strike: func(t run.Timed) { r.Locked(func() { r.strike(pr, r.p.Nemesis[t.Fault], t.End) }) },
			EndFaults: func() {
				r.Locked(func() {
					for _, h := range r.Holds() {
						r.strike(pr, Fault{Fault: h.Fault, Target: h.Target}, true)
					}
				})
			},
			// Every session left idle has been ended by the server once
			// the ttl and a margin have passed: the lock must be free.
			Settle: func() { pr.Sleep(r.ttl + lease.Margin) },
			Probe: func() {
				r.Locked(func() {
					if st, err := r.add("probe", []lease.Step{{Op: histories.Acquire}, {Op: histories.Release}}); err == nil {
						r.start(st)
					} else {
						r.Problems = append(r.Problems, err.Error())
					}
				})
			},
			Abandon: func(name string) {
				r.Locked(func() {
					if st := r.clients[name]; st != nil {
						r.kill(st, nil)
						st.Gen++ // the abandoned incarnation records nothing more
					}
				})
			},
			Patience:  r.b.patience(),
			ProbeTime: r.b.patience(),
		})
	})
}

// strike applies a fault (or, with end, ends it) and records it; pr is
// the nemesis's process (nil for a kill of a crashed client's).
func (r *runner) strike(pr proc, f Fault, end bool) {
	st := r.clients[f.Target]
	name := f.Fault
	if end {
		if !r.Held(f.Fault, f.Target) {
			return
		}
		name = histories.EndOf(f.Fault)
	}
	var v *histories.Fault
	if f.Target != "" {
		v = &histories.Fault{Process: f.Target}
	}
	if st != nil && st.Done && !end {
		return // the client has finished its script
	}
	// The place's fault first, then its record: on the simulator a
	// fault from the nemesis's process is a scheduling point, applied
	// when the scheduler serves it (others may move before, nothing
	// between it and what the nemesis does next).
	at := r.from()
	switch name {
	case histories.Kill:
		r.kill(st, func() { r.StruckFrom(name, histories.Of(v), at) })
		r.start(st) // its next incarnation: the old one is no longer Live
		return
	case histories.Pause:
		r.b.Strike(run.Aim{Fault: histories.Pause, Client: st.Name, Process: st.Process})
		r.Hold(histories.Pause, f.Target)
	case histories.Resume:
		r.Unhold(histories.Pause, f.Target)
		r.b.End(run.Aim{Fault: histories.Pause, Client: st.Name, Process: st.Process})
	case histories.Partition:
		r.b.Strike(run.Aim{Fault: histories.Partition, Client: st.Name, Process: st.Process})
		r.Hold(histories.Partition, f.Target)
	case histories.Heal:
		r.Unhold(histories.Partition, f.Target)
		r.b.End(run.Aim{Fault: histories.Partition, Client: st.Name, Process: st.Process})
	case histories.ForceClose:
		// The server ends every session the client has (found by its
		// proxy's ports on a real server, whatever the client is).
		r.Began(name, histories.Of(v))
		var err error
		r.Outside(func() { err = r.b.Strike(run.Aim{Fault: histories.ForceClose, Client: f.Target}) })
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("force-close of %s: %v", f.Target, err))
		}
		r.Ended(name, histories.Of(v), nil)
		return
	case histories.RestartBroker:
		r.Began(name, nil)
		var err error
		r.Outside(func() {
			err = r.b.Strike(run.Aim{Fault: histories.RestartBroker, Down: restartDowntime, Wait: pr.Sleep})
		})
		r.Ended(name, nil, err)
		return
	}
	if end {
		at = math.MaxInt64 // an end is recorded once it is over
	}
	r.StruckFrom(name, histories.Of(v), at)
}

// from is the reading a fault about to be applied is recorded from
// (run.Runner.StruckFrom): the clock's now on a real server, where it
// strikes at once and a loaded machine may run others before the nemesis
// records it; on the simulator none (math.MaxInt64), where it is applied
// when the scheduler serves it and recorded then.
func (r *runner) from() int64 {
	if _, sim := r.b.(simPlace); sim {
		return math.MaxInt64
	}
	return r.Now()
}

// kill ends the client's current incarnation: the place closes its
// connections (the server ends its session, and its lock), and it is no
// longer paused or partitioned; then struck (if set) records the kill,
// the operation in flight ends unknown, and the client holds nothing.
func (r *runner) kill(st *client, struck func()) {
	r.b.Strike(run.Aim{Fault: histories.Kill, Client: st.Name, Process: st.Process})
	if struck != nil {
		struck()
	}
	if _, ok := r.InFlight(&st.Proc); ok {
		r.Finish(&st.Proc, histories.Info, nil, errors.New("killed"))
	}
	st.token = ""
	r.Unhold(histories.Pause, st.Name)
	r.Unhold(histories.Partition, st.Name)
}

// result is the run's history and evidence.
func (r *runner) result() (*prover.Result, error) { return r.Result(r.p.Key) }

// clientFaults strikes a, a kill, pause or partition of a client or the
// end of its sessions, with a place's own methods, each told the client
// and its incarnation's process (forceClose the client alone).
func clientFaults(a run.Aim, kill, pause, partition func(name, process string), forceClose func(name string) error) error {
	switch a.Fault {
	case histories.ForceClose:
		return forceClose(a.Client)
	case histories.Kill:
		kill(a.Client, a.Process)
	case histories.Pause:
		pause(a.Client, a.Process)
	case histories.Partition:
		partition(a.Client, a.Process)
	default:
		return run.CannotStrike(a)
	}
	return nil
}

// clientEnds ends a, a pause or a partition of a client, with a place's
// own resume and heal.
func clientEnds(a run.Aim, resume, heal func(name, process string)) error {
	switch a.Fault {
	case histories.Pause:
		resume(a.Client, a.Process)
	case histories.Partition:
		heal(a.Client, a.Process)
	default:
		return run.CannotStrike(a)
	}
	return nil
}
