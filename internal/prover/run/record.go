package run

import (
	"fmt"
	"math"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// Start starts p's next incarnation as a process of its own on the
// backend, which spawn (the backend's Go) starts, running body with the
// Runner's lock held. The process is named (Proc.Process) by p's own name
// the first time, then name#2, name#3, ... after kills, so that a killed
// incarnation, which may run on for a while, is never taken for its
// successor; body is told its incarnation's Gen, to check it is still
// Live.
func Start[P any](r *Runner, p *Proc, spawn func(process string, f func(P)), body func(proc P, gen int)) {
	gen := p.next()
	spawn(p.Process, func(proc P) { r.Locked(func() { body(proc, gen) }) })
}

// next moves p on to its next incarnation (Start), and returns its Gen.
func (p *Proc) next() int {
	p.Gen++
	p.Process = p.Name
	if p.Gen > 1 {
		p.Process = fmt.Sprintf("%s#%d", p.Name, p.Gen)
	}
	return p.Gen
}

// ProcessOf is the backend's process of the current incarnation of the
// run's process name (Start): name itself before it started, or where no
// process of the run is so called.
func (r *Runner) ProcessOf(name string) string {
	if p := r.procs[name]; p != nil && p.Process != "" {
		return p.Process
	}
	return name
}

// Current is the process not done whose current incarnation is the
// backend's process proc, nil if there is none: what a backend reports of
// an older incarnation (a reply it lost) is over, ended when it was
// killed.
func (r *Runner) Current(proc string) *Proc {
	for _, p := range r.procs {
		if p.Process == proc && !p.Done {
			return p
		}
	}
	return nil
}

// Finish records the completion of p's operation in flight (Invoke) as
// typ, with v and err's message (none for nil), and returns it as
// recorded.
func (r *Runner) Finish(p *Proc, typ histories.Type, v histories.Value, err error) histories.Event {
	return r.FinishAt(p, typ, v, err, math.MaxInt64)
}

// FinishAt is Finish for a completion that came at at, a reading of the
// run's clock before it is recorded (histories.Recorder.AddAt): a grant
// whose claim of validity counts from its completion is then not
// recorded later than the machine let the runner get to it.
func (r *Runner) FinishAt(p *Proc, typ histories.Type, v histories.Value, err error, at int64) histories.Event {
	e, _ := r.InFlight(p)
	e.Type, e.Value, e.Error = typ, v, ""
	if err != nil {
		e.Error = err.Error()
	}
	return r.completeAt(p, e, at)
}

// Struck records fault name as struck by the nemesis, in place: its
// invocation and its info, with v (the target, an offset; nil for none).
func (r *Runner) Struck(name string, v histories.Value) {
	r.Began(name, v)
	r.Ended(name, v, nil)
}

// StruckFrom is Struck of a fault applied on a real server, from at: a
// reading of the run's clock (Now) taken just before it was applied. Its
// effect may come any time after that reading (a clock jump's script, a
// signal), and a loaded machine may run other processes' operations
// before the nemesis records it: one that met the fault must find it in
// force (the soak of issue 55: a clock jump recorded after the acquire it
// had let in). Its invocation and info go in at at, before the events
// recorded since whose readings came later (histories.Recorder.AddAt).
// An at of math.MaxInt64 is Struck: on a simulator a fault is applied
// when the scheduler serves it, and recorded then.
func (r *Runner) StruckFrom(name string, v histories.Value, at int64) {
	for _, typ := range []histories.Type{histories.Invoke, histories.Info} {
		r.addAt(histories.Event{Process: "nemesis", Type: typ, F: name, Value: v}, at)
	}
}

// Now is a reading of the run's clock, the one the history's times are
// read from.
func (r *Runner) Now() int64 { return r.c.Now() }

// Began records the start of fault name, one in force for a while (a
// server's restart, from its crash until it is up again), as the
// nemesis's invocation, with v: what fails meanwhile is excused by it.
// Ended records its end.
func (r *Runner) Began(name string, v histories.Value) {
	r.Rec.Add(histories.Event{Process: "nemesis", Type: histories.Invoke, F: name, Value: v})
}

// Ended records the end of fault name (Began) as the nemesis's info, with
// v and err's message (none for nil): why it did not end as it should (a
// server that did not come back).
func (r *Runner) Ended(name string, v histories.Value, err error) {
	e := histories.Event{Process: "nemesis", Type: histories.Info, F: name, Value: v}
	if err != nil {
		e.Error = err.Error()
	}
	r.Rec.Add(e)
}

// Register registers p (Add), and notes c, the family's state of it, in
// clients by p's name, where the family's faults find their targets; it
// returns c.
func Register[C any](r *Runner, clients map[string]C, p *Proc, c C) C {
	clients[p.Name] = c
	r.Add(p)
	return c
}

// Abandon is a Nemesis.Abandon for a family whose backend ends a process
// with kill: the current incarnation of the run's process name, killed
// with the Runner's lock held.
func (r *Runner) Abandon(kill func(process string)) func(name string) {
	return func(name string) { r.Locked(func() { kill(r.ProcessOf(name)) }) }
}

// Locked runs f with the Runner's lock (Config.Lock).
func (r *Runner) Locked(f func()) {
	r.c.Lock.Lock()
	defer r.c.Lock.Unlock()
	f()
}

// Outside runs f, a call that may wait (on the backend, a sleep), without
// the Runner's lock, which it is called with.
func (r *Runner) Outside(f func()) {
	r.c.Lock.Unlock()
	defer r.c.Lock.Lock()
	f()
}

// Result is the run's history and evidence (lock, the lock's name, and
// the Problems the family met), or why the plan did not end (Stuck).
func (r *Runner) Result(lock string) (*prover.Result, error) {
	r.c.Lock.Lock()
	defer r.c.Lock.Unlock()
	if err := r.Stuck(); err != nil {
		return nil, err
	}
	return &prover.Result{History: r.Rec.Events(), Evidence: model.Evidence{Lock: lock, Problems: r.Problems}}, nil
}
