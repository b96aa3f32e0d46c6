package consulsim

import (
	"fmt"
	"slices"
	"time"
)

// The agent served on the wire (adapters/served/consulserve): what a
// connection of a real client sends is an APIRequest, sent without
// waiting (Process.Send) as each connection has its own request in
// flight, its reply handed back when it comes; the process waits for
// replies (Process.Wait) while its client's operation is in flight.

// Send sends r to the agent without waiting for its reply (a scheduling
// point of the process): done is called in the World with the reply, or
// with the connection's failure (a reset, a refusal, the agent down),
// unless the request was abandoned first. The returned abandon is the
// connection's close: a blocking read the agent holds is forgotten; call
// it from the process.
func (p *Process) Send(r APIRequest, done func(APIReply, error)) (abandon func()) {
	c := &call{p: p, what: r.String(), wait: r.blocking(), conn: p.conn,
		op:   func(s *server, c *call) { s.api(c, r) },
		then: func(res result) { done(res.api, res.err) }}
	p.req = c
	p.w.base.Call(p, true)
	return func() { p.w.abandon(c) }
}

// Wait blocks the process until a reply to one of its Sends comes, or d
// (positive) of virtual time has passed: whether a reply came (one that
// came since its last Wait counts).
func (p *Process) Wait(d time.Duration) bool {
	if d <= 0 {
		panic(fmt.Sprintf("consulsim: Wait(%v): want a positive bound", d))
	}
	p.req = &call{p: p, await: true, d: d}
	rep, _ := p.w.base.Call(p, true)
	return rep.ok
}

// startWait starts p's Wait of d (p is blocked).
func (w *World) startWait(p *Process, d time.Duration) {
	if p.replied {
		p.replied = false
		p.proc.Deliver(result{ok: true})
		return
	}
	p.waiting = w.sched.After(d, func() {
		p.waiting = nil
		if !p.proc.Killed() {
			p.proc.Deliver(result{})
		}
	})
}

// repliedTo wakes the process if it waits for its Sends' replies, or
// notes the reply for its next Wait.
func (p *Process) repliedTo() {
	if t := p.waiting; t != nil {
		p.waiting = nil
		t.Cancel()
		if !p.proc.Killed() {
			p.proc.Deliver(result{ok: true})
		}
		return
	}
	p.replied = true
}

// abandon forgets c, a Send's call whose connection closed: its result
// is not handed back, and a read the agent holds for it ends.
func (w *World) abandon(c *call) {
	if c.done {
		return
	}
	c.done = true
	c.timer.Cancel()
	s := w.srv
	s.forget(c)
	s.watches = slices.DeleteFunc(s.watches, func(wt *watch) bool {
		if wt.c == c {
			wt.timer.Cancel()
		}
		return wt.c == c
	})
}

// Up says whether the agent takes connections, and how many times it has
// gone down so far: a connection made before the last time is one its
// crash closed.
func (w *World) Up() (up bool, downs int) { return !w.srv.down, w.srv.gen }

// Connection counts the process's connections the agent closed
// (ForceClose): a connection made before the count last moved is closed.
func (p *Process) Connection() int { return p.conn }
