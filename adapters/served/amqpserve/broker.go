package amqpserve

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/served/wire"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// Options configure a served broker. The zero value records.
type Options struct {
	// Script, if set, is a Log to replay: each process takes the steps it
	// logged, in order, until one differs (then it records again).
	Script map[string][]string
	// Version is the RabbitMQ release connection.start names ("" is
	// 3.10.8): the World's (rabbitmqsim.Options.Version).
	Version string
	// Grace is how long a process answered by the broker may stay silent
	// before it counts as idle; 0 means 50 ms.
	Grace time.Duration
	// Start is Grace for a process that has taken no step yet: starting,
	// an interpreter loading its modules, it costs the World no time
	// (processes start side by side, none waiting for the others to go
	// quiet); 0 means 2 s.
	Start time.Duration
	// Quiet is how long a process already idle may stay silent before it
	// idles again; 0 means 2 ms.
	Quiet time.Duration
	// Idle is the virtual time an idle process lets pass before it is
	// looked at again; 0 means 10 ms.
	Idle time.Duration
	// Late bounds how long a replay waits for the step its log has next;
	// 0 means 10 s.
	Late time.Duration
	// Settle, if above 0, makes the order of the processes' steps the
	// schedule's alone, as an exhaustive search needs (docs/exhaustive.md,
	// "An implementation's search"): a process with an operation in flight
	// that the protocol does not show waiting (no consumer of its awaits
	// a delivery: every other method is answered at once) has something
	// to send, and is waited for up to Settle, its silence costing no
	// virtual time, instead of going idle after Grace; silent past it, it
	// goes idle and the run is undecided (Record.Undecided). One that
	// waits on a consumer goes idle after Grace, as without Settle.
	Settle time.Duration
	// Speedup is how many times faster than the processes' real clocks
	// the World's clock may run where it jumps (Pace): a gap of virtual
	// time d between two steps lasts d/Speedup for the processes, whose
	// own timers (a heartbeat, a poll between requests) fire in it as
	// often as d/Speedup allows. 0 means 20; a negative value, no bound.
	Speedup float64
}

func (o *Options) defaults() {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.Grace, 50 * time.Millisecond}, {&o.Start, 2 * time.Second}, {&o.Quiet, 2 * time.Millisecond}, {&o.Idle, 10 * time.Millisecond}, {&o.Late, 10 * time.Second}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if o.Speedup == 0 {
		o.Speedup = 20
	}
	if o.Version == "" {
		o.Version = "3.10.8"
	}
}

// A Broker is one World served on the wire: a port per process, and what
// its processes did, step by step (the embedded Record: Log, and what the
// run says nothing of the implementation for: Refused, a connection that
// did not speak AMQP 0-9-1, a wrong password or vhost, a frame that could
// not be read; Diverged; Unserved, methods answered as RabbitMQ answers one
// it has no handler for, 503 COMMAND_INVALID).
type Broker struct {
	wire.Record
	w    *rabbitmqsim.World
	o    Options
	name string

	mu     sync.Mutex
	procs  []*Process
	closed bool
}

// New serves w. Close ends it.
func New(w *rabbitmqsim.World, o Options) *Broker {
	o.defaults()
	return &Broker{w: w, o: o, name: fmt.Sprintf("served-%d", served.Add(1))}
}

// Pace is the World's (rabbitmq.Options.Pace), called where its clock
// jumps from one virtual time to a later one, with no process moving:
// what the broker did to the processes' connections (a close it sent, an
// end their clients noticed) reaches the wire, then it waits a real
// Speedup-th of the gap, so that the processes' own clocks see it pass.
func (s *Broker) Pace(from, to int64) {
	// No process moves while the clock jumps: what the broker did to
	// their connections reaches the wire now, where they can see it.
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	for _, p := range procs {
		p.flush()
	}
	if s.o.Speedup > 0 {
		time.Sleep(time.Duration(float64(to-from) / s.o.Speedup))
	}
}

// served counts the brokers served, for their names.
var served atomic.Int64

// Name is the broker's own, unique in the program: the run its
// processes' implementation is started under (process.Launcher's run),
// where plans on the simulator share their lock's name.
func (s *Broker) Name() string { return s.name }

// Process serves the process name of the World, whose view of the broker
// b is: the returned Process is that view (Dial, Sleep), with a URL for
// the process's implementation and the waiter its client waits through.
// On a cluster the process gets a port per node, each connecting to its
// node as a real node's own port does (URLs); URL is its own node's.
// A name reused (a restarted process) gets ports of its own.
func (s *Broker) Process(name string, b broker.Broker) (*Process, error) {
	nodes := []string{""}
	if own := s.w.NodeOf(name); own != "" {
		nodes = append([]string{own}, slices.DeleteFunc(s.w.Nodes(), func(n string) bool { return n == own })...)
	}
	ports, err := wire.Listen(name, nodes)
	if err != nil {
		return nil, fmt.Errorf("served broker: %w", err)
	}
	p := newProcess(s, name, b, ports)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		wire.Close(ports)
		return nil, fmt.Errorf("served broker: closed")
	}
	for _, q := range s.procs {
		if q.name == name {
			q.close() // an earlier incarnation: what is left of it goes
		}
	}
	s.procs = append(s.procs, p)
	p.script = s.Left(s.o.Script, name)
	for _, pt := range ports {
		p.wg.Add(1)
		go p.accept(pt, pt.Ln)
	}
	p.listen()
	return p, nil
}

// Close stops serving: every port and connection closes, and Close
// returns once every goroutine it started has ended.
func (s *Broker) Close() {
	s.mu.Lock()
	s.closed = true
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	for _, p := range procs {
		p.close()
		p.wg.Wait()
	}
}
