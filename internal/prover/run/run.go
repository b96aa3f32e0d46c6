// Package run is the skeleton every family's runner stands on, so that a
// family brings only its operations and how a fault strikes on its
// backend: the plan's processes and their incarnations (a killed process
// goes on with its script as a new one), the nemesis that strikes the
// plan's timed faults at their times, the faults that hold a process until
// they end (pauses, partitions), awaiting, and the quiescent end: the
// faults ended once the other processes are done, the backend settled
// (heartbeats noticed, leases expired), a probe.
//
// It knows no family and no backend: a family's runner embeds a Runner,
// registers its processes (Proc) and runs its nemesis's process through
// Nemesis, with the family's strikes, settling and probe. Its places,
// simulated and real, keep one contract, Target (the history's clock, a
// fault struck and ended), and every fault they strike is a row of one
// table, Faults (docs/faults.md). On a simulator everything it does
// happens at the same virtual times and in the same order on every run,
// so a plan's history stays the same, byte for byte.
package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/statehash"
)

// Decisions are a plan's scheduling decisions for the simulator it runs on
// (run by the one scheduler under every simulator, sim/sched): at each
// point where several processes can move, the next number of Schedule
// (modulo how many can) picks one; once it runs out, ScheduleSeed drives
// the choices. A family's plan embeds them.
type Decisions struct {
	Schedule     []int  `json:"schedule"`
	ScheduleSeed uint64 `json:"schedule_seed"`
	// Wire, on a simulator served on the wire to processes of their own
	// (adapters/served), is each process's steps in the order the
	// simulator took them (a frame, an idle turn, the process's answer):
	// what a replay takes them in. A run that records fills it.
	Wire map[string][]string `json:"wire,omitempty"`
	// Chooser, if set, answers every choice instead (the exhaustive
	// search, prover.Exhaust); it is no part of the plan's data.
	Chooser prover.Chooser `json:"-"`
}

// Choosing is d for a run of an exhaustive search (prover.Exhaustive's
// Scheduled): its choices from ch, or, ch nil, from schedule alone (a
// replayable plan: no seed), with the steps d's run logged on a simulator
// served on the wire (Wire), which its replay takes in that order.
func (d Decisions) Choosing(schedule []int, ch prover.Chooser) Decisions {
	if ch != nil {
		return Decisions{Chooser: ch} // a run of the search: it logs its own steps
	}
	return Decisions{Schedule: slices.Clone(schedule), Wire: d.Wire} // the steps the run logged, to take again
}

// Decider returns the decisions as a simulator's Decide (pick one of n):
// the numbers of Schedule modulo n, then a PCG seeded with ScheduleSeed
// and salt, which a family keeps fixed so that its plans keep their
// histories; or, with a Chooser (an exhaustive search), its choices, told
// by keep (the simulator's Keep, read at each choice) which choice keeps
// the process that moved last moving, and the state each choice is made
// in, which the search prunes at when it has explored from it before.
// That state is what state names, once the world and the family's runner
// exist and before the world runs: state(unseen, of...) fingerprints of
// (the world, whose processes keep their inputs: Searched, and the
// runner, its history among it), leaving out the types unseen (the
// world's machinery: its Unseen) and the search's own Chooser. Without a
// search, state does nothing.
func (d Decisions) Decider(salt uint64, keep func() int) (decide func(n int) int, state func(unseen []reflect.Type, of ...any)) {
	if ch := d.Chooser; ch != nil {
		var fp func() statehash.Sum
		sum := func() statehash.Sum {
			if fp == nil {
				panic("run: a choice before the family named its state (Decider's state)")
			}
			return fp()
		}
		decide = func(n int) int {
			pick := ch.Choose(n, keep(), sum)
			ch.Made(pick)
			return pick
		}
		state = func(unseen []reflect.Type, of ...any) {
			h := statehash.New(append(slices.Clone(unseen), reflect.TypeOf(ch))...)
			fp = func() statehash.Sum { return h.Sum(of...) }
		}
		return decide, state
	}
	rng := rand.New(rand.NewPCG(d.ScheduleSeed, salt))
	next := 0
	decide = func(n int) int {
		if next < len(d.Schedule) {
			next++
			return d.Schedule[next-1] % n
		}
		return rng.IntN(n)
	}
	return decide, func([]reflect.Type, ...any) {}
}

// Searched says whether an exhaustive search makes the decisions (a
// Chooser): a family then has its simulator keep what its processes were
// handed (KeepInputs), for the state Decider fingerprints.
func (d Decisions) Searched() bool { return d.Chooser != nil }

// Seed is the seed of the random bits (tokens) of incarnation gen of
// process name in a plan of schedule seed seed: the same on every run, and
// different for every incarnation.
func Seed(seed uint64, name string, gen int) [32]byte {
	var s [32]byte
	b := make([]byte, 0, 64)
	hex := strconv.AppendUint(make([]byte, 0, 16), seed, 16)
	for range 16 - len(hex) {
		b = append(b, '0')
	}
	b = append(append(append(b, hex...), name...), '#')
	copy(s[:], strconv.AppendInt(b, int64(gen), 10)) // fmt's "%016x%s#%d", without its allocations
	return s
}

// Config is what a family's runner tells its Runner.
type Config struct {
	// Lock guards the Runner's state, and is the family's own: a
	// simulator, which moves one process at a time, may give one that does
	// nothing; a real backend, whose processes, timers and hooks run at
	// once, a mutex. Every method but Nemesis and Await is called with it
	// held; those two take it around what they read, and call the
	// family's functions without it.
	Lock sync.Locker
	// Now is the run's clock, in nanoseconds: the history's timestamps and
	// the nemesis's times.
	Now func() int64
	// Poll is how Await backs off.
	Poll Poll
	// Ends is the order in which a process's holds end at the quiescent
	// end (Holds): each family's histories have always shown its own.
	Ends []string
}

// Poll is how often Await looks: First, then twice as long each time, up
// to Max. On a simulator each look is a move of the awaiting process, so a
// family keeps its Poll to keep its histories.
type Poll struct{ First, Max time.Duration }

// A Runner is the state every family's run shares: its history, its
// processes, the holds in force, whether it is ending, and why it is
// stuck. Its zero value is not ready: Init it.
type Runner struct {
	// Rec records the history, on Config.Now.
	Rec *histories.Recorder
	// Problems are what went wrong that is no property's to judge (an
	// implementation that could not start, a process that crashed): the
	// Result's evidence.
	Problems []string

	c      Config
	procs  map[string]*Proc
	flying map[*Proc]bool // the processes with an operation in flight
	holds  map[Hold]bool
	ending bool
	stuck  error
}

// Init makes r ready for one run.
func (r *Runner) Init(c Config) {
	*r = Runner{Rec: histories.NewRecorder(c.Now), c: c, procs: map[string]*Proc{}, flying: map[*Proc]bool{}}
}

// A Proc is one process of a plan (a client, an admin, a probe): what
// outlives its incarnations. A family's state of a process embeds it.
type Proc struct {
	Name string
	// Gen is the current incarnation's number. The family moves it on
	// when an incarnation ends early (a kill) or a new one starts, so that
	// the old one's code, which may run on for a while, sees it is no
	// longer Live: it must neither record nor move the script.
	Gen int
	// Done: the process has ended its script (or was abandoned).
	Done bool
	// Process is the current incarnation's process on the backend (Start).
	Process string
	// inFlight is 1 + the index of the invoke of its operation in flight
	// (0: none): Invoke, InFlight, Complete.
	inFlight int
}

// Live says whether incarnation gen is p's current one.
func (p *Proc) Live(gen int) bool { return p.Gen == gen }

// Invoke records e, the invocation of an operation of p's, as p's
// operation in flight, and returns it as recorded.
func (r *Runner) Invoke(p *Proc, e histories.Event) histories.Event {
	e = r.Rec.Add(e)
	p.inFlight = e.Index + 1
	r.flying[p] = true
	return e
}

// InFlight is the invocation of p's operation in flight, if it has one: a
// kill ends it with an unknown outcome.
func (r *Runner) InFlight(p *Proc) (histories.Event, bool) {
	if p.inFlight == 0 {
		return histories.Event{}, false
	}
	return r.Rec.Event(p.inFlight - 1), true
}

// Complete records done, the completion of p's operation in flight, and
// returns it as recorded.
func (r *Runner) Complete(p *Proc, done histories.Event) histories.Event {
	return r.completeAt(p, done, math.MaxInt64)
}

// completeAt is Complete at at (histories.Recorder.AddAt): a completion
// that goes in before events recorded since moves them one index up,
// the invokes of other processes' operations in flight among them.
func (r *Runner) completeAt(p *Proc, done histories.Event, at int64) histories.Event {
	p.inFlight = 0
	delete(r.flying, p)
	return r.addAt(done, at)
}

// addAt records e at at (histories.Recorder.AddAt): an event that goes in
// before events recorded since moves them one index up, the invokes of
// processes' operations in flight among them.
func (r *Runner) addAt(e histories.Event, at int64) histories.Event {
	e = r.Rec.AddAt(e, at)
	for q := range r.flying {
		if q.inFlight > e.Index {
			q.inFlight++
		}
	}
	return e
}

// Add registers p, so that the quiescent end waits for it.
func (r *Runner) Add(p *Proc) { r.procs[p.Name] = p }

// allDone says whether every process has ended its script, but those a
// fault holds (holding) with exceptHeld.
func (r *Runner) allDone(exceptHeld bool) bool {
	for name, p := range r.procs {
		if !p.Done && !(exceptHeld && r.holding(name)) {
			return false
		}
	}
	return true
}

// running is the names of the processes not done, sorted.
func (r *Runner) running() []string {
	var names []string
	for name, p := range r.procs {
		if !p.Done {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// A Hold is a fault that holds its target until it ends (a pause until its
// resume, a partition until its heal) or the run ends.
type Hold struct{ Fault, Target string }

// Hold notes that fault holds target.
func (r *Runner) Hold(fault, target string) {
	if r.holds == nil {
		r.holds = map[Hold]bool{}
	}
	r.holds[Hold{fault, target}] = true
}

// Unhold notes that fault holds target no more.
func (r *Runner) Unhold(fault, target string) { delete(r.holds, Hold{fault, target}) }

// Held says whether fault holds target.
func (r *Runner) Held(fault, target string) bool { return r.holds[Hold{fault, target}] }

// holding says whether any fault holds target.
func (r *Runner) holding(target string) bool {
	for h := range r.holds {
		if h.Target == target {
			return true
		}
	}
	return false
}

// Holds is the holds in force, by target, then in Config.Ends's order:
// those the quiescent end ends.
func (r *Runner) Holds() []Hold {
	if len(r.holds) == 0 {
		return nil
	}
	hs := make([]Hold, 0, len(r.holds))
	for h := range r.holds {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b Hold) int {
		if a.Target != b.Target {
			return strings.Compare(a.Target, b.Target)
		}
		return slices.Index(r.c.Ends, a.Fault) - slices.Index(r.c.Ends, b.Fault)
	})
	return hs
}

// Ending says whether the run is ending: the quiescent end has begun, and
// no fault strikes any more (a family's hooks that strike by counts ask).
func (r *Runner) Ending() bool { return r.ending }

// Stuck is why the run did not end (nil: it did): a process that did not
// finish, or an interrupt.
func (r *Runner) Stuck() error { return r.stuck }

// errLate is Await's answer when its limit passed.
var errLate = errors.New("run: out of time")

// Await waits until cond (called with the lock held) holds, looking as
// Config.Poll says and letting time pass with sleep: nil, or an error once
// more than limit has passed or when sleep fails (the run was
// interrupted).
func (r *Runner) Await(sleep func(time.Duration) error, limit time.Duration, cond func() bool) error {
	start := r.c.Now()
	for d := r.c.Poll.First; ; d = min(2*d, r.c.Poll.Max) {
		r.c.Lock.Lock()
		ok := cond()
		r.c.Lock.Unlock()
		if ok {
			return nil
		}
		if time.Duration(r.c.Now()-start) > limit {
			return errLate
		}
		if err := sleep(d); err != nil {
			return err
		}
	}
}

// Stop, from Retry's try, stops the tries with nothing to say: the
// incarnation was killed, or the run interrupted.
var Stop = errors.New("run: stop trying")

// Retry is how a process starts its work (connects, opens the lock) as a
// client would: it calls try up to tries times, backoff apart (letting
// time pass with sleep), until try succeeds, returns Stop, or fails with
// an implementation error (a *prover.ImplementationError: an
// implementation that cannot start is not tried again). It returns try's
// last error: nil once it succeeded, and nil too when it stopped or sleep
// failed (the process was killed meanwhile).
func Retry(tries int, backoff time.Duration, sleep func(time.Duration) error, try func() error) error {
	var err error
	for range tries {
		switch err = try(); {
		case err == Stop:
			return nil
		case err == nil || isImplementationError(err):
			return err
		}
		if sleep(backoff) != nil {
			return nil
		}
	}
	return err
}

// isImplementationError is errors.As(err, &ie) for a
// *prover.ImplementationError ie, in a function of its own so that ie
// escapes to the heap only when there is an error to look into.
func isImplementationError(err error) bool {
	var ie *prover.ImplementationError
	return errors.As(err, &ie)
}

// A Timed is a fault of the plan's nemesis struck at a time: Fault, the
// index of the fault in the plan, At milliseconds into the run, or, with
// End, its end.
type Timed struct {
	At, Fault int
	End       bool
}

// Timeline is the plan's timed faults in the order they strike, by time
// (and, at one time, in the plan's order, each end after its fault): when
// says of the i-th of n faults when it strikes and how long it lasts (0:
// until the run's end, or it does not end), or that it is not timed (it
// strikes by counts, from a hook).
func Timeline(n int, when func(i int) (at, lasts int, timed bool)) []Timed {
	var evs []Timed
	for i := range n {
		at, lasts, timed := when(i)
		if !timed {
			continue
		}
		evs = append(evs, Timed{At: at, Fault: i})
		if lasts > 0 {
			evs = append(evs, Timed{At: at + lasts, Fault: i, End: true})
		}
	}
	slices.SortStableFunc(evs, func(a, b Timed) int { return a.At - b.At })
	return evs
}

// Sleeper is a Nemesis.Sleep for a nemesis's process that lets time pass
// with sleep (its backend's): an error once ctx is done, the run
// interrupted.
func Sleeper(ctx context.Context, sleep func(time.Duration)) func(time.Duration) error {
	return func(d time.Duration) error {
		sleep(d)
		return ctx.Err()
	}
}

// Nemesis is a family's side of the nemesis's process: how it lets time
// pass, strikes, and brings its backend to a quiescent end. The Runner
// calls each without the lock.
type Nemesis struct {
	// Sleep lets d pass for the nemesis; an error is an interrupt.
	Sleep func(d time.Duration) error
	// Strike strikes a timed fault, or ends it.
	Strike func(Timed)
	// EndFaults ends the faults meant to last until the end: the Holds,
	// and any of the family's own (clock offsets).
	EndFaults func()
	// Settle waits, once every process is done, until the backend is
	// quiescent: dead connections noticed, leases expired.
	Settle func()
	// Probe starts the quiescent probe's processes.
	Probe func()
	// Abandon, if set, ends process name, which did not finish in time.
	Abandon func(name string)
	// Patience is how long the nemesis waits for the processes, first
	// with the faults meant to last until the end in force (then it ends
	// them anyway), then with every fault ended (then the run is stuck).
	Patience time.Duration
	// ProbeTime, if not 0, is how long the nemesis waits for the probe.
	ProbeTime time.Duration
}

// Nemesis is the body of the nemesis's process: it strikes timeline's
// faults at their times (from when it is called), then brings the run to
// its quiescent end. Faults meant to last until the end last until every
// other process is done (or n.Patience has passed); then they end, so
// that the processes they held can finish too; once every process is done
// the backend settles and the probe starts.
func (r *Runner) Nemesis(timeline []Timed, n Nemesis) {
	start := r.c.Now()
	for _, t := range timeline {
		if d := time.Duration(t.At)*time.Millisecond - time.Duration(r.c.Now()-start); d > 0 {
			n.Sleep(d)
		}
		n.Strike(t)
	}
	if err := r.Await(n.Sleep, n.Patience, func() bool { return r.allDone(true) }); err != nil && err != errLate {
		r.abandon(n, err)
		return
	}
	r.c.Lock.Lock()
	r.ending = true
	r.c.Lock.Unlock()
	n.EndFaults()
	if err := r.Await(n.Sleep, n.Patience, func() bool { return r.allDone(false) }); err != nil {
		r.abandon(n, err)
		return
	}
	n.Settle()
	n.Probe()
	if n.ProbeTime > 0 {
		r.Await(n.Sleep, n.ProbeTime, func() bool { return r.allDone(false) })
	}
}

// abandon gives the run up: it is stuck (err, or the processes that did
// not finish, when err is errLate), and they are ended.
func (r *Runner) abandon(n Nemesis, err error) {
	r.c.Lock.Lock()
	names := r.running()
	if err == errLate {
		err = fmt.Errorf("the plan did not finish within %v of its faults ending: %s still running", n.Patience, strings.Join(names, ", "))
	}
	r.stuck = err
	r.c.Lock.Unlock()
	for _, name := range names {
		if n.Abandon != nil {
			n.Abandon(name)
		}
	}
	r.c.Lock.Lock()
	for _, name := range names {
		r.procs[name].Done = true
	}
	r.c.Lock.Unlock()
}
