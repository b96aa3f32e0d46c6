package rabbitmqsim

// Held methods: a method that needs a node cut off from its connection's
// node (a queue's process there, a record write that node must take) is
// held until that node is declared down or reachable again.

import (
	"context"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/sched"
)

// stall is a method held at its connection's node until a node it needs
// (a queue's home, a peer that must take a record's write) is declared
// down or reachable again.
type stall struct {
	p   *process // nil once its process gave up on it
	c   *conn
	r   request
	pre *reply  // a publish routed when sent, confirmed when released
	on  []*node // a publish's queues' homes
	// Khepri mode, a write sent to Khepri: the node it commits through,
	// the queue it deletes (busy meanwhile), whether it is lost, and its
	// KhepriTimeout (cluster.gate).
	by    *node
	kq    *queue
	lost  bool
	timer *sched.Timer
	// Khepri mode, a publish to a queue of a live node out of reach
	// (cluster.publishWaits): waited, that it waited for the node's
	// declaring down; attempt, the end of the connection attempt to
	// that node it waits for since, and failed, that the attempt ended;
	// nack, that it is nacked (pre).
	waited, failed, nack bool
	attempt              *sched.Timer
	routed               []*queue // 4.0.5: where it was first routed (routedTo)
	// kept is a Khepri write its client gave up on that still commits
	// when its node can (cluster.keepWrite).
	kept bool
}

// stallIfCut holds p's method r on c while the node it needs is cut off
// from c's node and not yet declared down (a call to a queue's process
// on that node, a record write that node must take), and says whether it
// did: classic queue calls wait with no timeout, and Mnesia transactions
// wait for every node they count as running.
func (w *World) stallIfCut(p *process, c *conn, r *request, deadline int64) bool {
	if w.cl.khepri() {
		return w.khepriHold(p, c, r, deadline)
	}
	s := &stall{p: p, c: c, r: *r}
	if r.m == mBasicPublish {
		targets, _, bad := w.targets(c, r.pub)
		if bad || r.pub.Immediate {
			return false
		}
		var reached []*queue
		for _, q := range targets {
			if w.cl.cutFrom(c.node, q.home) {
				s.on = append(s.on, q.home)
			} else {
				reached = append(reached, q)
			}
		}
		if len(s.on) == 0 {
			return false
		}
		// Routed now (to a queue whose process does not answer), nacked
		// once the node is declared down: the channel's monitor of the
		// queue's process fires (noconnection) and rejects what it had
		// sent there unconfirmed (broker-semantics.md C.24).
		rep := w.deliver(r.pub, reached, true)
		rep.conf.Returned, rep.conf.Acked = false, false
		s.pre = &rep
	} else if !w.cl.waits(c, r) {
		return false
	}
	if w.trace != nil {
		w.tracef("%s %s ch%d %s %s held: a node it needs is cut off from %s", p.name, c.name, chanID(r.ch), r.m, r.queue, c.node.name)
	}
	w.cl.stalls = append(w.cl.stalls, s)
	p.proc.Block()
	if deadline != noDeadline {
		p.deadline = w.sched.At(deadline, func() { w.abandonStall(s) })
	}
	return true
}

// waits says r on c needs a node cut off from c's node.
func (cl *cluster) waits(c *conn, r *request) bool {
	x := c.node
	switch r.m {
	case mQueueDeclare, mQueueDelete, mBasicConsume, mBasicGet, mQueuePurge, mQueueBind:
	default:
		return false
	}
	q := x.view[r.queue]
	if q != nil {
		locked := heldByOther(q, c) || r.m == mQueueDeclare && !r.declare.Passive && r.declare.Exclusive != (q.owner != nil)
		if locked {
			return false // refused on the record alone
		}
		if cl.cutFrom(x, q.home) {
			return true
		}
	}
	write := r.m == mQueueDeclare && !r.declare.Passive && q == nil || r.m == mQueueDelete && q != nil
	if write {
		for j, run := range x.running {
			if run && cl.cutFrom(x, cl.nodes[j]) {
				return true
			}
		}
	}
	return false
}

// abandonStall ends a held method's wait when its context's deadline
// passes, as abandon does for one held by a partition.
func (w *World) abandonStall(s *stall) {
	p, c := s.p, s.c
	if p == nil {
		return
	}
	p.deadline = nil
	s.p = nil
	if w.cl.khepri() {
		w.cl.keepWrite(s)
	}
	err := &broker.Error{Code: broker.FrameError, Reason: "context deadline exceeded; connection torn down", Connection: true}
	w.clientClose(c, err)
	w.fin(c)
	p.proc.Deliver(reply{err: deadlineErr{err}})
}

// failStalls fails the held methods of c, which closed for its client.
func (cl *cluster) failStalls(c *conn, err error) {
	for _, s := range cl.stalls {
		if s.c == c && s.p != nil {
			s.p.deadline.Cancel()
			s.p.proc.Deliver(reply{err: err})
			s.p = nil
		}
	}
}

// retry releases the held methods whose nodes are now declared down or
// reachable, in the order they were sent.
func (cl *cluster) retry() {
	w := cl.w
	held := cl.stalls
	cl.stalls = nil
	for _, s := range held {
		if s.p == nil {
			if s.kept && !cl.commits(s.by) {
				cl.stalls = append(cl.stalls, s)
			} else if s.kept {
				cl.commitKept(s)
			}
			continue
		}
		if s.c.clientErr != nil {
			s.p.deadline.Cancel()
			s.p.proc.Deliver(reply{err: s.c.clientErr})
			continue
		}
		still := false
		switch {
		case cl.khepri():
			still = cl.gate(s)
		case s.pre != nil:
			for _, h := range s.on {
				still = still || cl.cutFrom(s.c.node, h)
			}
		default:
			still = cl.waits(s.c, &s.r)
		}
		if still || s.c.held() {
			cl.stalls = append(cl.stalls, s)
			continue
		}
		p := s.p
		s.p = nil
		if s.timer != nil {
			// A write Khepri commits now.
			s.timer.Cancel()
			s.timer = nil
			if s.kq != nil {
				s.kq.busy = false
			}
		}
		var rep reply
		switch {
		case s.kq != nil && s.kq.freed && s.r.m == mQueueDelete:
			rep = w.freedDelete(s.c, s.kq)
		case s.pre != nil:
			rep = w.answered(s.c, s.r, *s.pre)
		default:
			rep = w.arrive(s.c, &s.r)
		}
		p.deadline.Cancel()
		p.deadline = nil
		p.proc.Deliver(rep)
		if hook := p.dueHook(); hook != nil {
			hook()
		}
	}
}

// answered is what the client of c gets for r, a method the broker
// answered with rep (a publish confirmed late), as arrive would.
func (w *World) answered(c *conn, r request, rep reply) reply {
	w.now += int64(rep.cost)
	c.lastRecv = w.now
	if w.trace != nil {
		w.tracef("%s %s ch%d %s %s -> %s", c.p.name, c.name, chanID(r.ch), r.m, r.queue, describe(r.m, rep))
	}
	return rep
}

// Expire is the deadline of process name's held method passing now: what
// the World does at a context's deadline (a held dial fails; the method a
// partition or a node out of reach holds is abandoned and its connection
// torn down, as
// the amqp091-go adapter tears it down; a write a Khepri minority holds is
// kept) happens, as if the method had been called with that deadline. It
// is for a client on the wire whose own timeout passed (adapters/served):
// call it in the World (a timer's callback). It says whether the process
// had a held method.
func (w *World) Expire(name string) bool {
	p := w.byName[name]
	if p == nil {
		return false
	}
	if dw := p.dialWait; dw != nil { // a dial a partition or a paused node holds
		p.dialWait = nil
		dw.timer.Cancel()
		p.proc.Deliver(reply{err: context.DeadlineExceeded})
		return true
	}
	if w.cl != nil {
		for _, s := range w.cl.stalls {
			if s.p == p {
				p.deadline.Cancel()
				w.abandonStall(s)
				return true
			}
		}
	}
	for _, c := range p.conns {
		for _, o := range c.outbox {
			if o.p == p {
				p.deadline.Cancel()
				w.abandon(p, c)
				return true
			}
		}
	}
	return false
}
