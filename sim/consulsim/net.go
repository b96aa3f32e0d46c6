package consulsim

import (
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/sched"
)

// A result is the server's answer to one call, as the Backend returns it.
type result struct {
	tok string
	ttl time.Duration
	ok  bool
	n   uint64
	l   consulsem.Listing
	api APIReply
	err error
}

// netError is the failure to get an answer.
type netError struct {
	msg     string
	timeout bool
}

func (e *netError) Error() string { return "consulsim: " + e.msg }

// Timeout says whether the answer did not come in time, as net.Error.
func (e *netError) Timeout() bool { return e.timeout }

var (
	errRefused = &netError{msg: "dial tcp: connect: connection refused (server down)"}
	errReset   = &netError{msg: "read: connection reset by peer"}
	errTimeout = &netError{msg: "i/o timeout", timeout: true}
)

// A call is one request of a client to the server and its answer.
type call struct {
	p    *Process
	what string               // for the trace
	op   func(*server, *call) // applies it on the server, answering now or later
	wait time.Duration        // how long the server may hold it (a wait for a change)
	conn int                  // the connection it was posted on (Process.conn)

	node    string       // a cluster's node it goes through ("": its process's)
	stale   bool         // a stale listing (a cluster's servers off the majority's side answer it)
	timer   *sched.Timer // the client's timeout
	arrived bool         // its answer reached the client's side (or was lost)
	done    bool         // the client has its result
	// then, if set, gets the result of a call the process did not wait
	// for (Send); await, a Wait's, is no call but the process's wait for
	// such results, d at most.
	then  func(result)
	await bool
	d     time.Duration
}

// send posts c to the server: held by a partition, refused by a server
// that is down, or applied now. A call whose connection the server has
// closed meanwhile (held by a partition at the time) is lost with it.
func (w *World) send(c *call) {
	p := c.p
	if c.conn != p.conn {
		w.tracef("%s -> server: %s is lost with its connection", p.Name(), c.what)
		return
	}
	if w.o.Timeout > 0 && c.timer == nil {
		c.timer = w.sched.After(w.o.Timeout+c.wait, func() {
			if !c.done {
				w.tracef("%s: %s timed out", p.Name(), c.what)
				w.deliver(c, result{err: errTimeout})
			}
		})
	}
	if p.proc.Link().Cut() {
		w.tracef("%s -> server: %s waits for the partition to heal", p.Name(), c.what)
		p.proc.Link().Hold(func() { w.send(c) })
		return
	}
	if w.cl != nil && w.cl.route(c) {
		return
	}
	s := w.srv
	if s.down {
		w.tracef("%s -> server: %s: connection refused (server down)", p.Name(), c.what)
		w.sched.After(refusedTime, func() { w.deliver(c, result{err: errRefused}) })
		return
	}
	w.tracef("%s -> server: %s", p.Name(), c.what)
	s.inflight = append(s.inflight, c)
	if w.cl != nil {
		w.cl.apply(c)
		return
	}
	c.op(s, c)
}

// reply sends the server's answer to c back: it reaches the client after
// the call's time.
func (w *World) reply(c *call, r result) {
	w.sched.After(callTime, func() { w.arrive(c, r) })
}

// arrive is c's answer reaching the client's side: a reply the fault
// lost resets the connection; a partition holds it.
func (w *World) arrive(c *call, r result) {
	if c.arrived {
		return
	}
	c.arrived = true
	w.srv.forget(c)
	p := c.p
	if p.drop && r.err != errReset {
		p.drop = false
		w.tracef("server -> %s: the reply to %s is lost, the connection reset", p.Name(), c.what)
		r = result{err: errReset}
		if w.o.OnDrop != nil {
			w.o.OnDrop(p.Name())
		}
	}
	if w.cl != nil && w.cl.answerHeld(c, func() { w.deliver(c, r) }) {
		return
	}
	if p.proc.Link().Cut() {
		p.proc.Link().Hold(func() { w.deliver(c, r) })
		return
	}
	w.deliver(c, r)
}

// deliver gives the client its result, unless it has one already.
func (w *World) deliver(c *call, r result) {
	if c.done {
		return
	}
	c.done = true
	c.timer.Cancel()
	if c.then != nil {
		c.then(r)
		c.p.repliedTo()
		return
	}
	c.p.proc.Deliver(r)
}
