package amqprun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/internal/statehash"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// Simulator runs plans on the simulated broker: deterministic, the same
// plan always gives the same history. A plan with a cluster runs on a
// simulated RabbitMQ cluster of its nodes (rabbitmqsim.ClusterOptions).
type Simulator struct {
	// Trace, if set, receives the simulator's event trace.
	Trace io.Writer
	// Cluster, if set, names the nodes of the simulated cluster plans
	// are drawn for (n1, n2, n3), as the cluster target's nodes are;
	// none draws plans for one broker.
	Cluster []string
	// PartitionHandling, if set, is the simulated cluster's mode whatever
	// a plan says (a replay with --partition-handling); else the plan's,
	// else ignore.
	PartitionHandling string
	// NetTicktime is the simulated cluster's net_ticktime; 0 means 5 s.
	NetTicktime time.Duration
	// Version is the RabbitMQ release the simulated broker behaves as
	// (rabbitmqsim.Options.Version; rabbitmqsim.Versions lists them): ""
	// is 3.10.8.
	Version string
	// Wire, if set, serves each run's simulated broker on the wire, for
	// an implementation in processes of its own (amqpprotocol.Wire).
	Wire func(w *rabbitmqsim.World, p *Plan) Wire
}

// A Wire is a simulated broker served on the wire (adapters/served): each
// process's view of the broker gets a URL its implementation connects to.
type Wire interface {
	// Name is the served run's, unique: the run the implementation's
	// processes are started (and warmed) under.
	Name() string
	// Pace is the World's (rabbitmqsim.Options.Pace).
	Pace(from, to int64)
	// Process is process name's view of the broker, b, served.
	Process(name string, b broker.Broker) (broker.Broker, error)
	// End stops serving once the World has run, and says what the run
	// recorded (the plan's Decisions.Wire), what went wrong with the
	// implementation's side (problems), what a reader must be told
	// (notes), and an error where the run says nothing of the
	// implementation (a method the served broker does not serve).
	End() (log map[string][]string, problems, notes []string, err error)
}

// Nodes are the nodes of the simulated cluster plans are drawn for.
func (s Simulator) Nodes() []string { return s.Cluster }

// Mode is the partition handling p runs under on a simulated cluster.
func (s Simulator) Mode(p *Plan) string {
	switch {
	case s.PartitionHandling != "":
		return s.PartitionHandling
	case p.PartitionHandling != "":
		return p.PartitionHandling
	}
	return rabbitmqsim.Ignore
}

// Run executes p against impl on a fresh simulated broker.
func (s Simulator) Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error) {
	res, _, err := s.run(ctx, p, impl)
	return res, err
}

// run is Run, with the World p ran in.
func (s Simulator) run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, *rabbitmqsim.World, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	o := rabbitmqsim.Options{Decider: rabbitmqsim.Script(p.Schedule, rabbitmqsim.Seeded(p.ScheduleSeed)), Trace: s.Trace, Version: s.Version}
	if len(p.Cluster) > 0 {
		for _, f := range p.Nemesis {
			if f.Fault == histories.RestartBroker && f.Node == "" {
				return nil, nil, errors.New("on a cluster, a restart-broker restarts a node: name it (node)")
			}
		}
		if m := s.Mode(p); !slices.Contains(rabbitmqsim.Modes, m) {
			return nil, nil, fmt.Errorf("the simulated cluster has no %s mode: it has %s", m, strings.Join(rabbitmqsim.Modes, ", "))
		}
		o.Cluster = &rabbitmqsim.ClusterOptions{Nodes: p.Cluster, PartitionHandling: s.Mode(p), NetTicktime: s.NetTicktime, NodeOf: p.NodeOf}
	}
	var chooser *chooserDecider
	if p.Chooser != nil {
		chooser = &chooserDecider{ch: p.Chooser}
		o.Decider, o.Exchanges = chooser, true
	}
	if p.Options.NoHeartbeat() {
		o.ServerHeartbeat = -1 // heartbeats off on both sides
	}
	var sp simPlace
	if s.Wire != nil {
		o.Pace = func(from, to int64) { sp.wire.Pace(from, to) }
	}
	w := rabbitmqsim.New(o)
	sp.w = w
	if s.Wire != nil {
		sp.wire = s.Wire(w, p)
	}
	var eng place = sp
	if o.Cluster != nil {
		eng = &simCluster{sp, o.Cluster.PartitionHandling, nil}
	}
	r := newRunner(p, impl, eng, p.Lock)
	if chooser != nil {
		chooser.watch(w, r, p.Chooser, sp.wire == nil)
	}
	if sp.wire != nil {
		if s, ok := impl.(run.Spawner); ok {
			// The World's clock stands still while a process starts: they
			// need only start side by side, not go quiet first (Warm).
			s.Spawn(sp.wire.Name(), len(p.Clients)+len(p.Admins)+1)
			defer s.Drain(sp.wire.Name())
		}
	}
	r.begin()
	if err := w.Run(); err != nil {
		if sp.wire != nil {
			sp.wire.End()
		}
		return nil, nil, err
	}
	if sp.wire != nil {
		log, err := r.endWire(sp.wire)
		p.Wire = log // the plan run logs its steps: run again, it replays them
		if err != nil {
			return nil, nil, err
		}
	}
	if c, ok := eng.(*simCluster); ok && c.settleErr != nil {
		return nil, nil, fmt.Errorf("the simulated cluster could not be made one again before the probe: %w", c.settleErr)
	}
	res, err := r.result()
	return res, w, err
}

// simCluster is the simulator's place for a plan on a cluster: the
// runner asks it for the mode, to make the cluster one again before the
// probe, and for the connections its nodes closed on their own (a node
// pausing itself, an autoheal's loser restarting, a node killed), which
// the history records as the broker's force-closes where no fault of the
// plan explains them, as on the cluster target.
type simCluster struct {
	simPlace
	mode      string
	settleErr error
}

func (e *simCluster) partitionHandling() string { return e.mode }

func (e *simCluster) Settle() {
	if err := e.w.Settle(); err != nil && e.settleErr == nil {
		e.settleErr = err
	}
}

func (e *simCluster) serverNotes() []serverNote {
	var notes []serverNote
	for _, c := range e.w.BrokerCloses() {
		ev := amqpproxy.ServerEvent{What: amqpproxy.ServerClose, Code: c.Code, Text: c.Text}
		if c.Code == 0 {
			ev.What = amqpproxy.ServerEOF
		}
		notes = append(notes, serverNote{proc: c.Process, at: c.At, ev: ev})
	}
	return notes
}

// chooserDecider hands every choice of the simulator to a plan's
// Chooser, with the state the choice is made in.
//
// Unless the chooser asks for every choice (prover.Exhaust.Everything),
// two kinds of process move only when no other can: the nemesis, and a
// process awaiting the semaphore's create before it has ended. In a plan
// whose faults all strike inside their targets' methods (an exhaustive
// search's), the nemesis only awaits the end, looking now and then
// whether every process is done, and a process awaiting the create only
// looks whether it has ended: when either looks changes no order of the
// processes' operations, only when a process notices (the end begins, the
// process starts its script), and every order after that is still
// chosen. docs/exhaustive.md argues it; TestExhaustReductionSound checks
// it against every schedule.
type chooserDecider struct {
	ch       prover.Chooser
	state    func() statehash.Sum
	choosing func() []string
	keep     func() int            // the world's Keep
	later    func(name string) int // 0: moves as any; higher: only when no lower can
	among    []int
}

// watch gives the chooser what it reads at a choice: the state, if
// fingerprinted (the world: its broker, its timers, each process's
// requests and replies so far; and the runner: the history so far, each
// process's client and script; not the chooser itself), who it chooses
// among, and which of them it defers. An implementation in processes of
// its own is not fingerprinted: where its code stands is the process's,
// which the search cannot see, so no state of it is pruned.
func (d *chooserDecider) watch(w *rabbitmqsim.World, r *runner, ch prover.Chooser, fingerprinted bool) {
	if fingerprinted {
		h := statehash.New(reflect.TypeOf(d), reflect.TypeOf(ch))
		d.state = func() statehash.Sum { return h.Sum(w, r) }
	}
	d.choosing = w.Choosing
	d.keep = w.Keep
	d.later = func(name string) int {
		switch {
		case name == "nemesis":
			return 2
		case deferAwaiting && !r.created && r.awaiting[name]:
			return 1
		}
		return 0
	}
}

// deferAwaiting is whether a process awaiting the create moves last;
// only TestExhaustReductionSound turns it off, to check it.
var deferAwaiting = true

func (d *chooserDecider) Pick(n int) int {
	pick := d.pick(n)
	d.ch.Made(pick)
	return pick
}

func (d *chooserDecider) pick(n int) int {
	keep := d.keep()
	if e, ok := d.ch.(interface{ Everything() bool }); ok && e.Everything() {
		return d.ch.Choose(n, keep, d.state)
	}
	names := d.choosing()
	if names == nil {
		return d.ch.Choose(n, -1, d.state) // not which process moves
	}
	least := 3
	for _, name := range names {
		least = min(least, d.later(name))
	}
	d.among = d.among[:0]
	for i, name := range names {
		if d.later(name) == least {
			d.among = append(d.among, i)
		}
	}
	if len(d.among) == 1 {
		return d.among[0]
	}
	return d.among[d.ch.Choose(len(d.among), slices.Index(d.among, keep), d.state)]
}

type simPlace struct {
	w    *rabbitmqsim.World
	wire Wire // nil unless the broker is served on the wire
}

// Go runs fn as process name; on a broker served on the wire, with the
// view that gives its implementation a URL.
func (e simPlace) Go(name string, fn func(broker.Broker)) {
	if e.wire == nil {
		e.w.Go(name, fn)
		return
	}
	e.w.Go(name, func(b broker.Broker) {
		served, err := e.wire.Process(name, b)
		if err != nil {
			served = unserved{b, err}
		}
		fn(served)
	})
}

// unserved is a process's view of the broker where serving it failed (no
// port): its implementation's connect fails with why.
type unserved struct {
	broker.Broker
	err error
}

func (u unserved) URL() string { return "" }
func (u unserved) Err() error  { return u.err }

// endWire ends the served broker once the World has run: the history's
// evidence takes what it saw, and it returns the steps it logged.
func (r *runner) endWire(wire Wire) (map[string][]string, error) {
	log, problems, notes, err := wire.End()
	for _, pr := range problems {
		r.problem(pr)
	}
	r.notes = append(r.notes, notes...)
	return log, err
}
func (e simPlace) Now() int64                      { return e.w.Tick() }
func (e simPlace) After(d time.Duration, f func()) { e.w.After(d, f) }

// KillSelf strikes a process's own kill from a timer of the World, due
// now, while the process sleeps a nanosecond: the timer comes first, and
// the kill stops the process in its sleep.
func (e simPlace) KillSelf(b broker.Broker, strike func()) {
	e.w.After(0, strike)
	b.Sleep(context.Background(), time.Nanosecond)
}
func (e simPlace) Hold(broker.Broker, string) {} // the simulator freezes paused processes itself
func (e simPlace) Notice(b broker.Broker, _ string, limit time.Duration) {
	b.Sleep(context.Background(), limit)
}

func (e simPlace) AfterMethods(name string, n int, f func()) { e.w.AfterMethods(name, n, f) }

// Strike strikes a in the simulator, which names faults and their aims
// as a history does.
func (e simPlace) Strike(a run.Aim) error { return e.w.Strike(a.Fault, a.Process) }

// End ends a: the simulator strikes its end (resume, heal).
func (e simPlace) End(a run.Aim) error { return e.w.Strike(endOf(a), a.Process) }

// BrokerUp reports whether the simulated broker is up (a restart struck
// from outside any process leaves it down for the restart's downtime).
func (e simPlace) BrokerUp() bool { return e.w.Up() }

func (e simPlace) Cost(name string) broker.Cost { return e.w.Cost(name) }

func (e simPlace) ReadCounts(name string, c *rabbitmqsim.Counts) { e.w.ReadCounts(name, c) }

// waitTimeout bounds an admin's wait in the simulator: only a holder that
// is never released (heartbeats off and the holder killed) makes it run out.
const waitTimeout = 10 * time.Minute

// OpContext bounds a wait by virtual time. Any other operation gets
// context.Background and a cancel that does nothing: on the simulator a
// context cancelled once its operation returned is one no call sees (the
// reference, its mutants and the runner keep none), and a process the
// runner cancels mid-Connect (restart) has already been stopped by its
// kill; so context.WithCancel's two allocations per operation bought
// nothing.
func (e simPlace) OpContext(wait bool) (context.Context, context.CancelFunc) {
	if wait {
		return e.w.WithTimeout(context.Background(), waitTimeout)
	}
	return context.Background(), noCancel
}

func noCancel() {}

func (e simPlace) Queues(prefix string) ([]queueOwner, error) {
	var out []queueOwner
	for _, q := range e.w.Queues() {
		if strings.HasPrefix(q.Name, prefix) {
			owner, _, _ := strings.Cut(q.Owner, "#") // connections are named process#id
			out = append(out, queueOwner{name: q.Name, owner: owner})
		}
	}
	return out, nil
}
