package consulserve

import (
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/wire"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// discardLog is the HTTP servers' log: what they would say of a client
// (a connection reset), the run notes itself.
var discardLog = log.New(io.Discard, "", 0)

// A Process is one process of the World as the served agent sees it: its
// port, and what arrived there not yet taken.
type Process struct {
	s    *Broker
	name string
	wp   *consulsim.Process
	port *wire.Port[int]
	wg   sync.WaitGroup

	mu      sync.Mutex
	events  []event
	conns   map[net.Conn]*conn
	servers []*http.Server
	downs   int // the agent's downs when the port last looked
	ended   bool
	more    chan struct{} // has a value after an event is put
	gone    chan struct{} // closed when the process is no longer served

	// The coroutine's own: the log's steps still to replay (nil once the
	// process records), whether an idle turn or a wait that timed out came
	// last, whether it has taken a step, and how many connections have a
	// request in the World that is not a blocking query.
	script []string
	// answered: a replay's client answered while the log had it send
	// more first (replay takes what the log has, then the answer).
	answered bool
	idled    bool
	waited   bool
	moved    bool
	flight   int
}

var _ process.ClockedWaiter = (*Process)(nil)

func newProcess(s *Broker, name string, wp *consulsim.Process, pt *wire.Port[int]) *Process {
	return &Process{s: s, name: name, wp: wp, port: pt, conns: map[net.Conn]*conn{}, more: make(chan struct{}, 1), gone: make(chan struct{})}
}

// Run is the served World's Name: the run the process's implementation is
// started under.
func (p *Process) Run() string { return p.s.name }

// Addr is the agent's HTTP address for the process's client: host:port
// on loopback.
func (p *Process) Addr() string { return p.port.Addr }

// An event is what came from the process's side: a request on a
// connection, a connection gone, or a call (Do).
type event struct {
	c    *conn
	kind eventKind
	req  *request
	call func()        // a call: what to run in the World
	done chan struct{} // a call: closed once it ran
}

type eventKind int

const (
	evRequest eventKind = iota
	evGone
	evCall
)

// fingerprint is the event as the log names it.
func (e event) fingerprint() string {
	if e.kind == evCall {
		return "call"
	}
	return e.req.fingerprint
}

// Do runs f in the process's coroutine, as one of its steps (logged
// "call"), where f may use the World and the process (a harness beside
// the client: faults, Sleep). It returns once f has run, or never ran
// because the process is no longer served.
func (p *Process) Do(f func()) {
	done := make(chan struct{})
	p.put(event{kind: evCall, call: f, done: done})
	select {
	case <-done:
	case <-p.gone:
	}
}

func (p *Process) put(e event) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
	select {
	case p.more <- struct{}{}:
	default:
	}
}

// takeable takes an event the coroutine may take now that matches want
// (any, if want is ""): a connection's events in the order they came,
// its next request only once its last was answered, and of several
// connections' the least by fingerprint. A
// connection's end, once it is that connection's first event, is no
// step: it is taken here (what it had in the World is abandoned).
func (p *Process) takeable(want string) (event, bool) {
	e, ok, gone := p.scan(want)
	for _, c := range gone {
		c.lost()
	}
	return e, ok
}

func (p *Process) scan(want string) (event, bool, []*conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gone []*conn
	seen := map[*conn]bool{}
	// Of the events that may be taken (each connection's first), the
	// least by fingerprint: requests that came together are taken in the
	// same order whichever the machine delivered first.
	best := -1
	for i := 0; i < len(p.events); i++ {
		e := p.events[i]
		if e.c != nil {
			if seen[e.c] {
				continue
			}
			seen[e.c] = true
			if e.kind == evGone || e.c.dead {
				p.events = slices.Delete(p.events, i, i+1)
				i--
				gone = append(gone, e.c)
				if e.kind == evRequest {
					e.req.answer(response{reset: true})
				}
				continue
			}
			if e.c.busy {
				continue
			}
		}
		if want != "" && !matches(want, e.fingerprint()) {
			continue
		}
		if best < 0 || e.fingerprint() < p.events[best].fingerprint() {
			best = i
		}
	}
	if best < 0 {
		return event{}, false, gone
	}
	e := p.events[best]
	p.events = slices.Delete(p.events, best, best+1)
	return e, true, gone
}

// serve serves HTTP on ln, the port's listener (again, once it opened
// again).
func (p *Process) serve(ln net.Listener) {
	srv := p.newServer()
	p.servers = append(p.servers, srv)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		srv.Serve(ln)
	}()
}

// close ends the port and every connection of the process.
func (p *Process) close() {
	p.mu.Lock()
	if !p.ended {
		close(p.gone)
	}
	p.ended = true
	p.port.End()
	servers := slices.Clone(p.servers)
	p.mu.Unlock()
	for _, srv := range servers {
		srv.Close()
	}
}

// killed is the end of a process killed in the World (its coroutine
// stops in Await): its connections close, and what they had in the World
// is abandoned there, as a crashed client's sockets closing reach the
// agent.
func (p *Process) killed() {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	slices.SortFunc(conns, func(a, b *conn) int { return a.id - b.id })
	for _, c := range conns {
		c.lost()
	}
	p.close()
}

// flush makes the agent's life true on the wire, in the World: an agent
// that went down since the port last looked has reset every connection
// made to it before, as has a force-close of the process's connections;
// an agent down refuses at its port (its listener closes), and one up
// again listens at the same address. It says how many connections it
// reset.
func (p *Process) flush() int {
	var reset []*conn
	up, downs := p.s.w.Up()
	closes := p.wp.Connection()
	p.mu.Lock()
	for _, c := range p.conns {
		if !c.dead && (c.downs != downs || c.closes != closes) {
			reset = append(reset, c)
		}
	}
	p.downs = downs
	if !p.ended {
		if err := p.port.Follow(up, p.serve); err != nil {
			p.s.Refuse("%s: its port %s could not be opened again: %v", p.name, p.port.Addr, err)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(reset, func(a, b *conn) int { return a.id - b.id })
	for _, c := range reset {
		c.reset()
	}
	return len(reset)
}

// Sending is the waiter's: before the runner writes to the process, what
// the agent did meanwhile reaches the wire.
func (p *Process) Sending() { p.flush() }

// Await is the waiter's: until ready (the process answered) or expired or
// done, the coroutine takes the process's steps into the World. A process
// killed meanwhile (its coroutine stops here) loses its connections, as a
// crashed client's close.
func (p *Process) Await(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) process.Woke {
	return p.AwaitUntil(math.MaxInt64, ready, expired, done)
}

// Deadline is the waiter's (process.ClockedWaiter): when d of the World's
// virtual time will have passed.
func (p *Process) Deadline(d time.Duration) int64 { return p.wp.Now() + int64(d) }
