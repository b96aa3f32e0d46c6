package consulserve

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/served/wire"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// Options configure a served World. The zero value records.
type Options struct {
	// Script, if set, is a Log to replay: each process takes the steps it
	// logged, in order, until one differs (then it records again).
	Script map[string][]string
	// Grace is how long a process whose requests were all answered (but
	// blocking queries) may stay silent before it counts as idle; 0
	// means 50 ms.
	Grace time.Duration
	// Start is Grace for a process that has taken no step yet (starting:
	// an interpreter loading its modules costs the World no time); 0
	// means 2 s.
	Start time.Duration
	// Quiet is how long a process already idle, or whose requests wait
	// on the agent, may stay silent before virtual time passes again; 0
	// means 2 ms.
	Quiet time.Duration
	// Idle is the virtual time an idle turn lets pass; 0 means 10 ms.
	Idle time.Duration
	// Late bounds how long a replay waits for the step its log has next;
	// 0 means 10 s.
	Late time.Duration
	// Settle is how long a process's requests are still taken once its
	// client has answered (see Process.settle); 0 means 3 ms. Gather is
	// how long a process with a request in flight may stay silent before
	// virtual time passes for it (another request then is taken at the
	// same time); 0 means 3 ms.
	Settle, Gather time.Duration
	// React is how long Flush waits once it reset connections; 0 means
	// 20 ms.
	React time.Duration
	// Node is the agent's node name, which sessions name; "" means
	// "lockprover-sim".
	Node string
}

func (o *Options) defaults() {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.Grace, 50 * time.Millisecond}, {&o.Start, 2 * time.Second}, {&o.Quiet, 2 * time.Millisecond}, {&o.Idle, 10 * time.Millisecond}, {&o.Late, 10 * time.Second}, {&o.Settle, 3 * time.Millisecond}, {&o.Gather, 3 * time.Millisecond}, {&o.React, 20 * time.Millisecond}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if o.Node == "" {
		o.Node = "lockprover-sim"
	}
}

// A Broker is one World's agent served on the wire: a port per process,
// and what its processes did, step by step (the embedded Record: Log;
// Refused, requests that could not be read; Diverged; Unserved, the
// paths and parameters answered as Consul answers what it does not
// know).
type Broker struct {
	wire.Record
	w    *consulsim.World
	o    Options
	name string

	mu     sync.Mutex
	procs  []*Process
	closed bool
	ids    int // the connections' ids
}

// served counts the served Worlds, for their names.
var served atomic.Int64

// New serves w's agent (a Consul one: an etcd World is refused). Close
// ends it.
func New(w *consulsim.World, o Options) (*Broker, error) {
	if w.Kind() != consulsim.Consul {
		return nil, fmt.Errorf("served consul: the World simulates %s, not a Consul agent", w.Kind())
	}
	o.defaults()
	return &Broker{w: w, o: o, name: fmt.Sprintf("served-consul-%d", served.Add(1))}, nil
}

// Name is the served World's own, unique in the program: the run its
// processes' implementation is started under.
func (s *Broker) Name() string { return s.name }

// Process serves the World's process p (call it from p): a loopback port
// of its own. A name reused (a restarted process) gets a port of its own.
func (s *Broker) Process(p *consulsim.Process) (*Process, error) {
	name := p.Name()
	wp, err := wire.Listen(name, []int{0})
	if err != nil {
		return nil, fmt.Errorf("served consul: %w", err)
	}
	sp := newProcess(s, name, p, wp[0])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		wire.Close(wp)
		return nil, fmt.Errorf("served consul: closed")
	}
	for _, q := range s.procs {
		if q.name == name {
			q.close()
		}
	}
	s.procs = append(s.procs, sp)
	sp.script = s.Left(s.o.Script, name)
	sp.serve(wp[0].Ln)
	sp.flush()
	return sp, nil
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

// Flush makes what the agent did meanwhile true on the wire for every
// process at once (call it from the World: a process's step or a timer):
// a force-close of a process's connections, a crash of the agent, struck
// by another process, reset the connections now, not at the struck
// process's next step. Where it reset any, it waits React before the
// World goes on: a client's goroutine that reads the connection (a
// monitor's blocking query) sees the reset before virtual time jumps
// past it, as it would in the time a real agent takes to come back.
func (s *Broker) Flush() {
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	reset := 0
	for _, p := range procs {
		reset += p.flush()
	}
	if reset > 0 {
		time.Sleep(s.o.React)
	}
}

func (s *Broker) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return s.ids
}

// newServer is the HTTP server of a process's port: each request a
// handler's, each connection known to the process.
func (p *Process) newServer() *http.Server {
	return &http.Server{Handler: http.HandlerFunc(p.handle), ConnContext: p.connContext, ConnState: p.connState,
		ReadHeaderTimeout: time.Minute, ErrorLog: discardLog}
}
