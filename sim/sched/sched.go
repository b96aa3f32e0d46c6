// Package sched is the deterministic scheduler under the simulators (the
// AMQP broker of package sim, the MariaDB of package sim/mariadbsim).
//
// A simulated process runs on a coroutine (iter.Pull) and moves only when
// the scheduler hands it control, and hands it back at its next scheduling
// point (a request to the simulated server, a sleep, a fault), so exactly
// one goroutine moves at a time. A hand-off is a direct switch between the
// scheduler's goroutine and the process's (the runtime's coroswitch): no
// channel, no trip through Go's scheduler. A coroutine whose process has
// ended runs the next process to start; those left at the end of Run
// stop, or wait in a Pool for the next Run that shares it. Whenever more than one process could move, a
// Decider picks which; the same answers give the same run, byte for byte.
// Time is virtual: the simulator moves the clock by what its operations
// cost, and when no process can move the scheduler jumps it to the next
// timer. A process can be paused (it is not scheduled) and killed (its
// goroutine is stopped at its scheduling point).
//
// A killed process stops with Proc.Stop, which panics with a value private
// to this package that the process's coroutine recovers at its top: its
// deferred functions run, as they would under runtime.Goexit, and the
// scheduler's goroutine goes on. (runtime.Goexit itself must not be used:
// iter.Pull would carry it over to the goroutine that resumed the process,
// the scheduler's, and end that too.) So the rule for every piece of code
// a process runs (the simulators, database/sql, the references in
// amqplocks and dbsem, the families' runners): no deferred function
// between a scheduling point and the process's top may recover a panic it
// does not re-raise. None does today: none of them calls recover.
//
// The scheduler carries a process's replies (of the simulator's type R)
// but knows nothing of its requests: a simulator keeps them in its own
// process type, which holds a Proc, and says how a posted request is
// served (Config.Serve).
package sched

import (
	"container/heap"
	"fmt"
	"iter"
	"reflect"
	"sync"
	"time"
)

// A Decider makes the scheduling choices: which of the runnable processes
// moves next.
type Decider interface {
	// Pick returns a number in [0, n); n is at least 2.
	Pick(n int) int
}

// Config is what a simulator tells its Scheduler. P is the simulator's
// process type (a pointer to a struct holding a Proc). Every function runs
// in the goroutine that holds control: the scheduler's, except Program.
type Config[P any] struct {
	// Clock is the virtual time in nanoseconds. It belongs to the
	// simulator, which moves it on by what its operations cost; the
	// scheduler moves it to a timer's time when nothing else can happen.
	Clock *int64
	// Decide picks among n >= 2 runnable processes (in the order they
	// were registered); nil always picks the first.
	Decide Decider
	// Program is a process's own code, run in its own coroutine once the
	// scheduler first hands it control.
	Program func(p P)
	// Serve handles the request a process posted (Proc.Yield) when the
	// scheduler picks it: it hands control straight back with the reply
	// (Handoff), or leaves the process waiting (Proc.Block) until something
	// gives it its reply (Proc.Deliver).
	Serve func(p P)
	// Exit, if set, runs when a process ends: in its coroutine after its
	// program returned, panicked (panicked is the recovered value) or was
	// stopped (Kill, Proc.Stop: panicked is nil); or in the scheduler when
	// it was killed before it started.
	Exit func(p P, panicked any)
	// Settle, if set, runs after every step of a process, every timer and
	// every kill at the end of Run: the simulator finishes what the event
	// set off.
	Settle func()
	// Stepped, if set, runs after every step once the timers it made due
	// have fired.
	Stepped func()
	// Stuck, if set, runs for each process that can never move again (it
	// is paused, or waits for nothing that can still happen) before Run
	// kills it.
	Stuck func(p P)
	// KeepInputs makes each process keep what it was handed each time it
	// got control (Input: the clock then, and its reply), for an
	// exhaustive search's fingerprint of the state (internal/statehash):
	// a process's code is a function of its inputs, so two runs that
	// handed a process the same inputs left it at the same place, with
	// the same locals, though neither can be seen on its coroutine.
	KeepInputs bool
	// Pace, if set, is told each time the scheduler moves the clock on
	// to a timer, from the time before to the time after, and may wait
	// there: a simulator whose processes run outside it, on real clocks,
	// keeps its own clock within a factor of theirs (adapters/served). It
	// changes no decision.
	Pace func(from, to int64)
}

// An Input is what a process was handed when it got control
// (Config.KeepInputs): the clock then (every reading of it until it gives
// control back), and its reply (the zero R when it started).
type Input[R any] struct {
	At    int64
	Reply R
}

// A Scheduler runs the processes of one simulated world; R is the type
// of their replies. Its methods must
// be called from the goroutine that holds control: the one that calls Run,
// a process while it runs, or any goroutine when no Run is in progress.
// The zero value is not usable: call Init.
type Scheduler[P, R any] struct {
	c       Config[P]
	procs   []*Proc[P, R] // live processes, in the order registered
	ended   bool          // a process in procs has ended since the last compaction
	ready   []*Proc[P, R]
	running *Proc[P, R]
	idle    []*worker[P, R] // coroutines whose process has ended, for the next to start
	// pool is where idle coroutines go at the end of Run, and come from
	// (Share): shared by every world of a simulator, on every CPU, so no
	// world's state (statehash leaves it out); hashing it read what
	// other searches change meanwhile.
	pool    *Pool[P, R] `statehash:"-"`
	timers  timerHeap
	seq     uint64
	inRun   bool
	picking bool // Decide is picking among ready (Choosing)
	// last is the process that moved last (Keep); statehash leaves it
	// out: where the search bounds preemptions it keys its states on
	// Keep itself, and elsewhere it changes nothing that can follow.
	last *Proc[P, R] `statehash:"-"`
}

// Init readies s to run processes under c.
func (s *Scheduler[P, R]) Init(c Config[P]) {
	s.c = c
	// Room for a handful of processes and for the runnable ones among
	// them, in one allocation: most worlds need no more.
	buf := make([]*Proc[P, R], 16)
	s.procs, s.ready = buf[:0:8], buf[8:8]
}

// Share makes s take the coroutines its processes run on from pool, and
// give them back to it at the end of Run instead of ending them, so that
// the worlds of a search (one after another, or several at once) start
// their processes on coroutines that already exist, their stacks already
// grown, instead of making new ones. Which coroutine runs a process is
// invisible to it: a run is the same, byte for byte, with or without a
// pool.
func (s *Scheduler[P, R]) Share(pool *Pool[P, R]) { s.pool = pool }

// A Pool keeps idle coroutines between the Runs of the Schedulers that
// Share it; it is safe for concurrent use, and its zero value is ready.
// A simulator keeps one for all its worlds (a package variable). An idle
// coroutine is a parked goroutine and its stack: a Pool keeps at most
// maxPooled of them, and a Run ends those it cannot give back.
type Pool[P, R any] struct {
	mu   sync.Mutex
	idle []*worker[P, R]
}

// maxPooled bounds a Pool: more than the processes alive at once in the
// worlds of every CPU's search, and few enough that what a Pool holds (a
// goroutine and a stack of some kilobytes each) stays small.
const maxPooled = 256

// get takes an idle coroutine from the pool, or returns nil.
func (pl *Pool[P, R]) get() *worker[P, R] {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	n := len(pl.idle)
	if n == 0 {
		return nil
	}
	w := pl.idle[n-1]
	pl.idle[n-1] = nil
	pl.idle = pl.idle[:n-1]
	return w
}

// put gives ws back to the pool and returns those it had no room for.
func (pl *Pool[P, R]) put(ws []*worker[P, R]) []*worker[P, R] {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	n := min(len(ws), maxPooled-len(pl.idle))
	for _, w := range ws[:n] {
		w.s = nil
	}
	pl.idle = append(pl.idle, ws[:n]...)
	return ws[n:]
}

type state uint8

const (
	stateNew     state = iota // registered, not started: runnable
	stateRunning              // holds control
	stateRequest              // posted a request: runnable
	stateBlocked              // waiting for the simulator to wake it
	stateReply                // woken, its reply waiting: runnable
	stateDone                 // returned, or killed
)

// A Proc is the scheduler's part of a simulated process, kept in the
// simulator's process type.
type Proc[P, R any] struct {
	self P
	s    *Scheduler[P, R]
	// w is the coroutine that runs the process, from its start: an idle
	// one, or own if there was none (a process's own worker may run
	// other processes once it has ended); yield, in it, gives control
	// back.
	w        *worker[P, R]
	own      worker[P, R]
	yield    func(struct{}) bool
	stopping bool // killed, and given control to unwind
	reply    R    // given when it next gets control
	// wake is DeliverAt's timer, used again from one sleep to the next,
	// and wakeReply what it delivers.
	wake      Timer
	wakeReply R
	state     state
	paused    bool
	killed    bool
	inputs    []Input[R] // with Config.KeepInputs
}

// Go registers the process self, whose Proc is p, to run under s. A Proc
// is used once: a process restarted under the same name is a new one.
func (s *Scheduler[P, R]) Go(p *Proc[P, R], self P) {
	*p = Proc[P, R]{self: self, s: s}
	s.procs = append(s.procs, p)
}

// Running returns the process that holds control, or the zero P when the
// scheduler does (or no Run is in progress).
func (s *Scheduler[P, R]) Running() P {
	if s.running == nil {
		var zero P
		return zero
	}
	return s.running.self
}

// Choosing says, while Decide picks which process moves, the i-th
// process it picks among (ok false while it makes any other choice).
func (s *Scheduler[P, R]) Choosing(i int) (p P, ok bool) {
	if !s.picking || i >= len(s.ready) {
		return p, false
	}
	return s.ready[i].self, true
}

// Keep says, while Decide picks which process moves, the index among
// those it picks from of the process that moved last, which picking
// keeps moving: any other is a preemption, a switch away from a process
// that could go on (an exhaustive search bounds them); -1 if that
// process cannot move, or while Decide makes any other choice.
func (s *Scheduler[P, R]) Keep() int {
	if s.picking {
		for i, p := range s.ready {
			if p == s.last {
				return i
			}
		}
	}
	return -1
}

// Unseen are the types of s's own machinery that a fingerprint of the
// state (internal/statehash) must leave out: the coroutines that run the
// processes (which one runs a process is invisible to it) and the Pool
// they come from, shared with other worlds.
func (s *Scheduler[P, R]) Unseen() []reflect.Type {
	return []reflect.Type{reflect.TypeOf(s.pool), reflect.TypeOf(&worker[P, R]{}), reflect.TypeOf(worker[P, R]{})}
}

// InRun reports whether Run is in progress.
func (s *Scheduler[P, R]) InRun() bool { return s.inRun }

// Run runs every process until none can move and no timer is pending; a
// process that can never move again is then killed.
func (s *Scheduler[P, R]) Run() {
	s.inRun = true
	defer func() { s.inRun = false }()
	for {
		s.ready = s.ready[:0]
		for _, p := range s.procs {
			if p.runnable() {
				s.ready = append(s.ready, p)
			}
		}
		if len(s.ready) == 0 {
			if !s.fireNext() {
				break
			}
			continue
		}
		i := 0
		if len(s.ready) > 1 && s.c.Decide != nil {
			s.picking = true
			i = s.c.Decide.Pick(len(s.ready))
			s.picking = false
			if i < 0 || i >= len(s.ready) {
				panic(fmt.Sprintf("sched: Decide(%d) = %d", len(s.ready), i))
			}
		}
		s.last = s.ready[i]
		s.step(s.last)
		s.settle()
		s.fireDue()
		if s.ended {
			s.compact()
		}
		if s.c.Stepped != nil {
			s.c.Stepped()
		}
	}
	for _, p := range s.procs {
		if p.state != stateDone {
			if s.c.Stuck != nil {
				s.c.Stuck(p.self)
			}
			s.Kill(p, nil)
			s.settle()
		}
	}
	s.compact()
	s.stopIdle()
}

func (s *Scheduler[P, R]) settle() {
	if s.c.Settle != nil {
		s.c.Settle()
	}
}

// compact forgets ended processes, keeping the others' order.
func (s *Scheduler[P, R]) compact() {
	j := 0
	for _, p := range s.procs {
		if p.state != stateDone {
			s.procs[j] = p
			j++
		}
	}
	clear(s.procs[j:])
	s.procs = s.procs[:j]
	s.ended = false
}

// step moves p: starts it, gives it its reply, or serves its request.
func (s *Scheduler[P, R]) step(p *Proc[P, R]) {
	switch p.state {
	case stateNew:
		s.start(p)
	case stateReply:
		s.handoff(p)
	case stateRequest:
		s.c.Serve(p.self)
	}
}

// Handoff gives control to p with its reply and waits until p posts its
// next request or ends.
func (s *Scheduler[P, R]) Handoff(p *Proc[P, R], reply R) {
	p.reply = reply
	s.handoff(p)
}

// Continue gives control to p at once if it has its reply and is neither
// paused nor killed: a reply ready within the step that served the
// request goes over in that step. It reports whether it did.
func (s *Scheduler[P, R]) Continue(p *Proc[P, R]) bool {
	if p.state != stateReply || p.paused || p.killed {
		return false
	}
	s.handoff(p)
	return true
}

func (s *Scheduler[P, R]) handoff(p *Proc[P, R]) {
	if s.c.KeepInputs {
		p.inputs = append(p.inputs, Input[R]{At: *s.c.Clock, Reply: p.reply})
	}
	p.state = stateRunning
	s.running = p
	p.w.next()
	s.running = nil
}

// A worker is a coroutine (iter.Pull) that runs processes one after
// another: a process that ends leaves it for the next one to start, so
// that a Run makes only as many coroutines as it has processes alive at
// once. The workers left idle stop at the end of Run (no goroutine
// outlives it), or, with a Pool, wait there for another Run.
type worker[P, R any] struct {
	s    *Scheduler[P, R]
	next func() (struct{}, bool) // resumes the coroutine until it yields
	stop func()                  // ends an idle worker
	proc *Proc[P, R]             // the process it runs, nil while idle
}

// start runs p, which has not started, on an idle worker, one from the
// pool, or a new one.
func (s *Scheduler[P, R]) start(p *Proc[P, R]) {
	var w *worker[P, R]
	if n := len(s.idle); n > 0 {
		w = s.idle[n-1]
		s.idle[n-1] = nil
		s.idle = s.idle[:n-1]
	} else if s.pool != nil {
		if w = s.pool.get(); w == nil {
			// A worker of its own, not p's: a pooled one outlives p.
			w = new(worker[P, R])
			w.next, w.stop = iter.Pull(w.loop)
		}
		w.s = s
	} else {
		w = &p.own
		w.s = s
		w.next, w.stop = iter.Pull(w.loop)
	}
	w.proc, p.w = p, w
	s.handoff(p)
}

// loop is a worker's coroutine: it runs its process, then waits idle for
// the next (yield reports false when the worker is to stop instead).
func (w *worker[P, R]) loop(yield func(struct{}) bool) {
	for {
		p := w.proc
		p.yield = yield
		p.main()
		w.proc = nil
		w.s.idle = append(w.s.idle, w)
		if !yield(struct{}{}) {
			return
		}
	}
}

// stopIdle gives the idle workers to the pool, if s shares one, and ends
// the coroutines of the others.
func (s *Scheduler[P, R]) stopIdle() {
	rest := s.idle
	if s.pool != nil {
		rest = s.pool.put(s.idle)
	}
	for _, w := range rest {
		w.stop()
	}
	clear(s.idle)
	s.idle = s.idle[:0]
}

// Kill marks p killed, runs last (if not nil: the simulator's side of
// the crash, which sees p killed), and stops p's coroutine where it
// waits, or ends p if it never started. A killed process gets control
// once more to unwind (Yield reports it killed, and so does every Yield
// after, without giving control away), and holds it until it ends. Kill,
// like Handoff and Continue, is for the scheduler's goroutine (in Serve,
// a timer, Settle) or for when no Run is in progress: a process that
// kills another posts a request for it.
func (s *Scheduler[P, R]) Kill(p *Proc[P, R], last func()) {
	p.killed = true
	if last != nil {
		last()
	}
	switch p.state {
	case stateDone:
	case stateNew:
		if s.c.Exit != nil {
			s.c.Exit(p.self, nil)
		}
		s.done(p)
	default:
		prev := s.running
		s.running = p
		p.state = stateRunning
		p.stopping = true
		p.w.next()
		s.running = prev
	}
}

func (s *Scheduler[P, R]) done(p *Proc[P, R]) {
	p.state = stateDone
	s.ended = true
}

// main is the process in its worker: its program, then Exit. It recovers
// every panic, so that none reaches the goroutine that resumed it: the
// program's own (given to Exit) and Stop's (an ordinary end).
func (p *Proc[P, R]) main() {
	s := p.s
	defer func() {
		r := recover()
		if _, ok := r.(stopped); ok {
			r = nil
		}
		if s.c.Exit != nil {
			s.c.Exit(p.self, r)
		}
		s.done(p)
	}()
	s.c.Program(p.self)
}

// stopped is the panic of Stop.
type stopped struct{}

// Stop ends the process's program where it is, running its deferred
// functions on the way out, as runtime.Goexit would in a goroutine of its
// own: it is how a killed process stops (or one that has nothing more to
// do). Only the process itself calls it, while it holds control. It
// panics with a value the process's coroutine recovers at its top, so
// nothing the process runs may recover a panic without re-raising it
// (see the package's doc).
func (p *Proc[P, R]) Stop() {
	panic(stopped{})
}

// Yield posts the process's request (which the simulator keeps), gives
// control back to the scheduler and returns the reply once the scheduler
// hands control back. It reports whether the process was killed
// meanwhile, in which case there is no reply and it must stop (or fail
// every call). Only the process itself calls it, while it holds control.
func (p *Proc[P, R]) Yield() (reply R, killed bool) {
	if p.stopping {
		return reply, true
	}
	p.state = stateRequest
	p.yield(struct{}{}) // false only for an idle worker, never a process's
	if p.stopping {
		return reply, true
	}
	reply, p.reply = p.reply, reply
	return reply, false
}

// Block leaves the process waiting once its request is served: it is not
// runnable until Deliver.
func (p *Proc[P, R]) Block() { p.state = stateBlocked }

// Deliver makes reply the process's reply, which it gets when next
// scheduled (it is runnable again). An ended process gets nothing.
func (p *Proc[P, R]) Deliver(reply R) {
	if p.state == stateDone {
		return
	}
	p.reply = reply
	p.state = stateReply
}

// runnable reports whether the scheduler may pick the process: it has not
// started, has posted a request, or has its reply, and is not paused.
func (p *Proc[P, R]) runnable() bool {
	switch p.state {
	case stateNew, stateRequest, stateReply:
		return !p.paused
	}
	return false
}

// Ended reports whether the process's program has returned, or it was
// killed and has stopped.
func (p *Proc[P, R]) Ended() bool { return p.state == stateDone }

// Killed reports whether Kill has been called on the process.
func (p *Proc[P, R]) Killed() bool { return p.killed }

// Paused reports whether the process is paused.
func (p *Proc[P, R]) Paused() bool { return p.paused }

// Pause stops scheduling the process (SIGSTOP); Resume schedules it again
// (SIGCONT). What it was waiting for can still happen meanwhile.
func (p *Proc[P, R]) Pause()  { p.paused = true }
func (p *Proc[P, R]) Resume() { p.paused = false }

// A Timer is a function scheduled at a virtual time.
type Timer struct {
	at        int64
	seq       uint64 // orders timers due at the same time: first set, first run
	fn        func()
	cancelled bool
	queued    bool // in the heap (fired or not)
}

// Cancel keeps the timer from running, if it has not yet; it does nothing
// on a nil Timer.
func (t *Timer) Cancel() {
	if t != nil {
		t.cancelled = true
	}
}

// At runs fn in the scheduler at virtual time t, or at the first
// scheduling point after it.
func (s *Scheduler[P, R]) At(t int64, fn func()) *Timer {
	s.seq++
	tm := &Timer{at: t, seq: s.seq, fn: fn}
	heap.Push(&s.timers, tm)
	return tm
}

// DeliverAt gives p reply (Deliver) at virtual time t: a sleep. It is At
// with a function that delivers, in the same order among the timers, but
// it allocates nothing once p has slept before: p's timer serves again
// once it has left the heap, and it cannot be cancelled.
func (s *Scheduler[P, R]) DeliverAt(t int64, p *Proc[P, R], reply R) {
	if p.wake.queued {
		s.At(t, func() { p.Deliver(reply) })
		return
	}
	if p.wake.fn == nil {
		p.wake.fn = func() {
			reply := p.wakeReply
			var none R
			p.wakeReply = none
			p.Deliver(reply)
		}
	}
	s.seq++
	p.wake.at, p.wake.seq, p.wake.cancelled = t, s.seq, false
	p.wakeReply = reply
	heap.Push(&s.timers, &p.wake)
}

// After runs fn in the scheduler once d of virtual time has passed.
func (s *Scheduler[P, R]) After(d time.Duration, fn func()) *Timer {
	return s.At(*s.c.Clock+int64(d), fn)
}

// Advance moves the clock on by d outside Run, firing the timers that fall
// due on the way, each at its own time.
func (s *Scheduler[P, R]) Advance(d time.Duration) {
	end := *s.c.Clock + int64(d)
	for s.timers.Len() > 0 {
		if tm := s.timers[0]; tm.cancelled || tm.at <= end {
			s.fireNext()
			continue
		}
		break
	}
	*s.c.Clock = end
}

// fireNext moves the clock to the earliest pending timer and fires every
// timer due then. It reports false when no timer is pending.
func (s *Scheduler[P, R]) fireNext() bool {
	for s.timers.Len() > 0 && s.timers[0].cancelled {
		heap.Pop(&s.timers)
	}
	if s.timers.Len() == 0 {
		return false
	}
	if t := s.timers[0].at; t > *s.c.Clock {
		if s.c.Pace != nil {
			s.c.Pace(*s.c.Clock, t)
		}
		*s.c.Clock = t
	}
	s.fireDue()
	return true
}

// fireDue fires every timer due at or before now, in time order.
func (s *Scheduler[P, R]) fireDue() {
	for s.timers.Len() > 0 && s.timers[0].at <= *s.c.Clock {
		tm := heap.Pop(&s.timers).(*Timer)
		if !tm.cancelled {
			tm.cancelled = true
			tm.fn()
			s.settle()
		}
	}
}

type timerHeap []*Timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any) {
	t := x.(*Timer)
	t.queued = true
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.queued = false
	return t
}
