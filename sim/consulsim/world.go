package consulsim

import (
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
	"github.com/lockprover/lockprover/sim/simworld"
)

// Kind is the server a World simulates.
type Kind int

const (
	// Consul is a Consul agent (v1.20.2) and its KV, session and txn
	// endpoints, as consulsem's Consul calls them.
	Consul Kind = iota
	// Etcd is an etcd v3 server (3.4) and its lease, KV, txn and watch
	// API, as consulsem's Etcd calls it.
	Etcd
)

func (k Kind) String() string {
	switch k {
	case Consul:
		return "consul"
	case Etcd:
		return "etcd"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Options configure a World. The zero value is a Consul agent in -dev
// mode with session_ttl_min 1s, every choice given to the first
// candidate.
type Options struct {
	Kind Kind
	// Persistent (Consul only) is an agent with a data directory: a
	// restart keeps sessions and keys and gives every session a fresh
	// TTL. Without it, a -dev agent: a restart forgets everything and its
	// indexes start again. etcd always keeps its state (its data
	// directory), and gives every lease a fresh TTL.
	Persistent bool
	// SessionTTLMin (Consul) is the agent's session_ttl_min: a session of
	// a shorter TTL is refused. 0 means 1 s, as adapters/servers/consul's agents.
	SessionTTLMin time.Duration
	// MinTTL (etcd) is the server's floor for a lease's TTL, a whole
	// number of seconds: a Grant of less gets it. 0 means 1 s, as
	// adapters/servers/etcd's servers (1.5 election timeouts of 500 ms, rounded
	// up).
	MinTTL time.Duration
	// ElectionTimeout (etcd) is added to every lease's fresh TTL after a
	// restart (the lessor's Promote). 0 means 500 ms, as adapters/servers/etcd.
	ElectionTimeout time.Duration
	// Timeout, if positive, is how long a client waits for an answer (a
	// wait for a change: its max, plus Timeout) before its call fails
	// with a timeout, the outcome unknown to it. 0: as long as it takes
	// (a partition that never heals holds the call for good).
	Timeout time.Duration
	// Decide picks one of n (at least 2) candidates: which runnable
	// client moves next (its call is then served at once), and, on
	// Consul, when a session's TTL timer fires (Consul promises the TTL
	// only as a lower bound): of 5, candidate 0 is 2 x TTL after the
	// session's last renewal, as v1.20.2 does, and 1 to 4 are 1, 1.25,
	// 1.5 and 1.75 x TTL. nil always picks the first.
	Decide func(n int) int
	// KeepInputs makes each process keep what it was handed each time
	// it moved (sched.Config.KeepInputs): for an exhaustive search's
	// fingerprint of the state (Unseen says what it must leave out).
	KeepInputs bool
	// Trace, if set, receives one line per event: the virtual time in
	// nanoseconds, then what happened.
	Trace io.Writer
	// OnDrop, if set, is told when a reply DropReply armed is lost: the
	// client's name. It is when the fault strikes.
	OnDrop func(client string)
	// Cluster, if set, makes the World a cluster (cluster.go): the
	// server is then the majority's state, and Restart is refused
	// (Strike strikes the nodes).
	Cluster *ClusterOptions
}

// Virtual time a call takes (a round trip, as the client sees it; the
// server applies the call when it arrives, at once), and a refused one.
const (
	callTime    = time.Millisecond
	refusedTime = 100 * time.Microsecond
)

// A World is one simulated server (a Consul agent or an etcd server) and
// the client processes that use it. Its methods must be called from the
// goroutine that calls Run, from a process while it runs, from a timer,
// or when no Run is in progress.
type World struct {
	o     Options
	now   int64
	sched sched.Scheduler[*Process, result]
	// base runs the clients: by name, their sleeps and faults, the trace
	// and the first failure.
	base simworld.Base[*Process, result]
	srv  *server
	cl   *cluster // nil for a single server
}

// New returns a World of one empty server, up, at virtual time 0. It
// refuses options that make no sense.
func New(o Options) (*World, error) {
	if o.Kind != Consul && o.Kind != Etcd {
		return nil, fmt.Errorf("consulsim: unknown kind %d", int(o.Kind))
	}
	if o.SessionTTLMin == 0 {
		o.SessionTTLMin = time.Second
	}
	if o.MinTTL == 0 {
		o.MinTTL = time.Second
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = 500 * time.Millisecond
	}
	if o.SessionTTLMin < 0 || o.MinTTL < 0 || o.MinTTL%time.Second != 0 || o.ElectionTimeout < 0 || o.Timeout < 0 {
		return nil, fmt.Errorf("consulsim: session_ttl_min %v, min TTL %v (whole seconds), election timeout %v, timeout %v: none negative",
			o.SessionTTLMin, o.MinTTL, o.ElectionTimeout, o.Timeout)
	}
	w := &World{o: o}
	w.srv = newServer(w)
	if o.Cluster != nil {
		w.cl = newCluster(w, *o.Cluster)
	}
	w.base.Init(&w.sched, simworld.Config[*Process, result]{
		Name: "consulsim", Clock: &w.now, Trace: o.Trace, Decide: o.Decide, KeepInputs: o.KeepInputs,
		Proc: procOf, Serve: w.serve,
		// A Sleep of nothing, once served, hands the process straight
		// back: this simulator has always done so, and its runs depend
		// on it.
		ZeroSleepContinues: true,
	})
	return w, nil
}

// procOf is the simworld.Proc that p holds.
func procOf(p *Process) *simworld.Proc[*Process, result] { return &p.proc }

// Now returns the virtual time in nanoseconds since New.
func (w *World) Now() int64 { return w.now }

// Keep says, while the Decider picks which process moves, which of its
// choices keeps the process that moved last moving; -1 if none does, or
// while it makes any other choice (an exhaustive search's bound on
// preemptions).
func (w *World) Keep() int { return w.base.Keep() }

// Kind is the server's kind.
func (w *World) Kind() Kind { return w.o.Kind }

// A Process is one client program: a coroutine that moves only when the
// scheduler lets it.
type Process struct {
	w    *World
	proc simworld.Proc[*Process, result] // with its Link to the server

	req  *call // the call it posted
	cur  *call // the call it waits for, or last waited for
	drop bool  // its next reply is lost
	// conn counts its connections to the server that the server closed
	// (ForceClose): a call belongs to the connection it was posted on.
	conn int
	// A process on the wire (Send, Wait): whether a result came since
	// its last Wait, and the end of the Wait it is in.
	replied bool
	waiting *sched.Timer
}

// Name returns the name the process was registered with.
func (p *Process) Name() string { return p.proc.Name() }

// Now is the process's clock: the virtual time, in nanoseconds.
func (p *Process) Now() int64 { return p.w.now }

// Go registers a client process named name that will run fn. It may be
// called before Run, or during Run from a process or a timer; a name may
// be reused once its process has ended.
func (w *World) Go(name string, fn func(p *Process)) {
	w.base.Go(&Process{w: w}, name, fn)
}

// Run runs every process until the clients have ended (a client that can
// never move again is killed) and no timer is pending (the server's TTL
// timers included: sessions left alive expire in virtual time). It
// returns the first panic of a client as an error. It may be called
// again, with processes registered since.
func (w *World) Run() error { return w.base.Run() }

// Sleep lets d of virtual time pass for the process; with d <= 0 it only
// yields (another process may move first).
func (p *Process) Sleep(d time.Duration) { p.w.base.Sleep(p, d) }

// post posts c, gives control back to the scheduler and returns the
// reply. A killed process stops here (its deferred functions run).
func (p *Process) post(c *call) result {
	p.req, p.cur = c, c
	rep, _ := p.w.base.Call(p, true)
	return rep
}

// serve sends p's posted call; a reply ready at once is handed over at
// once.
func (w *World) serve(p *Process) {
	c := p.req
	p.req = nil
	p.proc.Block()
	switch {
	case c.await:
		w.startWait(p, c.d)
	case c.then != nil:
		w.send(c)
		p.proc.Deliver(result{})
	default:
		w.send(c)
	}
	w.sched.Continue(&p.proc.Proc)
}

// After runs f in the scheduler once d of virtual time has passed; f may
// call the World's faults.
func (w *World) After(d time.Duration, f func()) { w.sched.After(d, f) }

// tracef writes a line of the trace, if there is one.
func (w *World) tracef(format string, args ...any) { w.base.Tracef(format, args...) }

// Unseen are the types a fingerprint of the world (internal/statehash)
// must leave out: its scheduler's machinery (sched.Scheduler.Unseen).
func (w *World) Unseen() []reflect.Type { return w.sched.Unseen() }
