// Package simworld is what the lease families' simulated worlds (packages
// sim/consulsim, sim/redissim, sim/mariadbsim and sim/postgressim) have in common, written
// once: their processes on a sched.Scheduler, registered by name; a
// process's calls into the simulator (a yield to the scheduler, and the
// stop of a killed process); sleeps in virtual time; faults applied as a
// step of the process that calls them, and those every simulator has on
// a client (kill, pause, resume), and, in a world of one server, a
// partition between a client and it (a Link); the trace; and the first
// failure of a run. What a process asks of the simulated server, and how the server
// answers, stays each simulator's own: a Base serves a process's sleeps
// and faults, and hands every other request to Config.Serve.
//
// A Base adds no scheduling of its own: the simulator's Scheduler and
// clock decide everything, so a simulator on a Base runs exactly as one
// that called its Scheduler itself.
package simworld

import (
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
)

// Config is what a simulator tells its Base. P is the simulator's
// process type (a pointer to a struct holding a Proc), R its reply type.
type Config[P comparable, R any] struct {
	// Name is the simulator's package name, which starts its panics and
	// errors ("consulsim").
	Name string
	// Clock is the simulator's virtual time in nanoseconds, as given to
	// its Scheduler.
	Clock *int64
	// Trace, if set, receives the trace: one line per event, the virtual
	// time in nanoseconds, then what happened.
	Trace io.Writer
	// Decide picks one of n (at least 2) candidates: which runnable
	// process moves next, and the simulator's own choices (Base.Pick);
	// nil always picks the first.
	Decide func(n int) int
	// Proc returns the Proc that p holds.
	Proc func(p P) *Proc[P, R]
	// Serve serves a request of the simulator's own that p posted (Call,
	// or a Yield of p's Proc): neither a sleep nor a fault.
	Serve func(p P)
	// Exit, if set, runs when a process that is not quiet (Spawn) ends,
	// before the Base records its panic and traces its end: the
	// simulator's side of it (its connections close, say).
	Exit func(p P)
	// Settle and Stepped are the Scheduler's (sched.Config). Settle also
	// runs after a fault, in the step of the process that called it or
	// at once.
	Settle, Stepped func()
	// A Sleep of nothing is a scheduling point: another process may move
	// before it is served. ZeroSleepContinues then hands the process
	// straight back in the step that serves it, as any request answered
	// at once (consulsim's way); without it the process is runnable
	// again, and competes for the next step once more (redissim's and
	// mariadbsim's).
	ZeroSleepContinues bool
	// KeepInputs is the Scheduler's (sched.Config): each process keeps
	// what it was handed, for a fingerprint of the state.
	KeepInputs bool
	// Pace, if set, is the Scheduler's (sched.Config): told each time the
	// clock moves on to a timer, it may wait there in real time.
	Pace func(from, to int64)
}

// A Base is the part of a simulated world its processes share; see the
// package doc. Its methods must be called from the goroutine that holds
// control (the Scheduler's): the one that calls Run, a process while it
// runs, a timer, or any when no Run is in progress. The zero value is not
// usable: call Init.
type Base[P comparable, R any] struct {
	c       Config[P, R]
	s       *sched.Scheduler[P, R]
	byName  map[string]P
	failure error
}

// reqKind is the kind of request a Proc posted: the simulator's own (the
// zero value, so that a Yield of the bare sched.Proc posts one), or one
// the Base serves.
type reqKind uint8

const (
	reqOwn reqKind = iota
	reqSleep
	reqFault
)

// A Proc is a Base's part of a simulated process, kept in the
// simulator's process type: its sched.Proc, its name and program, and
// the sleep or fault it posted.
type Proc[P, R any] struct {
	sched.Proc[P, R]
	name    string
	fn      func(P)
	quiet   bool // not traced, and its panic not recorded (Spawn)
	exiting bool // killed and stopping (sched.Proc.Stop)
	kind    reqKind
	sleep   time.Duration
	fault   func()
	link    Link
}

// Name returns the name the process was registered with.
func (p *Proc[P, R]) Name() string { return p.name }

// Link is the process's network path to the server, in a world of one
// server (Base.Partition, Base.Heal).
func (p *Proc[P, R]) Link() *Link { return &p.link }

// Exiting reports whether the process was killed and is stopping: its
// deferred functions are running.
func (p *Proc[P, R]) Exiting() bool { return p.exiting }

// Init readies b to run the processes of a simulator on s, and s to run
// them under b.
func (b *Base[P, R]) Init(s *sched.Scheduler[P, R], c Config[P, R]) {
	b.c, b.s, b.byName = c, s, map[string]P{}
	sc := sched.Config[P]{
		Clock:      c.Clock,
		Program:    b.program,
		Serve:      b.serve,
		Exit:       b.exit,
		Settle:     c.Settle,
		Stepped:    c.Stepped,
		KeepInputs: c.KeepInputs,
		Pace:       c.Pace,
		Stuck: func(p P) {
			if pr := b.c.Proc(p); !pr.quiet {
				b.Tracef("%s can never move again: killed", pr.name)
			}
		},
	}
	if c.Decide != nil {
		sc.Decide = b
	}
	s.Init(sc)
}

// Pick asks Config.Decide for one of n candidates (0 when n < 2 or there
// is no Decide) and panics at an answer out of range. It makes a Base a
// sched.Decider.
func (b *Base[P, R]) Pick(n int) int {
	if n < 2 || b.c.Decide == nil {
		return 0
	}
	i := b.c.Decide(n)
	if i < 0 || i >= n {
		panic(fmt.Sprintf("%s: Decide(%d) = %d", b.c.Name, n, i))
	}
	return i
}

// Keep is the Scheduler's Keep: while a process is picked, which choice
// keeps the one that moved last moving (-1: none does).
func (b *Base[P, R]) Keep() int { return b.s.Keep() }

// Go registers p, a client process named name that will run fn: the
// faults name it (Live). It may be called before Run, or during Run from
// a process or a timer; a name may be reused once its process has ended.
func (b *Base[P, R]) Go(p P, name string, fn func(P)) {
	var zero P
	if old := b.Live(name); old != zero {
		panic(fmt.Sprintf("%s: process %q is still running", b.c.Name, name))
	}
	b.register(p, name, fn, false)
	b.byName[name] = p
}

// Spawn registers p, a process of the simulator's own that no fault names
// (a client's task, a server's loop), that will run fn. A quiet one is
// not traced, and its panic is not recorded.
func (b *Base[P, R]) Spawn(p P, name string, fn func(P), quiet bool) {
	b.register(p, name, fn, quiet)
}

func (b *Base[P, R]) register(p P, name string, fn func(P), quiet bool) {
	pr := b.c.Proc(p)
	b.s.Go(&pr.Proc, p)
	pr.name, pr.fn, pr.quiet = name, fn, quiet
	if !quiet {
		b.Tracef("%s registered", name)
	}
}

// Live returns the client named name (the latest registered under it,
// Go), or the zero P if it has ended or there is none.
func (b *Base[P, R]) Live(name string) P {
	var zero P
	if p, ok := b.byName[name]; ok && !b.c.Proc(p).Ended() {
		return p
	}
	return zero
}

// Latest returns the latest client registered as name, ended or not, and
// whether there is one.
func (b *Base[P, R]) Latest(name string) (P, bool) {
	p, ok := b.byName[name]
	return p, ok
}

// Run runs every process until none can move and no timer is pending (a
// process that can never move again is killed), and returns the first
// failure (Fail) since the Base began, a process's panic among them.
func (b *Base[P, R]) Run() error {
	b.s.Run()
	return b.failure
}

// Fail records err as the run's failure, unless there is one already.
func (b *Base[P, R]) Fail(err error) {
	if b.failure == nil {
		b.failure = err
	}
}

func (b *Base[P, R]) program(p P) {
	pr := b.c.Proc(p)
	if !pr.quiet {
		b.Tracef("%s starts", pr.name)
	}
	pr.fn(p)
}

func (b *Base[P, R]) exit(p P, panicked any) {
	pr := b.c.Proc(p)
	if pr.quiet {
		return
	}
	if b.c.Exit != nil {
		b.c.Exit(p)
	}
	if panicked != nil {
		b.Fail(fmt.Errorf("%s: process %s panicked: %v\n%s", b.c.Name, pr.name, panicked, debug.Stack()))
	}
	if pr.Killed() {
		b.Tracef("%s ended (killed)", pr.name)
	} else {
		b.Tracef("%s ended", pr.name)
	}
}

// Call gives control back to the scheduler once p has posted a request
// of the simulator's own (kept in the simulator's process), and returns
// the reply Config.Serve gave it. It reports false, with no reply, if p
// was killed, before or meanwhile: then if stop, p stops here (its
// deferred functions run, and every call they make returns at once,
// false); else the simulator fails the call and p goes on, to stop at
// its next call that may stop.
func (b *Base[P, R]) Call(p P, stop bool) (R, bool) {
	return b.call(p, reqOwn, stop)
}

func (b *Base[P, R]) call(p P, kind reqKind, stop bool) (R, bool) {
	if b.s.Running() != p {
		panic(b.c.Name + ": a process was used from a goroutine the simulator did not start, or outside World.Run")
	}
	pr := b.c.Proc(p)
	if !pr.Killed() {
		pr.kind = kind
		if rep, killed := pr.Yield(); !killed {
			return rep, true
		}
	}
	if stop {
		b.stop(pr)
	}
	var none R
	return none, false
}

// StopKilled stops p where it is, as a Call that may stop would but
// without giving control away, if p holds control, was killed and is not
// stopping already: for a step of the simulator's own in which a killed
// process may stop (closing a connection, say).
func (b *Base[P, R]) StopKilled(p P) {
	if pr := b.c.Proc(p); pr.Killed() && b.s.Running() == p {
		b.stop(pr)
	}
}

// stop stops pr, a killed process, unless it is stopping already.
func (b *Base[P, R]) stop(pr *Proc[P, R]) {
	if !pr.exiting {
		pr.exiting = true
		pr.Stop()
	}
}

// Sleep lets d of virtual time pass for p; with d <= 0 it only yields
// (another process may move first; see Config.ZeroSleepContinues).
func (b *Base[P, R]) Sleep(p P, d time.Duration) {
	b.c.Proc(p).sleep = d
	b.call(p, reqSleep, true)
}

// Fault applies f as a step of the calling process, or at once when no
// process runs (from a timer, or outside Run); Config.Settle runs after
// it.
func (b *Base[P, R]) Fault(f func()) {
	var zero P
	if p := b.s.Running(); p != zero {
		b.c.Proc(p).fault = f
		b.call(p, reqFault, true)
		return
	}
	f()
	b.settle()
}

func (b *Base[P, R]) settle() {
	if b.c.Settle != nil {
		b.c.Settle()
	}
}

// serve handles p's posted request: a sleep or a fault here, any other
// in Config.Serve. A reply ready at once is handed over at once.
func (b *Base[P, R]) serve(p P) {
	pr := b.c.Proc(p)
	kind := pr.kind
	pr.kind = reqOwn
	var none R
	switch kind {
	case reqOwn:
		b.c.Serve(p)
		return
	case reqSleep:
		pr.Block()
		if pr.sleep <= 0 {
			pr.Deliver(none)
			if !b.c.ZeroSleepContinues {
				return
			}
			break
		}
		b.Tracef("%s sleeps %v", pr.name, pr.sleep)
		b.s.DeliverAt(*b.c.Clock+int64(pr.sleep), &pr.Proc, none)
	case reqFault:
		f := pr.fault
		pr.fault = nil
		pr.Block()
		f()
		b.settle()
		pr.Deliver(none)
	}
	b.s.Continue(&pr.Proc)
}

// Target returns the live client named name for a fault, or traces that
// there is none ("kill c3: no such process") and returns the zero P.
func (b *Base[P, R]) Target(fault, name string) P {
	p := b.Live(name)
	var zero P
	if p == zero {
		b.Tracef("%s %s: no such process", fault, name)
	}
	return p
}

// Kill ends the client named name as a crash would: it stops where it
// waits and runs no more of its own code (its deferred functions run).
func (b *Base[P, R]) Kill(name string) {
	b.Fault(func() {
		var zero P
		if p := b.Target("kill", name); p != zero {
			b.Tracef("%s killed", name)
			b.s.Kill(&b.c.Proc(p).Proc, nil)
		}
	})
}

// Pause stops scheduling the client named name (SIGSTOP) until Resume;
// virtual time goes on.
func (b *Base[P, R]) Pause(name string) {
	b.Fault(func() {
		var zero P
		if p := b.Target("pause", name); p != zero {
			b.c.Proc(p).Pause()
			b.Tracef("%s paused", name)
		}
	})
}

// Resume schedules a paused client again (SIGCONT).
func (b *Base[P, R]) Resume(name string) {
	b.Fault(func() {
		var zero P
		if p := b.Target("resume", name); p != zero && b.c.Proc(p).Paused() {
			b.c.Proc(p).Resume()
			b.Tracef("%s resumed", name)
		}
	})
}

// A Link is a client's network path to the one server of a world, as a
// partition cuts it (TCP's way: bytes wait, nothing is reset): while it
// is cut, what either side sends waits, and goes through in the order
// sent once it heals. A world of several servers has its own.
type Link struct {
	cut  bool
	held []func()
}

// Cut reports whether a partition cuts the link.
func (l *Link) Cut() bool { return l.cut }

// Hold keeps f, which delivers what one side sent, until the link heals.
func (l *Link) Hold(f func()) { l.held = append(l.held, f) }

// Partition cuts the Link of the client named name, both ways; the trace
// says it is cut in the words cut ("partitioned from the server").
func (b *Base[P, R]) Partition(name, cut string) {
	b.Fault(func() {
		var zero P
		if p := b.Target("partition", name); p != zero {
			if l := b.c.Proc(p).Link(); !l.cut {
				l.cut = true
				b.Tracef("%s %s", name, cut)
			}
		}
	})
}

// Heal ends the partition of the client named name: what its Link held
// goes through, in the order it was sent.
func (b *Base[P, R]) Heal(name string) {
	b.Fault(func() {
		var zero P
		p := b.Target("heal", name)
		if p == zero || !b.c.Proc(p).link.cut {
			return
		}
		l := b.c.Proc(p).Link()
		l.cut = false
		b.Tracef("%s healed", name)
		held := l.held
		l.held = nil
		for _, f := range held {
			f()
		}
	})
}

// Tracef writes a line of the trace, if there is one. Callers that pass
// arguments may look at Tracing first: boxing them for the call costs an
// allocation each, trace or not.
func (b *Base[P, R]) Tracef(format string, args ...any) {
	if b.c.Trace == nil {
		return
	}
	fmt.Fprintf(b.c.Trace, "%12d ", *b.c.Clock)
	fmt.Fprintf(b.c.Trace, format, args...)
	io.WriteString(b.c.Trace, "\n")
}

// Tracing reports whether there is a trace.
func (b *Base[P, R]) Tracing() bool { return b.c.Trace != nil }
