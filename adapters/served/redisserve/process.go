package redisserve

import (
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/sim/redissim"
)

// A Process is one process of the World as the served servers see it: its
// ports (one per server), and what arrived there not yet taken.
type Process struct {
	s     *Broker
	name  string
	wp    *redissim.Process
	ports []*port // by server
	wg    sync.WaitGroup

	mu     sync.Mutex
	events []event
	conns  []*conn
	ended  bool
	more   chan struct{} // has a value after an event is put
	gone   chan struct{} // closed when the process is no longer served

	// The coroutine's own: the log's steps still to replay (nil once the
	// process records), whether an idle turn or a wait that timed out came
	// last, whether it has taken a step, and how many connections have a
	// command in the World.
	script []string
	idled  bool
	waited bool
	moved  bool
	flight int
}

var _ process.Waiter = (*Process)(nil)

func newProcess(s *Broker, name string, wp *redissim.Process, ports []*port) *Process {
	return &Process{s: s, name: name, wp: wp, ports: ports, more: make(chan struct{}, 1), gone: make(chan struct{})}
}

// Run is the served World's Name: the run the process's implementation is
// started under.
func (p *Process) Run() string { return p.s.name }

// Addrs are the servers' addresses for the process's client, host:port on
// loopback, in the servers' order: a connection to the i-th talks to
// server i.
func (p *Process) Addrs() []string {
	out := make([]string, len(p.ports))
	for i, pt := range p.ports {
		out[i] = pt.Addr
	}
	return out
}

// URLs are Addrs as redis:// URLs.
func (p *Process) URLs() []string {
	out := p.Addrs()
	for i, a := range out {
		out[i] = "redis://" + a + "/0"
	}
	return out
}

// An event is what came from the process's side: a command on a
// connection, bad input, a connection gone, or a call (Do).
type event struct {
	c    *conn
	kind eventKind
	args []string
	err  error         // bad: what could not be read
	call func()        // a call: what to run in the World
	done chan struct{} // a call: closed once it ran
}

type eventKind int

const (
	evCommand eventKind = iota
	evBad
	evGone
	evCall
)

// fingerprint is the event as the log names it.
func (e event) fingerprint() string {
	switch e.kind {
	case evCall:
		return "call"
	case evBad:
		return e.c.tag() + " bad input"
	}
	return e.c.tag() + " " + describe(e.args)
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

// takeable takes the first event the coroutine may take now that
// matches want (any, if want is ""): a connection's events in the order
// they came, its next command only once its last was answered. A
// connection's end, once it is that connection's first event, is no step:
// it is taken here (what it had in the World is abandoned).
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
	for i := 0; i < len(p.events); i++ {
		e := p.events[i]
		if e.c != nil {
			if e.c.dead {
				p.events = append(p.events[:i], p.events[i+1:]...)
				i--
				continue
			}
			if seen[e.c] {
				continue
			}
			seen[e.c] = true
			if e.kind == evGone {
				p.events = append(p.events[:i], p.events[i+1:]...)
				i--
				gone = append(gone, e.c)
				continue
			}
			if e.c.busy {
				continue
			}
		}
		if want != "" && !p.s.drawn.matches(want, e.fingerprint()) {
			continue
		}
		p.events = append(p.events[:i], p.events[i+1:]...)
		return e, true, gone
	}
	return event{}, false, gone
}

// accept takes the process's connections through ln, pt's listener, until
// it closes.
func (p *Process) accept(pt *port, ln net.Listener) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.ended {
			p.mu.Unlock()
			nc.Close()
			return
		}
		c := newConn(p, pt, nc)
		p.conns = append(p.conns, c)
		p.wg.Add(1)
		p.mu.Unlock()
		go c.read()
	}
}

// close ends the ports and every connection of the process.
func (p *Process) close() {
	p.mu.Lock()
	if !p.ended {
		close(p.gone)
	}
	p.ended = true
	conns := p.conns
	for _, pt := range p.ports {
		pt.End() // closed for good
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
}

// killed is the end of a process killed in the World (its coroutine
// stops in Await): its connections close, and what they had in the World
// is abandoned there (a blocked BLPOP forgotten), as a crashed client's
// sockets closing reach its servers.
func (p *Process) killed() {
	p.mu.Lock()
	conns := slices.Clone(p.conns)
	p.mu.Unlock()
	for _, c := range conns {
		c.lost()
	}
	p.close()
}

// flush makes the servers' lives true on the wire, in the World: a server
// that went down since the port last looked has reset every connection
// made to it before; a server down refuses at its port (its listener
// closes), and one up again listens at the same address.
func (p *Process) flush() {
	var reset []*conn
	p.mu.Lock()
	for _, pt := range p.ports {
		up, downs := p.s.w.Up(pt.Key)
		if downs != pt.downs {
			pt.downs = downs
			for _, c := range p.conns {
				if c.port == pt && c.downs != downs && !c.dead {
					reset = append(reset, c)
				}
			}
		}
		if !p.ended {
			err := pt.Follow(up, func(ln net.Listener) {
				p.wg.Add(1)
				go p.accept(pt, ln)
			})
			if err != nil {
				p.s.Refuse("%s: its port %s for server %d could not be opened again: %v", p.name, pt.Addr, pt.Key, err)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range reset {
		c.reset()
	}
}

// Sending is the waiter's: before the runner writes to the process, what
// the servers did meanwhile reaches the wire.
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
func (p *Process) Deadline(d time.Duration) int64 { return p.s.w.Now() + int64(d) }

// AwaitUntil is Await that also ends, Expired, once the World's virtual
// time reaches deadline (checked before each turn that lets it pass): an
// operation a paused server holds is given up at the same virtual time
// in every run, not when the machine's clock says.
func (p *Process) AwaitUntil(deadline int64, ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) process.Woke {
	finished := false
	defer func() {
		if !finished {
			p.killed()
		}
	}()
	for {
		p.flush()
		st, e := p.next(ready, expired, done)
		p.moved = p.moved || st == stepReady || st == stepEvent
		switch st {
		case stepReady:
			p.s.Took(p.name, "ready")
			finished = true
			return process.Ready
		case stepExpired:
			finished = true
			return process.Expired
		case stepDone:
			finished = true
			return process.Done
		case stepIdle, stepWait:
			if p.s.w.Now() >= deadline {
				finished = true
				return process.Expired
			}
		}
		switch st {
		case stepIdle:
			p.s.Took(p.name, "idle")
			p.idled = true
			p.wp.Sleep(p.s.o.Idle)
		case stepWait:
			p.s.Took(p.name, "wait")
			p.waited = !p.wp.Wait(p.s.o.Idle)
		case stepEvent:
			p.s.Took(p.name, e.fingerprint())
			p.idled, p.waited = false, false
			if e.kind == evCall {
				e.call()
				p.flush()
				close(e.done)
				continue
			}
			e.c.handle(e)
		}
	}
}

type step int

const (
	stepReady step = iota
	stepExpired
	stepDone
	stepIdle
	stepWait
	stepEvent
)

// next is the process's next step: its log's next while it replays, else
// what comes first. With commands in the World it waits there for a
// reply (a wait), first at once, then after Quiet of silence.
func (p *Process) next(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) (step, event) {
	if len(p.script) > 0 {
		if st, e, ok := p.replay(ready, expired, done); ok {
			return st, e
		}
	}
	if e, ok := p.takeable(""); ok {
		return stepEvent, e
	}
	if p.flight > 0 && !p.waited {
		return stepWait, event{}
	}
	quiet := p.s.o.Grace
	switch {
	case p.idled || p.waited:
		quiet = p.s.o.Quiet
	case !p.moved:
		quiet = p.s.o.Start
	}
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		if e, ok := p.takeable(""); ok {
			return stepEvent, e
		}
		select {
		case <-p.more:
		case <-ready:
			return stepReady, event{}
		case <-expired:
			return stepExpired, event{}
		case <-done:
			return stepDone, event{}
		case <-timer.C:
			if p.flight > 0 {
				return stepWait, event{}
			}
			return stepIdle, event{}
		}
	}
}
