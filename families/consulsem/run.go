package consulsemfamily

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockprover/lockprover/consulsem"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
	"github.com/lockprover/lockprover/prover/run"
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
	r := &runner{p: p, clients: map[string]*client{}, armed: map[string]bool{}}
	kind := consulsim.Consul
	if p.Backend == Etcd {
		kind = consulsim.Etcd
	}
	w, err := consulsim.New(consulsim.Options{Kind: kind, Persistent: p.Persistent, Decide: p.Decider(scheduleSalt),
		Timeout: time.Duration(p.TTLMs) * time.Millisecond, Trace: trace, OnDrop: r.dropped})
	if err != nil {
		return nil, err
	}
	r.w = w
	r.Init(run.Config{Lock: noLock{}, Now: w.Now, Poll: run.Poll{First: 10 * time.Millisecond, Max: 10 * time.Millisecond},
		Ends: []string{histories.Partition, histories.Pause}})
	for i, script := range p.Clients {
		st := r.add(clientName(i), script, p.limitOf(i))
		r.start(st)
	}
	r.nemesis()
	if err := w.Run(); err != nil {
		return nil, err
	}
	if err := r.Stuck(); err != nil {
		return nil, err
	}
	return &prover.Result{History: r.Rec.Events(), Evidence: model.Evidence{Lock: p.Prefix, Problems: r.problems}}, nil
}

// noLock is the simulator's lock: it runs one process at a time.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// A client is a process's place in its script and the lease it believes
// it holds; the place survives a kill (the restarted process goes on with
// its script, holding nothing).
type client struct {
	run.Proc
	script    []Step
	pos       int
	limit     int
	token     string // the lease it holds, "" for none
	proc      string // the current incarnation's process in the simulator
	acquiring bool   // an acquire is in flight (a drop-reply strikes its grant)
	// others are limits to try again with when the lock key disagrees
	// with limit (the probe's: the plan's clients may disagree).
	others []int
}

// runner runs one plan on the simulator, on the skeleton every family's
// runner shares (run.Runner).
type runner struct {
	run.Runner
	p        *Plan
	w        *consulsim.World
	clients  map[string]*client
	armed    map[string]bool // clients whose next granting write loses its reply
	problems []string
}

// add registers client name with its script and limit.
func (r *runner) add(name string, script []Step, limit int) *client {
	st := &client{Proc: run.Proc{Name: name}, script: script, limit: limit}
	r.clients[name] = st
	r.Add(&st.Proc)
	return st
}

// start starts an incarnation of a client: a process of its own in the
// simulator (c1, then c1#2 after a kill, ...).
func (r *runner) start(st *client) {
	st.Gen++
	gen := st.Gen
	st.proc = st.Name
	if gen > 1 {
		st.proc = fmt.Sprintf("%s#%d", st.Name, gen)
	}
	r.w.Go(st.proc, func(p *consulsim.Process) { r.run(p, st, gen) })
}

// run is one incarnation of a client: the reference (or the plan's
// mutant) through the rest of its script.
func (r *runner) run(p *consulsim.Process, st *client, gen int) {
	o := consulsem.Options{StaleReads: r.p.StaleReads, BehaviorRelease: r.p.BehaviorRelease}
	if m := MutantNamed(r.p.Mutant); m != nil {
		m.defects(&o.Defects)
	}
	sem, err := consulsem.On(dropping{p.Backend(), r, st, gen}, o)
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s: %v", st.Name, err))
		st.Done = true
		return
	}
	for st.pos < len(st.script) && st.Live(gen) {
		s := st.script[st.pos]
		st.pos++
		r.step(p, sem, st, gen, s)
	}
	if st.Live(gen) {
		st.Done = true
	}
}

// dropping is a client's backend: a drop-reply armed for the client
// strikes its next granting write.
type dropping struct {
	consulsem.Backend
	r   *runner
	st  *client
	gen int
}

func (d dropping) WriteLock(ctx context.Context, w consulsem.LockWrite) (uint64, error) {
	if d.st.acquiring && d.st.Live(d.gen) && d.r.armed[d.st.Name] {
		delete(d.r.armed, d.st.Name)
		d.r.w.DropReply(d.st.proc)
	}
	return d.Backend.WriteLock(ctx, w)
}

// step runs one line of a client's script.
func (r *runner) step(p *consulsim.Process, sem *consulsem.Semaphore, st *client, gen int, s Step) {
	ctx, prefix := context.Background(), r.p.Prefix
	ttl := time.Duration(r.p.TTLMs) * time.Millisecond
	e := histories.Event{Process: st.Name, Type: histories.Invoke, F: s.Op, Lock: prefix, Kind: histories.Lease}
	switch {
	case s.Op == Sleep:
		p.Sleep(time.Duration(s.Ms) * time.Millisecond)
	case s.Op == histories.Acquire && st.token == "":
		e.Value = &histories.Value{Max: histories.Int(st.limit), TTLMs: histories.Int(r.p.TTLMs)}
		r.Invoke(&st.Proc, e)
		st.acquiring = true
		l, err := sem.Acquire(ctx, prefix, st.limit, ttl)
		st.acquiring = false
		if st.Live(gen) {
			r.acquired(st, l, err)
			if errors.Is(err, consulsem.ErrMismatch) && len(st.others) > 0 {
				st.limit, st.others = st.others[0], st.others[1:]
				st.pos-- // again, with the next limit
			}
		}
	case s.Op == histories.Refresh && st.token != "":
		e.Value = &histories.Value{Token: st.token, TTLMs: histories.Int(r.p.TTLMs)}
		r.Invoke(&st.Proc, e)
		err := sem.Refresh(ctx, prefix, st.token)
		if st.Live(gen) {
			r.changed(st, err)
		}
	case s.Op == histories.Verify && st.token != "":
		e.Value = &histories.Value{Token: st.token}
		r.Invoke(&st.Proc, e)
		held, err := sem.Verify(ctx, prefix, st.token)
		if st.Live(gen) {
			r.verified(st, held, err)
		}
	case s.Op == histories.Release && st.token != "":
		e.Value = &histories.Value{Token: st.token}
		r.Invoke(&st.Proc, e)
		err := sem.Release(ctx, prefix, st.token)
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
		r.complete(st, histories.Ok, &histories.Value{Token: l.Token, Fence: histories.Int(int(l.Fence)),
			TTLMs: histories.Int(int(l.TTL.Milliseconds()))}, nil)
	case errors.Is(err, consulsem.ErrFull):
		r.complete(st, histories.Fail, &histories.Value{Reason: histories.Full}, nil)
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
		r.complete(st, histories.Fail, &histories.Value{Reason: histories.Expired}, nil)
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
	r.complete(st, histories.Ok, &histories.Value{Held: &held}, nil)
}

// complete records the completion of the client's operation in flight.
func (r *runner) complete(st *client, typ histories.Type, v *histories.Value, err error) {
	e, _ := r.InFlight(&st.Proc)
	e.Type, e.Value, e.Error = typ, v, ""
	if err != nil {
		e.Error = err.Error()
	}
	r.Complete(&st.Proc, e)
}
