package redisserve

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/served/wire"
	"github.com/lockprover/lockprover/sim/redissim"
)

// Options configure a served World. The zero value records.
type Options struct {
	// Script, if set, is a Log to replay: each process takes the steps it
	// logged, in order, until one differs (then it records again).
	Script map[string][]string
	// Grace is how long a process whose commands were all answered may
	// stay silent before it counts as idle; 0 means 50 ms.
	Grace time.Duration
	// Start is Grace for a process that has taken no step yet (starting,
	// an interpreter loading its modules costs the World no time); 0
	// means 2 s.
	Start time.Duration
	// Quiet is how long a process already idle, or whose commands wait
	// on their servers, may stay silent before virtual time passes again;
	// 0 means 2 ms.
	Quiet time.Duration
	// Idle is the virtual time an idle turn lets pass; 0 means 10 ms.
	Idle time.Duration
	// Late bounds how long a replay waits for the step its log has next;
	// 0 means 10 s.
	Late time.Duration
	// Speedup is how many times faster than the processes' real clocks
	// the World's may run where it jumps (a plan's sleep, a fault's
	// time): a jump to virtual time v waits until the machine's clock has
	// run (v - v0)/Speedup since the first jump (from v0), so that a
	// client's own clock (a lock that scores its holders by it) keeps
	// with the World's. 0 means no bound: a jump takes no real time.
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
}

// A Broker is one World's servers served on the wire: ports per process,
// and what its processes did, step by step (the embedded Record: Log, and
// what the run says nothing of the implementation for: Refused, bad RESP,
// its connection closed; Diverged; Unserved, commands, options,
// subcommands and script features answered as Redis answers a command it
// does not know).
type Broker struct {
	wire.Record
	w    *redissim.World
	o    Options
	name string

	mu     sync.Mutex
	procs  []*Process
	closed bool
	ids    int // the connections' ids (CLIENT ID), over the servers

	// drawn pairs each word a replayed log has that its client drew
	// anew (a token) with the client's word, and back (see matches).
	drawn drawnWords

	// paced is when the World's clock first jumped, by the machine's
	// clock, and pacedAt the virtual time it jumped from: pace's anchor.
	paced   time.Time
	pacedAt int64
}

// served counts the served Worlds, for their names.
var served atomic.Int64

// New serves w's servers: it gives them a Lua interpreter for any script
// and makes what they do not model a reply named in Unserved
// (redissim.World.Serve), so call it before w.Run. Close ends it.
func New(w *redissim.World, o Options) *Broker {
	o.defaults()
	s := &Broker{w: w, o: o, name: fmt.Sprintf("served-redis-%d", served.Add(1))}
	w.Serve(redissim.Wire{
		Lua: &luaVM{unserved: s.Unserve},
		Unmodelled: func(server int, what string) {
			s.Unserve(what)
		},
		Pace: s.pace,
	})
	return s
}

// pace is the World's (redissim.Wire.Pace), called where its clock jumps
// from one virtual time to a later one, no process moving: with a
// Speedup, what the servers did to the processes' connections (a crash's
// resets, a restart's ports) reaches the wire, then it waits until the
// machine's clock has run a Speedup-th of the World's since the first
// jump. A jump thus absorbs the real time the processes' own work took
// before it (which costs the World next to none): their clocks keep with
// the World's instead of drifting ahead of it by every operation's
// latency, as a wait of a Speedup-th of each gap would let them.
func (s *Broker) pace(from, to int64) {
	if s.o.Speedup <= 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	if s.paced.IsZero() {
		s.paced, s.pacedAt = now, from
	}
	until := s.paced.Add(time.Duration(float64(to-s.pacedAt) / s.o.Speedup))
	s.mu.Unlock()
	for _, p := range procs {
		p.flush()
	}
	time.Sleep(time.Until(until))
}

// Name is the served World's own, unique in the program: the run its
// processes' implementation is started under.
func (s *Broker) Name() string { return s.name }

// Process serves the World's process p (call it from p): one loopback
// port per server, a connection through port i talking to server i. A
// name reused (a restarted process) gets ports of its own.
func (s *Broker) Process(p *redissim.Process) (*Process, error) {
	name := p.Name()
	servers := make([]int, s.w.Servers())
	for i := range servers {
		servers[i] = i
	}
	wp, err := wire.Listen(name, servers)
	if err != nil {
		return nil, fmt.Errorf("served redis: %w", err)
	}
	ports := make([]*port, len(wp))
	for i, pt := range wp {
		ports[i] = &port{Port: pt}
	}
	sp := newProcess(s, name, p, ports)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		wire.Close(wp)
		return nil, fmt.Errorf("served redis: closed")
	}
	for _, q := range s.procs {
		if q.name == name {
			q.close()
		}
	}
	s.procs = append(s.procs, sp)
	sp.script = s.Left(s.o.Script, name)
	for _, pt := range ports {
		sp.wg.Add(1)
		go sp.accept(pt, pt.Ln)
	}
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

func (s *Broker) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return s.ids
}

// A port is where a process's client connects to server: closed while
// the server is down, opened again at the same address after.
type port struct {
	*wire.Port[int]     // its Key is the server's index
	downs           int // the server's downs when the port last looked
}

func (pt *port) tcpPort() int {
	_, p, _ := net.SplitHostPort(pt.Addr)
	n, _ := strconv.Atoi(p)
	return n
}
