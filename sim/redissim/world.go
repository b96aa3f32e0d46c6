package redissim

import (
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
	"github.com/lockprover/lockprover/sim/simworld"
)

// Options configure a World. The zero value is one server without
// persistence, every choice given to the first candidate.
type Options struct {
	// Servers is N, the number of servers; 0 means 1.
	Servers int
	// Persistence is what every server keeps across a crash.
	Persistence Persistence
	// Decide picks one of n (at least 2) candidates: which runnable
	// process (client or server) moves next, and which client's command a
	// server takes next when several are waiting. nil always picks the
	// first (in the order processes were registered, commands sent).
	Decide func(n int) int
	// KeepInputs makes each process keep what it was handed each time
	// it moved (sched.Config.KeepInputs): for an exhaustive search's
	// fingerprint of the state (Unseen says what it must leave out).
	KeepInputs bool
	// Trace, if set, receives one line per event: the virtual time in
	// nanoseconds, then what happened.
	Trace io.Writer
	// OnDrop, if set, is told when a reply DropReply armed is lost: the
	// client's process name and the server's index. It is when the fault
	// strikes (a command to that server may never come), so that a runner
	// records it then and only then.
	OnDrop func(client string, server int)
}

// Persistence is what a server keeps across a crash or a restart.
type Persistence int

const (
	// None (--save ” --appendonly no): a server comes back empty.
	None Persistence = iota
	// Always (--appendonly yes --appendfsync always): every write the
	// server applied was on disk before its reply went out, so it comes
	// back with every key, each with its absolute deadline on the
	// server's clock (those that passed while it was down are gone).
	Always
)

// Virtual time a command takes on its server (a round trip, as the client
// sees it), and a refused connection.
const (
	commandTime = 100 * time.Microsecond
	refusedTime = 100 * time.Microsecond
)

// A World is N simulated Redis servers and the client processes that use
// them. Its methods must be called from the goroutine that calls Run, from
// a process while it runs, from a timer, or when no Run is in progress.
type World struct {
	onDrop func(client string, server int)
	now    int64
	sched  sched.Scheduler[*Process, reply]
	// base runs the processes: the clients by name, their sleeps and
	// faults, the trace and the first failure.
	base    simworld.Base[*Process, reply]
	servers []*server
	reap    []*Process // tasks to kill: their client has ended
	wire    *Wire      // set when served on the wire (Serve)
}

// New returns a World of o.Servers empty servers, up, at virtual time 0.
// It refuses a negative number of servers or an unknown persistence.
func New(o Options) (*World, error) {
	n := o.Servers
	if n == 0 {
		n = 1
	}
	if n < 0 || n > 64 {
		return nil, fmt.Errorf("redissim: %d servers: must be 1 to 64", o.Servers)
	}
	if o.Persistence != None && o.Persistence != Always {
		return nil, fmt.Errorf("redissim: unknown persistence %d", int(o.Persistence))
	}
	w := &World{onDrop: o.OnDrop}
	for i := range n {
		w.servers = append(w.servers, newServer(w, i, o.Persistence))
	}
	w.base.Init(&w.sched, simworld.Config[*Process, reply]{
		Name: "redissim", Clock: &w.now, Trace: o.Trace, Decide: o.Decide, KeepInputs: o.KeepInputs,
		Proc: procOf, Serve: w.serve, Exit: w.ending, Settle: w.settle, Pace: w.pace,
	})
	return w, nil
}

// pace is the scheduler's Pace: the wire's, if it has one (Wire.Pace).
func (w *World) pace(from, to int64) {
	if w.wire != nil && w.wire.Pace != nil {
		w.wire.Pace(from, to)
	}
}

// procOf is the simworld.Proc that p holds.
func procOf(p *Process) *simworld.Proc[*Process, reply] { return &p.proc }

// Now returns the virtual time in nanoseconds since New.
func (w *World) Now() int64 { return w.now }

// Keep says, while the Decider picks which process moves, which of its
// choices keeps the process that moved last moving; -1 if none does, or
// while it makes any other choice (an exhaustive search's bound on
// preemptions).
func (w *World) Keep() int { return w.base.Keep() }

// Servers is N.
func (w *World) Servers() int { return len(w.servers) }

// A Process is one client program, or one server's loop: a coroutine that
// moves only when the scheduler lets it.
type Process struct {
	w    *World
	proc simworld.Proc[*Process, reply]
	srv  *server // set for a server's process

	req  request
	cut  map[int]bool // servers it is partitioned from
	held []held       // what the partitions hold, in the order sent
	drop map[int]bool // servers whose next reply to it is lost

	// A client's tasks (PriorityEnv.Go) are processes of their own that
	// share its network (cut and drop are its maps; held is its) and die
	// with it.
	owner   *Process   // the client, for a task
	tasks   []*Process // a client's tasks, for killing them with it
	ntasks  int        // how many it started, for their names
	pending *round     // the round it waits for
	subs    []*subscription
	await   *awaiter // the wait it is in (PriorityEnv.Await, Wait)
	replied *signal  // fired when a reply to a Send comes (Wait)
}

// client is the client the process is, or whose task it is.
func (p *Process) client() *Process {
	if p.owner != nil {
		return p.owner
	}
	return p
}

// Name returns the name the process was registered with.
func (p *Process) Name() string { return p.proc.Name() }

// Now is the process's clock (CLOCK_MONOTONIC's stand-in): the virtual
// time, in nanoseconds.
func (p *Process) Now() int64 { return p.w.now }

// Go registers a client process named name that will run fn. It may be
// called before Run, or during Run from a process or a timer; a name may
// be reused once its process has ended.
func (w *World) Go(name string, fn func(p *Process)) {
	w.base.Go(&Process{w: w, cut: map[int]bool{}, drop: map[int]bool{}}, name, fn)
}

// live returns the client named name unless it has ended.
func (w *World) live(name string) *Process { return w.base.Live(name) }

// Run runs every process until the clients have ended (a client that can
// never move again, paused for good, is killed) and no timer is pending.
// It returns the first panic of a client, or the first command or script
// the servers do not model, as an error. It may be called again, with
// processes registered since.
func (w *World) Run() error {
	for _, s := range w.servers {
		s.spawn()
	}
	return w.base.Run()
}

// fail records the first failure of the World.
func (w *World) fail(err error) { w.base.Fail(err) }

// Sleep lets d of virtual time pass for the process; with d <= 0 it only
// yields (another process may move first).
func (p *Process) Sleep(d time.Duration) { p.w.base.Sleep(p, d) }

// call posts r, gives control back to the scheduler and returns the
// reply. A killed process stops here (its deferred functions run).
func (p *Process) call(r request) reply {
	p.req = r
	rep, _ := p.w.base.Call(p, true)
	return rep
}

type reqKind uint8

const (
	reqRound reqKind = iota
	reqRecv          // a server waits for its next command
	reqAwait         // PriorityEnv.Await
	reqPost          // a round the process does not wait for
)

type request struct {
	kind  reqKind
	round *round
	await *awaiter
}

type reply struct {
	results []Result
	n       int // an Await's answer
}

// serve handles p's posted request; a reply ready at once is handed over
// at once.
func (w *World) serve(p *Process) {
	r := p.req
	p.req = request{}
	p.proc.Block()
	switch r.kind {
	case reqRound:
		w.send(r.round)
	case reqPost:
		w.send(r.round)
		p.proc.Deliver(reply{})
	case reqAwait:
		w.startAwait(p, r.await)
	case reqRecv: // settle serves it first, but for its start
		p.srv.idle()
		return
	}
	w.sched.Continue(&p.proc.Proc)
}

// settle lets each server that has posted its wait for a command wait,
// and makes those with mail runnable: so a server is a candidate for the
// next step exactly when a command waits for it.
func (w *World) settle() {
	w.reapTasks()
	for _, s := range w.servers {
		if s.posted {
			s.idle()
		}
		s.wake()
	}
}

// After runs f in the scheduler once d of virtual time has passed; f may
// call the World's faults.
func (w *World) After(d time.Duration, f func()) { w.sched.After(d, f) }

// tracef writes a line of the trace, if there is one.
func (w *World) tracef(format string, args ...any) { w.base.Tracef(format, args...) }

// Unseen are the types a fingerprint of the world (internal/statehash)
// must leave out: its scheduler's machinery (sched.Scheduler.Unseen).
func (w *World) Unseen() []reflect.Type { return w.sched.Unseen() }
