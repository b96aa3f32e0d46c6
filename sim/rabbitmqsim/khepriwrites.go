package rabbitmqsim

// Khepri's gate on methods: what waits, and how long, on a Khepri cluster
// (a write its node cannot commit now, a method that needs a queue's process
// out of reach or busy, a publish to a queue of a node out of reach), what
// a write its client gave up on still does, and the 541 that ends a write
// Khepri did not commit in time. The mode itself is in khepri.go.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// khepriHold holds p's method r on c where Khepri makes it wait (gate),
// and says whether it did.
func (w *World) khepriHold(p *process, c *conn, r *request, deadline int64) bool {
	s := &stall{p: p, c: c, r: *r}
	if !w.cl.gate(s) {
		return false
	}
	w.holdStall(s, deadline)
	return true
}

// holdStall blocks s's process until s is released (retry), it times
// out in Khepri (timedOut), or its context's deadline passes.
func (w *World) holdStall(s *stall, deadline int64) {
	p := s.p
	if w.trace != nil {
		why := "a queue's process it needs is out of reach or busy"
		if s.timer != nil {
			why = "its write waits for Khepri through " + s.by.name
		}
		w.tracef("%s %s ch%d %s %s held: %s", p.name, s.c.name, chanID(s.r.ch), s.r.m, s.r.queue, why)
	}
	w.cl.stalls = append(w.cl.stalls, s)
	p.proc.Block()
	if deadline != noDeadline {
		p.deadline = w.sched.At(deadline, func() { w.abandonStall(s) })
	}
}

// gate says whether s's method must wait on a Khepri cluster: it needs a
// queue's process out of reach or busy (processWaits), or it is a write
// its node cannot commit now. A write that waits is sent to Khepri once,
// then: lost if its node reaches no majority then, and either way ended
// by timedOut after KhepriTimeout unless it commits first.
func (cl *cluster) gate(s *stall) bool {
	if s.timer != nil {
		return s.lost || !cl.commits(s.by)
	}
	if s.r.m == mBasicPublish {
		return cl.publishWaits(s)
	}
	if cl.processWaits(s.c, &s.r) {
		return true
	}
	by, q := cl.writer(s.c, &s.r)
	if by == nil || cl.commits(by) {
		return false
	}
	s.by, s.lost = by, cl.lostWrite(by)
	if q != nil {
		q.busy, s.kq = true, q
	}
	s.timer = cl.w.sched.After(KhepriTimeout, func() { cl.timedOut(s) })
	return true
}

// NetSetup is Erlang's net_setuptime: how long a node's attempt to
// connect to a peer lasts when the peer does not answer. A node that
// declared a live peer down (cut off, or paused) tries again and again,
// an attempt after another, the first attemptDelay after the declaring
// down (broker-semantics.md K.10).
const NetSetup = 7 * time.Second

// attemptDelay is, times a pick of 1 to 10, when after declaring a peer
// down a node begins to connect to it again: 0.1 to 1 s.
const attemptDelay = 100 * time.Millisecond

// publishWaits says whether the publish s must wait, or is settled now:
// RabbitMQ's channel monitors the process of a classic queue it sends to
// under confirms, and settles what it sent there when the monitor fires
// (rabbit_classic_queue: ensure_monitor, handle_event down). A publish to
// a queue of a live node c's node cannot reach waits until that node is
// declared down, and is then nacked. One sent after that waits for the
// connection attempt to the node under way, and is nacked when it fails,
// whether or not the channel sent to the queue before (K.10). A node
// reached again before then takes it (not measured). A nacked message
// may still reach the queue at the heal (K.10): it is dropped here, as
// the differential does not read a queue's messages. A publish to a queue
// whose node was killed is nacked at once (deliver: its process is gone).
func (cl *cluster) publishWaits(s *stall) bool {
	if s.nack {
		return false
	}
	c, r := s.c, &s.r
	targets, _, bad := cl.w.targets(c, r.pub)
	if bad || r.pub.Immediate {
		return false
	}
	if cl.khepri40 {
		targets = s.routedTo(cl.w, targets)
	}
	x := c.node
	var reached []*queue
	var ends int64
	for _, q := range targets {
		h := q.home
		if h == x || !h.alive() || cl.reach(x, h) {
			reached = append(reached, q)
			continue
		}
		if x.conn[h.i] {
			s.waited = true
			return true
		}
		// The attempt under way ends NetSetup after the last one did,
		// the first NetSetup after they began.
		if x.attempts[h.i] == 0 {
			x.attempts[h.i] = int64(attemptDelay) * int64(1+cl.w.pick(10))
		}
		end := x.downAt[h.i] + x.attempts[h.i] + int64(NetSetup)
		if now := cl.w.now; end <= now {
			end += ((now-end)/int64(NetSetup) + 1) * int64(NetSetup)
		}
		ends = max(ends, end)
	}
	if ends == 0 {
		s.attempt.Cancel()
		s.attempt = nil
		return false
	}
	if s.waited || s.failed {
		// Nacked: the reached queues have the message.
		rep := cl.w.deliver(r.pub, reached, len(targets) > 0)
		rep.conf.Acked, rep.conf.Returned = false, false
		s.pre, s.nack = &rep, true
		return false
	}
	if s.attempt == nil {
		s.attempt = cl.w.sched.At(ends, func() {
			s.attempt, s.failed = nil, true
			cl.retry()
		})
	}
	return true
}

// processWaits says r on c needs the process of a queue it names that is
// busy, gone (wedged), or on a node c's node cannot reach: RabbitMQ asks
// the queue's process for a passive declare (before it looks at the
// owner), a redeclare, a delete, a consume, a get, a purge (K.4b: no
// answer while the queue's node was cut off). A redeclare refused on the
// record does not wait (K.2). Publishes: publishWaits.
func (cl *cluster) processWaits(c *conn, r *request) bool {
	x := c.node
	q := x.view[r.queue]
	if q == nil {
		return false
	}
	switch r.m {
	case mQueueDeclare:
		if !r.declare.Passive && refusedOnRecord(q, c, r.declare) {
			return false
		}
	case mQueueDelete:
		if heldByOther(q, c) || cl.lostTo(x, q) {
			return false
		}
	case mBasicConsume, mBasicGet, mQueuePurge:
		if heldByOther(q, c) {
			return false
		}
	default:
		return false
	}
	return q.busy || q.wedged || q.home != x && !cl.reach(x, q.home)
}

// refusedOnRecord says a declare o of q by c is refused from q's record
// alone (405, 406), as declare refuses it.
func refusedOnRecord(q *queue, c *conn, o broker.DeclareOptions) bool {
	if heldByOther(q, c) || o.Exclusive != (q.owner != nil) {
		return true
	}
	if q.durable != (o.Durable && !o.Exclusive) || q.autoDelete != o.AutoDelete {
		return true
	}
	_, bad := argsDiffer(q.name, o.Args, q.args)
	return bad
}

// lostTo says x has declared down the node of q (killed, or cut off and
// out of reach): a delete of q through x then deletes its record through
// x, asking no process, and is answered at once (the differential on
// 4.3.6: docs/rabbitmq-cluster.md).
func (cl *cluster) lostTo(x *node, q *queue) bool {
	h := q.home
	return h != x && !x.conn[h.i] && !cl.reach(x, h)
}

// writer is the node through which r on c writes to the store, and the
// queue it deletes, if any: a declare of a queue c's node has no record
// of (the queue will live there), a delete (by the queue's own node, its
// process deleting its record), a binding; nil if r writes nothing.
func (cl *cluster) writer(c *conn, r *request) (*node, *queue) {
	x := c.node
	q := x.view[r.queue]
	switch r.m {
	case mQueueDeclare:
		if r.declare.Passive || q != nil || strings.HasPrefix(r.queue, "amq.") {
			return nil, nil
		}
		if _, bad := invalidArgs(r.declare.Args); bad {
			return nil, nil
		}
		return x, nil
	case mQueueDelete:
		if q == nil || heldByOther(q, c) || r.delete.IfUnused && len(q.consumers) > 0 || r.delete.IfEmpty && len(q.msgs) > 0 {
			return nil, nil
		}
		if cl.lostTo(x, q) {
			return x, nil // no process is asked: the queue is not busy meanwhile
		}
		return q.home, q
	case mQueueBind:
		if _, ok := exchanges[r.pub.Exchange]; q == nil || heldByOther(q, c) || !ok {
			return nil, nil
		}
		return x, nil
	}
	return nil, nil
}

// keepWrite is s's client giving up on it (its deadline passed, its
// connection torn down): a write sent through a node that reaches a
// majority but not the leader (a bridge), or that hears a majority but
// is not heard (cut one way), may still commit once the node can, by the
// seed (the differential on 4.3.6: docs/rabbitmq-cluster.md). One through
// a node that hears no majority is lost (K.8: not retried at the heal).
func (cl *cluster) keepWrite(s *stall) {
	if s.timer == nil || s.lost && !cl.hearsMajority(s.by) || s.r.m == mQueueDeclare && s.r.declare.Exclusive {
		return
	}
	s.kept = cl.w.pick(2) == 1
}

// commitKept commits s, a write its client gave up on (keepWrite), now
// that its node can: what it declares, deletes or binds is done, and
// no one is answered.
func (cl *cluster) commitKept(s *stall) {
	w := cl.w
	s.kept = false
	s.timer.Cancel()
	s.timer = nil
	if s.kq != nil {
		s.kq.busy = false
	}
	if w.trace != nil {
		w.tracef("%s %s %s %s, given up by its client, commits", s.c.p.name, s.c.name, s.r.m, s.r.queue)
	}
	switch s.r.m {
	case mQueueDeclare:
		w.declare(s.c, s.r.queue, s.r.declare)
	case mQueueDelete:
		w.deleteQ(s.c, s.r.queue, s.r.delete)
	case mQueueBind:
		w.bind(s.c, s.r.queue, s.r.pub.Exchange, s.r.pub.Key)
	}
}

// timedOut ends s, a write Khepri did not commit within KhepriTimeout:
// a queue it deleted keeps its record, with no process (wedge), and the
// node closes the client's connection with 541 (K.4, K.8).
func (cl *cluster) timedOut(s *stall) {
	w := cl.w
	s.timer, s.kept = nil, false
	waiting := slices.Contains(cl.stalls, s) && s.p != nil
	cl.stalls = slices.DeleteFunc(cl.stalls, func(x *stall) bool { return x == s })
	if s.kq != nil {
		cl.wedge(s.kq)
	}
	c := s.c
	text := "INTERNAL_ERROR - the metadata store operation timed out at 30.0s"
	switch s.r.m {
	case mQueueDeclare:
		text = fmt.Sprintf("INTERNAL_ERROR - Could not declare queue '%s' in vhost '/' because the metadata store operation timed out at 30.0s", s.r.queue)
	case mQueueDelete:
		text = "INTERNAL_ERROR - The operation to delete the queue from the metadata store timed out at 30.0s"
	}
	err := &broker.Error{Code: internalError, Reason: text, Server: true, Connection: true}
	cl.forceClose(c, "the metadata store operation timed out", internalError, text)
	if p := s.p; waiting {
		s.p = nil
		p.deadline.Cancel()
		p.deadline = nil
		w.clientClose(c, err)
		p.proc.Deliver(reply{err: err})
	} else {
		w.notifyClose(c, err)
	}
	cl.retry()
}

// gateOutbox is heal's look at a request a paused node or a cut link held
// on c, on a Khepri cluster: if it must wait (gate), it waits as a stall
// of its own and gateOutbox says so; one whose process gave up on it is
// dropped then.
func (w *World) gateOutbox(c *conn, pd pending) bool {
	if w.cl == nil || !w.cl.khepri() {
		return false
	}
	s := &stall{p: pd.p, c: c, r: pd.r}
	if !w.cl.gate(s) {
		return false
	}
	if pd.p != nil {
		pd.p.deadline.Cancel()
		pd.p.deadline = nil
		w.holdStall(s, pd.r.deadline)
	}
	return true
}
