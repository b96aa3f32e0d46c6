package amqpserve

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/wire"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A Process is one process of the World as the served broker sees it: its
// view of the broker (the embedded Broker: Dial, Sleep), the port its
// implementation connects to, and what arrived there not yet taken.
type Process struct {
	broker.Broker
	s     *Broker
	name  string
	ports []*wire.Port[string] // by node ("" on one broker), the process's own node's first
	wg    sync.WaitGroup

	mu     sync.Mutex
	events []event
	conns  []*wireConn // accepted, in order: a frame's c<i> is its place here
	ended  bool
	more   chan struct{} // has a value after an event is put
	gone   chan struct{} // closed when the process is no longer served

	// The coroutine's own: the log's steps still to replay (nil once the
	// process records), and whether an idle turn came last.
	script  []string
	idled   bool
	moved   bool          // it has taken a step
	serving *wireConn     // the connection whose frame the World is serving, if any
	bound   time.Duration // the operation in flight's bound (Deadline)
}

func newProcess(s *Broker, name string, b broker.Broker, ports []*wire.Port[string]) *Process {
	return &Process{Broker: b, s: s, name: name, ports: ports, more: make(chan struct{}, 1), gone: make(chan struct{})}
}

// Run is the served broker's Name: the run the process's implementation
// is started under.
func (p *Process) Run() string { return p.s.name }

// URL is the broker's address for the process's implementation: on a
// cluster, its own node's.
func (p *Process) URL() string { return p.ports[0].URL(scheme) }

// scheme is what comes before a port's address in a URL the served
// broker gives: guest/guest, the one login it takes.
const scheme = "amqp://guest:guest@"

// URLs are the addresses of every node of a cluster for the process's
// implementation, its own node's first (URL), then the others in the
// cluster's order: a connection through one goes to that node. On one
// broker, URL alone.
func (p *Process) URLs() []string {
	urls := make([]string, len(p.ports))
	for i, pt := range p.ports {
		urls[i] = pt.URL(scheme)
	}
	return urls
}

// An event is what came from the process's side: a connection opened
// (open), a command (a method, with its content if it has one), or a
// connection gone.
type event struct {
	c    *wireConn
	kind eventKind
	cmd  command
	err  error         // gone: why
	call func()        // a call: what to run in the World (Do)
	done chan struct{} // a call: closed once it ran
}

type eventKind int

const (
	evOpen eventKind = iota
	evCommand
	evGone
	evCall
)

// Do runs f in the process's coroutine, as one of its steps (logged
// "call"), where f may use the World and the process's view of it: a
// harness beside the process's client (the wire differential's queue
// listings and faults) does so. It returns once f has run, or ran never
// because the process ended.
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

func (p *Process) take() (event, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.events) == 0 {
		return event{}, false
	}
	e := p.events[0]
	p.events = p.events[1:]
	return e, true
}

// live takes the next event of a connection still served: one that
// ended on the served broker's side (it closed it, or reset it) has
// nothing more to say to the World, and its socket's end is no step. Nor
// is what comes on a connection the broker is closing once the World's
// side of it is gone: RabbitMQ reads only its close-ok, which ends it
// here. A client racing its own threads (amqp091-go's reader answers the
// close while its caller may still send a publish) sends these in either
// order from run to run; as steps, they would make a replay diverge where
// the World saw nothing different.
func (p *Process) live() (event, bool) {
	for {
		e, ok := p.take()
		switch {
		case !ok || e.kind == evCall:
			return e, ok
		case e.c.dead:
		case e.c.closing && (e.c.conn == nil || e.c.conn.Err() != nil):
			e.c.take(e)
		default:
			return e, true
		}
	}
}

// accept takes the process's connections through ln, pt's listener, until
// it closes.
func (p *Process) accept(pt *wire.Port[string], ln net.Listener) {
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
		c := newWireConn(p, len(p.conns)+1, nc)
		if pt.Key != p.ports[0].Key {
			c.node = pt.Key // another node's port
		}
		p.conns = append(p.conns, c)
		p.wg.Add(1)
		p.mu.Unlock()
		go c.serve()
	}
}

// close ends the port and every connection of the process.
func (p *Process) close() {
	p.mu.Lock()
	if !p.ended {
		close(p.gone)
	}
	p.ended = true
	conns := p.conns
	p.mu.Unlock()
	wire.Close(p.ports)
	for _, c := range conns {
		c.halt()
	}
}

// listen opens and closes the process's ports as their nodes take
// connections or refuse them (World.Listens), so that a dial to a node
// that is down is refused as a real one's is, before any byte. In the
// World, as flush.
func (p *Process) listen() {
	for _, pt := range p.ports {
		up := p.s.w.Listens(pt.Key)
		p.mu.Lock()
		if !p.ended {
			err := pt.Follow(up, func(ln net.Listener) {
				p.wg.Add(1)
				go p.accept(pt, ln)
			})
			if err != nil {
				p.s.Refuse("%s: its port %s for %s could not be opened again: %v", p.name, pt.Addr, pt.Key, err)
			}
		}
		p.mu.Unlock()
	}
}

// Sending is the waiter's: before the runner writes to the process, what
// the broker did to its connections meanwhile reaches the wire (a close
// the broker sent, a heartbeat timeout the process's client would have
// noticed).
func (p *Process) Sending() { p.flush() }

// Await is the waiter's: until ready (the process answered) or expired or
// done, the coroutine takes the process's steps into the World.
func (p *Process) Await(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) process.Woke {
	return p.AwaitUntil(math.MaxInt64, ready, expired, done)
}

// Deadline is the waiter's (process.ClockedWaiter): when d of the World's
// virtual time will have passed. It keeps d for AwaitUntil's real-time
// bound in a search.
func (p *Process) Deadline(d time.Duration) int64 {
	p.bound = d
	return p.s.w.Now() + int64(d)
}

// A standstill is a search's real-time bound on an operation
// (Options.Settle): its bound d of the machine's time without an idle
// turn of the process's. Where it idles (a wait on a consumer), the
// World's clock runs and the World's bound decides alone, however slowly
// the machine goes; where it goes on sending without a pause long enough
// to idle (a poll between requests on a timer of the process's own, whose
// silences cost no virtual time in a search, the World's clock moving
// only by the latencies of the methods it sends), the run cannot be
// judged on the World's clock.
type standstill struct {
	p     *Process
	timer *time.Timer
}

func (p *Process) standstill() *standstill {
	return &standstill{p: p, timer: time.NewTimer(p.bound)}
}

// idled starts the bound again: the process let the World's time pass.
func (s *standstill) idled() { s.timer.Reset(s.p.bound) }

// undecide notes why the run cannot be judged.
func (s *standstill) undecide() {
	s.p.s.Undecide("%s: no idle turn in its operation's bound of %v of the machine's time, the World's clock at %v: a process waiting on a timer of its own (a poll between requests) lets no virtual time pass in a search", s.p.name, s.p.bound, time.Duration(s.p.s.w.Now()))
}

// AwaitUntil is Await that also ends, Expired, once the World's virtual
// time reaches deadline, checked at each idle turn of a process the
// protocol shows waiting on the World (waits: a consumer of its): an
// operation waiting on a consumer is given up at the same virtual time in
// every run, not when the machine's clock says, which on a loaded machine
// falls at another point of the World's time, or before the World's own
// timers (an admin's wait outlasted by 90 s of idle turns). A process
// silent with no consumer may be computing, and its idle turns pass five
// times faster than the machine's clock: it is bounded by the machine's
// (and in a search by Settle). In a search's run the real-time expired is
// not heeded, but a standstill is; and once the run is undecided, every
// operation ends at once: it will not be judged.
func (p *Process) AwaitUntil(deadline int64, ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) process.Woke {
	var still *standstill
	if p.s.o.Settle > 0 && deadline != math.MaxInt64 {
		still = p.standstill()
		defer still.timer.Stop()
		expired = still.timer.C
	}
	for {
		p.flush()
		if still != nil && len(p.s.Undecided()) > 0 {
			return process.Expired
		}
		st, e := p.next(ready, expired, done)
		p.moved = p.moved || st == stepReady || st == stepEvent
		switch st {
		case stepReady:
			p.s.Took(p.name, "ready")
			return process.Ready
		case stepExpired:
			if still != nil {
				still.undecide()
			}
			return process.Expired
		case stepDone:
			return process.Done
		case stepIdle:
			p.s.Took(p.name, "idle") // logged, so that a replay expires here too
			p.idled = true
			if p.waits() && p.s.w.Now() >= deadline {
				return process.Expired
			}
			if still != nil {
				still.idled()
			}
			p.Sleep(context.Background(), p.s.o.Idle)
		case stepEvent:
			p.takeStep(e)
		}
	}
}

// takeStep takes the process's event e into the World, as its step.
func (p *Process) takeStep(e event) {
	p.s.Took(p.name, e.fingerprint())
	p.idled = false
	if e.kind == evCall {
		e.call()
		p.flush() // what it did reaches the wire before the caller goes on
		close(e.done)
		return
	}
	p.serving = e.c
	e.c.handle(e)
	p.serving = nil
}

// Abandon is the process's client giving up on the frame the World holds
// (a method on a queue whose node is out of reach, say): its connection's
// socket closes, as a client closes it whose own timeout passed
// (amqp091-go's callers tear the connection down), and the held method
// ends with it. Call it in the World, where the client's timeout is an
// event of the World's clock (a timer's callback, After): the coroutine
// is then held in the World, serving that frame. Without such a frame it
// does nothing.
func (p *Process) Abandon() error {
	c := p.serving
	switch {
	case c == nil || c.conn != nil && c.conn.Err() != nil:
		return nil
	case c.conn == nil: // its connection.open: a dial the World holds
		c.retire()
		p.s.w.Expire(p.name)
		return nil
	}
	n, ok := c.conn.(interface{ Name() string })
	if !ok {
		return fmt.Errorf("served broker: %s has no name in the World", c)
	}
	// Nothing more reaches the client on the wire: it has torn the
	// connection down already, and its own deadline, not what the broker
	// answers the held method, is what it reports.
	c.retire()
	if p.s.w.Expire(p.name) {
		return nil // as at a deadline in the World: a Khepri write kept
	}
	return p.s.w.CloseSocket(n.Name())
}

type step int

const (
	stepReady step = iota
	stepExpired
	stepDone
	stepIdle
	stepEvent
)

// next is the process's next step: its log's next while it replays, else
// what comes first.
func (p *Process) next(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) (step, event) {
	if len(p.script) > 0 {
		if st, e, ok := p.replay(ready, expired, done); ok {
			return st, e
		}
	}
	quiet, settling := p.s.o.Grace, false
	switch {
	case p.s.o.Settle > 0 && !p.waits():
		quiet, settling = p.s.o.Settle, true
	case p.idled:
		quiet = p.s.o.Quiet
	case !p.moved:
		quiet = p.s.o.Start
	}
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		if e, ok := p.live(); ok {
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
			if settling {
				p.s.Undecide("%s sent nothing for %v with an operation in flight, and the protocol showed it waiting on nothing (no consumer of its): it may have been computing still, or waiting on a timer of its own", p.name, quiet)
			}
			return stepIdle, event{}
		}
	}
}

// waits says whether the protocol shows the process waiting on the
// broker, with nothing to send until the World moves: a consumer of its,
// on a channel still open, awaits a delivery. The served broker answers
// every other method at once, in the step that took it (a synchronous
// method's -ok, a publish's confirm, a get's message), and a close it
// sends is answered by the client's close-ok; so a process with no
// consumer, while its operation is in flight, has a frame to send or its
// answer to write.
func (p *Process) waits() bool {
	p.mu.Lock()
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		if c.dead || c.closing || c.conn == nil || c.conn.Err() != nil {
			continue
		}
		for _, ch := range c.chans {
			if !ch.closing && len(ch.consumers) > 0 {
				return true
			}
		}
	}
	return false
}
