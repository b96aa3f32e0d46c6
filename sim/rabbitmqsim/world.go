// Package rabbitmqsim is a deterministic, in-memory RabbitMQ for amqp-locks.
//
// A World is a broker (queues, exclusive ownership per connection, publisher
// confirms, heartbeats, restarts) plus the processes that use it. Each process
// runs in its own coroutine, but exactly one moves at a time: at every broker
// call the process hands control to the scheduler, which asks the World's
// Decider which runnable process goes next. Time is virtual and advances by
// latencies measured on a real broker (broker-semantics.md), so heartbeat
// timeouts and crash detection happen at the virtual times RabbitMQ's rules
// give. The same decisions always give the same run, byte for byte. The
// scheduling (processes, hand-off, decisions, the clock and its timers) is
// package sim/sched's, which sim/mariadbsim's MariaDB shares; this package is
// the broker on top.
//
// Faults are operations of the World: Kill, Pause/Resume, Partition/Heal,
// ForceClose, RestartBroker and DropReply. Called from inside a process they
// are scheduled steps like any broker call; called outside Run they apply at
// once.
package rabbitmqsim

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sort"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/sched"
)

// Options configure a World. The zero value is RabbitMQ 3.10's defaults
// driven by Seeded(0).
type Options struct {
	// Decider answers every open choice; nil means Seeded(0).
	Decider Decider
	// ServerHeartbeat is the heartbeat the broker proposes: 0 means
	// RabbitMQ's default of 60 s, a negative value means none.
	ServerHeartbeat time.Duration
	// RestartDowntime is how long RestartBroker keeps the broker down;
	// 0 means 1 s.
	RestartDowntime time.Duration
	// Trace, if set, receives one line per broker event.
	Trace io.Writer
	// Cluster, if set, makes the World a RabbitMQ cluster of nodes
	// rather than one broker (ClusterOptions).
	Cluster *ClusterOptions
	// Version is the RabbitMQ release the broker behaves as where the
	// releases differ on one node (docs/broker-semantics.md, 1b): "" is
	// 3.10.8, as is "4.0.5" (every row measured answered alike); "4.3.6"
	// may answer a connection.close before it has deleted that
	// connection's exclusive queues, which go up to 4.3 ms later (row
	// 6.8). The exclusive-delete race (7c) is not simulated on any.
	// Versions lists the names; New panics on another.
	Version string
	// Exchanges keeps every process's requests and replies in the World,
	// so that a fingerprint of the World (internal/statehash) also tells
	// where each process's own code stands: a process is a function of
	// the replies it got (the exhaustive search, prover.Exhaust).
	Exchanges bool
	// Pace, if set, is the scheduler's (sched.Config.Pace): told each
	// time the clock jumps to a timer, it may wait there. A World served
	// on the wire (adapters/served) keeps its clock within a factor of
	// its processes' real ones so; it changes no decision.
	Pace func(from, to int64)
}

// Versions are the RabbitMQ releases a World can behave as
// (Options.Version).
var Versions = []string{"3.10.8", "4.0.5", "4.3.6"}

// A World is one simulated broker and the processes that talk to it. Its
// methods must be called from the goroutine that calls Run, from a process
// while it runs, or when no Run is in progress.
type World struct {
	decide   Decider
	serverHB time.Duration
	downtime time.Duration
	trace    io.Writer

	now    int64
	sched  sched.Scheduler[*process, reply]
	procs  []*process // every process registered, ended ones too
	byName map[string]*process

	queues      map[string]*queue
	lastArgs    map[string]any // the arguments of the queue declared last (sharedArgs)
	conns       int
	up          bool
	gen         int
	failure     error
	keep        bool     // Options.Exchanges
	lateRelease bool     // Options.Version "4.3.6": close-ok before the exclusive queues go
	cl          *cluster // Options.Cluster; nil for one broker
	// routed holds the one queue a publish to the default exchange
	// routes to (targets): most publishes, and none need a slice of
	// their own.
	routed [1]*queue
}

// coroutines are the idle coroutines every World's processes run on: a
// search's worlds, one after another and on every CPU, start their
// processes on those the worlds before them left (sched.Pool).
var coroutines sched.Pool[*process, reply]

// New returns a World with an empty, running broker at virtual time 0.
func New(o Options) *World {
	w := &World{
		decide:   o.Decider,
		serverHB: o.ServerHeartbeat,
		downtime: o.RestartDowntime,
		trace:    o.Trace,
		keep:     o.Exchanges,
		byName:   map[string]*process{},
		queues:   map[string]*queue{},
		up:       true,
	}
	if w.decide == nil {
		w.decide = Seeded(0)
	}
	switch o.Version {
	case "", "3.10.8", "4.0.5":
	case "4.3.6":
		w.lateRelease = true
	default:
		panic(fmt.Sprintf("rabbitmqsim: no behaviour of RabbitMQ %q (Versions: %v)", o.Version, Versions))
	}
	w.sched.Init(sched.Config[*process]{
		Clock:   &w.now,
		Decide:  w.decide,
		Program: func(p *process) { p.fn(&p.client) },
		Serve:   func(p *process) { p.w.serve(p) },
		Exit:    func(p *process, panicked any) { p.w.exit(p, panicked) },
		Stuck:   func(p *process) { p.w.tracef("%s stuck, killed", p.name) },
		Pace:    o.Pace,
	})
	w.sched.Share(&coroutines)
	if w.serverHB == 0 {
		w.serverHB = 60 * time.Second
	}
	if w.serverHB < 0 {
		w.serverHB = 0
	}
	if w.downtime == 0 {
		w.downtime = time.Second
	}
	if o.Cluster != nil {
		w.cl = newCluster(w, *o.Cluster)
		w.cl.khepri40 = w.cl.khepri() && o.Version == "4.0.5"
	}
	return w
}

// Choosing is, while the Decider picks which process moves next, the
// names of those it picks among, in order; nil while it makes any other
// choice (how long the broker takes to notice a closed socket).
func (w *World) Choosing() []string {
	var names []string
	for i := 0; ; i++ {
		p, ok := w.sched.Choosing(i)
		if !ok {
			return names
		}
		names = append(names, p.name)
	}
}

// Keep says, while the Decider picks which process moves, which of its
// choices keeps the process that moved last moving; -1 if none does, or
// while it makes any other choice (an exhaustive search's bound on
// preemptions).
func (w *World) Keep() int { return w.sched.Keep() }

// Now returns the virtual time in nanoseconds since the World began.
func (w *World) Now() int64 { return w.now }

// ServerHeartbeat is the heartbeat the broker proposes in connection.tune
// (0: none).
func (w *World) ServerHeartbeat() time.Duration { return w.serverHB }

// Tick returns the virtual time and moves it on by one nanosecond, so that
// events recorded one after another never share a timestamp.
func (w *World) Tick() int64 {
	w.now++
	return w.now
}

// Go registers a process named name that will run fn with its own view of
// the broker. It may be called before Run or from a running process (a
// restarted client, say); a name may be reused once its process has ended.
func (w *World) Go(name string, fn func(broker.Broker)) {
	if old := w.byName[name]; old != nil && !old.proc.Ended() {
		panic(fmt.Sprintf("sim: process %q is still running", name))
	}
	p := &process{w: w, name: name, fn: fn}
	p.client.p = p
	w.sched.Go(&p.proc, p)
	w.procs = append(w.procs, p)
	w.byName[name] = p
}

// Run runs every process until all have ended and no timer is pending (a
// process paused or cut off forever is then killed). It returns the first
// panic of a process, if any.
func (w *World) Run() error {
	w.sched.Run()
	return w.failure
}

// exit records the panic that ended p, if any.
func (w *World) exit(p *process, panicked any) {
	if panicked != nil && w.failure == nil {
		w.failure = fmt.Errorf("sim: process %s panicked: %v\n%s", p.name, panicked, debug.Stack())
	}
}

// serve handles p's posted request.
func (w *World) serve(p *process) {
	r := p.req
	p.req = request{}
	switch r.kind {
	case reqSleep:
		p.proc.Block()
		until := w.now + int64(r.d)
		var err error
		if r.deadline < until {
			until, err = r.deadline, context.DeadlineExceeded
		}
		w.sched.DeliverAt(until, &p.proc, reply{err: err})
	case reqFault:
		if rep, block := r.fault(); !block {
			w.sched.Handoff(&p.proc, rep)
		} else {
			p.proc.Block()
		}
	case reqDial:
		w.dial(p, r.cfg, r.deadline)
	case reqMethod:
		w.send(p, &r, r.deadline)
	}
}

// tracef writes a line of the trace, if there is one. Callers that pass
// arguments look at w.trace first: boxing them for the call would cost an
// allocation each, trace or not.
func (w *World) tracef(format string, args ...any) {
	if w.trace == nil {
		return
	}
	fmt.Fprintf(w.trace, "%12d ", w.now)
	fmt.Fprintf(w.trace, format, args...)
	io.WriteString(w.trace, "\n")
}

// AfterMethods arranges for f to run right after the process named name
// has had its n-th AMQP method (counting every method since it started)
// applied by the broker, before the process hears the reply: a fault
// aimed at the middle of an operation. f runs in the scheduler and may call
// the World's fault methods.
func (w *World) AfterMethods(name string, n int, f func()) error {
	p := w.byName[name]
	if p == nil || p.proc.Ended() {
		return fmt.Errorf("sim: no running process named %q", name)
	}
	if p.hooks == nil {
		p.hooks = map[int]func(){}
	}
	p.hooks[n] = f
	return nil
}

// An Effect is a queue that a method of a process created or deleted:
// ground truth about operations whose outcome the process never learnt.
type Effect struct {
	Time    int64 // virtual time at which the broker applied the method
	Queue   string
	Created bool // false: deleted
}

// Effects returns the effects of the methods of the process named name
// applied at or after virtual time since, and whether the record is final:
// no request of the process is still on its way (held by a partition), so
// no more can land. A name reused by a restarted process means the newest.
func (w *World) Effects(name string, since int64) ([]Effect, bool) {
	p := w.byName[name]
	if p == nil {
		return nil, true
	}
	i := sort.Search(len(p.effects), func(i int) bool { return p.effects[i].Time >= since })
	final := true
	for _, c := range p.conns {
		if len(c.outbox) > 0 {
			final = false
		}
	}
	return p.effects[i:len(p.effects):len(p.effects)], final
}

// After runs f in the scheduler once d of virtual time has passed; f may
// call the World's fault methods.
func (w *World) After(d time.Duration, f func()) { w.sched.After(d, f) }

// Processes returns the names of the registered processes, sorted.
func (w *World) Processes() []string {
	var names []string
	for n := range w.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// A process is one client program: a coroutine that only moves when the
// scheduler lets it.
type process struct {
	w      *World
	proc   sched.Proc[*process, reply]
	name   string
	fn     func(broker.Broker)
	client client // its view of the broker, in the same allocation

	dropNext bool
	req      request
	conns    []*conn
	counters counters
	hooks    map[int]func() // run after the process's n-th method is applied
	effects  []Effect       // the queues its methods created or deleted

	partitioned bool         // new connections hang until Heal
	dialWait    *dialWait    // a dial waiting for Heal
	deadline    *sched.Timer // a context deadline on a request held by a partition
	exchanges   []exchange   // with Options.Exchanges: every request and its reply
}

// An exchange is a request a process made and the reply it got.
type exchange struct {
	r   request
	rep reply
}

type dialWait struct {
	cfg      broker.Config
	deadline int64
	timer    *sched.Timer
}

// call posts r, gives control back to the scheduler and returns the reply.
// A killed process stops here (Proc.Stop: its deferred functions run, and
// their broker calls stop it again at once).
func (p *process) call(r *request) reply {
	if p.w.sched.Running() != p {
		panic("sim: a broker object was used from a goroutine the simulator did not start, or outside World.Run")
	}
	if p.proc.Killed() {
		p.proc.Stop()
	}
	p.req = *r
	rep, killed := p.proc.Yield()
	if killed {
		p.proc.Stop()
	}
	if p.w.keep {
		p.exchanges = append(p.exchanges, exchange{*r, rep})
	}
	return rep
}

type reqKind uint8

const (
	reqMethod reqKind = iota
	reqSleep
	reqDial
	reqFault
)

// noDeadline is the deadline of a request whose context has none.
const noDeadline = math.MaxInt64

type request struct {
	kind     reqKind
	deadline int64 // virtual deadline of the call's context
	d        time.Duration
	cfg      broker.Config
	fault    func() (rep reply, block bool)
	m        method
	conn     *conn
	ch       *channel
	// The method's arguments (World.apply is the broker's side of it):
	// the queue it names (also for the trace), and the options of
	// queue.declare, queue.delete, basic.publish (queue.bind's exchange
	// and key too) and basic.consume. They are fields rather than a
	// closure so that a method allocates nothing to be sent.
	queue     string
	declare   broker.DeclareOptions
	delete    broker.DeleteOptions
	pub       broker.Publishing
	exclusive bool
	// basic.ack, nack and reject's delivery tag and flags.
	tag               uint64
	multiple, requeue bool
}

type reply struct {
	err   error
	conn  *conn
	ch    *channel
	queue broker.Queue
	n     int
	ok    bool
	tag   string
	conf  broker.Confirmation
	cost  time.Duration // broker time the method took
}
