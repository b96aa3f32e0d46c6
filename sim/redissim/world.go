package redissim

import (
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
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
	trace   io.Writer
	decide  func(n int) int
	onDrop  func(client string, server int)
	now     int64
	sched   sched.Scheduler[*Process, reply]
	byName  map[string]*Process
	servers []*server
	failure error
	reap    []*Process // tasks to kill: their client has ended
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
	w := &World{trace: o.Trace, decide: o.Decide, onDrop: o.OnDrop, byName: map[string]*Process{}}
	for i := range n {
		w.servers = append(w.servers, newServer(w, i, o.Persistence))
	}
	c := sched.Config[*Process]{
		Clock:   &w.now,
		Program: func(p *Process) { p.w.program(p) },
		Serve:   func(p *Process) { p.w.serve(p) },
		Exit:    func(p *Process, panicked any) { p.w.exit(p, panicked) },
		Settle:  w.settle,
		Stuck: func(p *Process) {
			if p.srv == nil {
				p.w.tracef("%s can never move again: killed", p.name)
			}
		},
	}
	if o.Decide != nil {
		c.Decide = decideFunc(o.Decide)
	}
	w.sched.Init(c)
	return w, nil
}

// decideFunc is Options.Decide as a sched.Decider.
type decideFunc func(n int) int

func (f decideFunc) Pick(n int) int { return pick(f, n) }

// pick asks f for one of n, refusing an answer out of range.
func pick(f func(int) int, n int) int {
	if n < 2 || f == nil {
		return 0
	}
	i := f(n)
	if i < 0 || i >= n {
		panic(fmt.Sprintf("redissim: Decide(%d) = %d", n, i))
	}
	return i
}

// Now returns the virtual time in nanoseconds since New.
func (w *World) Now() int64 { return w.now }

// Servers is N.
func (w *World) Servers() int { return len(w.servers) }

// A Process is one client program, or one server's loop: a coroutine that
// moves only when the scheduler lets it.
type Process struct {
	w    *World
	proc sched.Proc[*Process, reply]
	name string
	fn   func(*Process)
	srv  *server // set for a server's process

	exiting bool
	req     request
	cut     map[int]bool // servers it is partitioned from
	held    []held       // what the partitions hold, in the order sent
	drop    map[int]bool // servers whose next reply to it is lost

	// A client's tasks (PriorityEnv.Go) are processes of their own that
	// share its network (cut and drop are its maps; held is its) and die
	// with it.
	owner   *Process   // the client, for a task
	tasks   []*Process // a client's tasks, for killing them with it
	ntasks  int        // how many it started, for their names
	pending *round     // the round it waits for
	subs    []*subscription
	await   *awaiter // the wait it is in (PriorityEnv.Await)
}

// client is the client the process is, or whose task it is.
func (p *Process) client() *Process {
	if p.owner != nil {
		return p.owner
	}
	return p
}

// Name returns the name the process was registered with.
func (p *Process) Name() string { return p.name }

// Now is the process's clock (CLOCK_MONOTONIC's stand-in): the virtual
// time, in nanoseconds.
func (p *Process) Now() int64 { return p.w.now }

// Go registers a client process named name that will run fn. It may be
// called before Run, or during Run from a process or a timer; a name may
// be reused once its process has ended.
func (w *World) Go(name string, fn func(p *Process)) {
	if old := w.byName[name]; old != nil && !old.proc.Ended() {
		panic(fmt.Sprintf("redissim: process %q is still running", name))
	}
	p := &Process{w: w, name: name, fn: fn, cut: map[int]bool{}, drop: map[int]bool{}}
	w.sched.Go(&p.proc, p)
	w.byName[name] = p
	w.tracef("%s registered", name)
}

// live returns the client named name unless it has ended.
func (w *World) live(name string) *Process {
	if p := w.byName[name]; p != nil && !p.proc.Ended() {
		return p
	}
	return nil
}

// Run runs every process until the clients have ended (a client that can
// never move again, paused for good, is killed) and no timer is pending.
// It returns the first panic of a client, or the first command or script
// the servers do not model, as an error. It may be called again, with
// processes registered since.
func (w *World) Run() error {
	for _, s := range w.servers {
		s.spawn()
	}
	w.sched.Run()
	return w.failure
}

func (w *World) program(p *Process) {
	if p.srv != nil {
		p.srv.loop(p)
		return
	}
	w.tracef("%s starts", p.name)
	p.fn(p)
}

// fail records the first failure of the World.
func (w *World) fail(err error) {
	if w.failure == nil {
		w.failure = err
	}
}

func (w *World) exit(p *Process, panicked any) {
	if p.srv != nil {
		return
	}
	w.ending(p)
	if panicked != nil {
		w.fail(fmt.Errorf("redissim: process %s panicked: %v\n%s", p.name, panicked, debug.Stack()))
	}
	if p.proc.Killed() {
		w.tracef("%s ended (killed)", p.name)
	} else {
		w.tracef("%s ended", p.name)
	}
}

// Sleep lets d of virtual time pass for the process; with d <= 0 it only
// yields (another process may move first).
func (p *Process) Sleep(d time.Duration) {
	p.call(request{kind: reqSleep, d: d})
}

// call posts r, gives control back to the scheduler and returns the
// reply. A killed process stops here (its deferred functions run).
func (p *Process) call(r request) reply {
	if p.w.sched.Running() != p {
		panic("redissim: a process's commands or Sleep were used from a goroutine the simulator did not start, or outside World.Run")
	}
	if !p.proc.Killed() {
		p.req = r
		rep, killed := p.proc.Yield()
		if !killed {
			return rep
		}
	}
	if !p.exiting {
		p.exiting = true
		p.proc.Stop()
	}
	return reply{}
}

type reqKind uint8

const (
	reqSleep reqKind = iota
	reqRound
	reqFault
	reqRecv  // a server waits for its next command
	reqAwait // PriorityEnv.Await
	reqPost  // a round the process does not wait for
)

type request struct {
	kind  reqKind
	d     time.Duration
	fault func()
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
	case reqSleep:
		if r.d <= 0 {
			p.proc.Deliver(reply{})
			return
		}
		w.tracef("%s sleeps %v", p.name, r.d)
		w.sched.DeliverAt(w.now+int64(r.d), &p.proc, reply{})
	case reqFault:
		r.fault()
		w.settle()
		p.proc.Deliver(reply{})
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
	w.sched.Continue(&p.proc)
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
func (w *World) tracef(format string, args ...any) {
	if w.trace == nil {
		return
	}
	fmt.Fprintf(w.trace, "%12d ", w.now)
	fmt.Fprintf(w.trace, format, args...)
	io.WriteString(w.trace, "\n")
}
