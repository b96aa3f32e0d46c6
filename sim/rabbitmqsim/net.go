package rabbitmqsim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/sched"
)

// Latencies measured on loopback against RabbitMQ 3.10 (broker-semantics.md
// section 3, p50). The clock moves by them; their exact values matter only
// in proportion to heartbeat intervals.
const (
	latDial      = 4 * time.Millisecond
	latRefused   = 100 * time.Microsecond
	latChanOpen  = 400 * time.Microsecond
	latChanClose = 200 * time.Microsecond
	latConfirm   = 100 * time.Microsecond
	latLookup    = 60 * time.Microsecond // declare or delete that finds nothing to do
	latCreate    = 2 * time.Millisecond  // declare that creates a queue
	latDelete    = 1500 * time.Microsecond
	latChanError = 400 * time.Microsecond // a reply that is a channel.close
	latPublish   = 85 * time.Microsecond
	latPersist   = 300 * time.Microsecond // persistent message into a durable queue
	latConnClose = 300 * time.Microsecond // plus latDelete per exclusive queue
	latSmall     = 100 * time.Microsecond // consume, get, purge, bind
	dialTimeout  = 30 * time.Second       // amqp091-go's default
)

// finDelays are how long the broker took to release exclusive queues after a
// client's socket closed without an AMQP close (case 7a': min, p50, p90,
// p99, max); the Decider picks one.
var finDelays = [...]time.Duration{5400 * time.Microsecond, 7400 * time.Microsecond, 13400 * time.Microsecond, 21300 * time.Microsecond, 36800 * time.Microsecond}

// A conn is one AMQP connection: the client's view and the broker's view
// of it, and the link between them.
type conn struct {
	id     int
	name   string
	p      *process
	hb     time.Duration // negotiated heartbeat; 0 means none
	opened int64
	chans  []*channel
	owned  []*queue // exclusive queues, in creation order

	clientErr    error // set once the client knows the connection is closed
	brokerOpen   bool
	down         bool      // partitioned: no bytes pass either way
	pendingClose error     // a close the broker sent that has not reached the client
	finPending   bool      // the client closed its socket while the link was down
	outbox       []pending // requests held by a partition
	node         *node     // on a cluster, the node it is connected to

	lastSent, lastRecv int64 // last bytes from the client / to the client
	sendSilent         bool  // no bytes reach the broker (pause, partition, kill)
	recvSilent         bool  // no bytes reach the client process (pause, partition)
	readDeadline       int64 // when the client's read deadline expires while recvSilent
	expired            bool  // the read deadline passed while the process was paused
	brokerTimer        *sched.Timer
	clientTimer        *sched.Timer
	releaseTimer       *sched.Timer
}

// pending is a request held by a partition. p is nil once its sender gave
// up (the bytes still reach the broker at heal, as TCP retransmits them).
type pending struct {
	p *process
	r request
}

// A channel is one AMQP channel of a conn.
type channel struct {
	id        int
	c         *conn
	closedErr error // set once the client knows the channel is closed
	open      bool  // broker's view
	confirm   bool
	consumers []*consumer
	unacked   []delivery
	tags      uint64 // deliveries made on the channel: the last one's tag
}

// A delivery is a message given to a channel (a get, a consumer's) and
// not yet acknowledged, by its delivery tag.
type delivery struct {
	q        *queue
	m        message
	tag      uint64
	consumer string // the consumer's tag; "" for a get
}

// deliver gives m from q to the channel, unacknowledged, under the
// channel's next delivery tag: to its consumer tagged consumer, or to a
// get ("").
func (ch *channel) deliver(q *queue, m message, consumer string) delivery {
	ch.tags++
	d := delivery{q, m, ch.tags, consumer}
	ch.unacked = append(ch.unacked, d)
	return d
}

func (c *conn) String() string { return c.name }

// held says no bytes pass between the client and the broker: its link is
// partitioned, or (on a cluster) its node is paused.
func (c *conn) held() bool { return c.down || c.node != nil && c.node.frozen }

func errClosed(conn bool) error {
	return &broker.Error{Code: broker.ChannelError, Reason: "channel/connection is not open", Connection: conn}
}

var (
	errTimeout = &broker.Error{Code: broker.FrameError, Reason: "read tcp: i/o timeout", Connection: true}
	errReset   = &broker.Error{Code: broker.FrameError, Reason: "read tcp: connection reset by peer", Connection: true}
)

func (w *World) dial(p *process, cfg broker.Config, deadline int64) {
	n := w.nodeOf(p, cfg)
	if p.partitioned || n != nil && n.frozen {
		p.proc.Block()
		limit := w.now + int64(dialTimeout)
		if deadline < limit {
			limit = deadline
		}
		p.dialWait = &dialWait{cfg: cfg, deadline: deadline, timer: w.sched.At(limit, func() {
			p.dialWait = nil
			err := fmt.Errorf("dial: %w", broker.ErrRefused)
			if limit == deadline {
				err = context.DeadlineExceeded
			}
			p.proc.Deliver(reply{err: err})
		})}
		return
	}
	if !w.up || n != nil && (!n.serving() || w.cl.dialRefused(n)) {
		w.now += int64(latRefused)
		if w.trace != nil {
			w.tracef("%s dial refused: broker down", p.name)
		}
		w.sched.Handoff(&p.proc, reply{err: fmt.Errorf("dial: %w", broker.ErrRefused)})
		return
	}
	w.sched.Handoff(&p.proc, reply{conn: w.open(p, cfg)})
}

func (w *World) open(p *process, cfg broker.Config) *conn {
	w.conns++
	c := &conn{id: w.conns, p: p, brokerOpen: true, opened: w.now, node: w.nodeOf(p, cfg)}
	c.name = cfg.Name
	if c.name == "" {
		c.name = p.name + "#" + strconv.Itoa(c.id)
	}
	switch hb := cfg.Heartbeat; {
	case hb < 0: // the client's tune-ok turned them off
		c.hb = 0
	case hb == 0:
		c.hb = w.serverHB
	case w.serverHB == 0 || hb < w.serverHB:
		c.hb = hb
	default:
		c.hb = w.serverHB
	}
	w.now += int64(latDial)
	c.lastSent, c.lastRecv = w.now, w.now
	p.counters.connections++
	p.counters.methods[mConnStartOk]++
	p.counters.methods[mConnTuneOk]++
	p.counters.methods[mConnOpen]++
	p.counters.roundTrips += 2
	p.conns = append(p.conns, c)
	if w.trace != nil {
		w.tracef("%s dial -> %s heartbeat=%v", p.name, c.name, c.hb)
	}
	return c
}

// send puts p's method on the wire.
func (w *World) send(p *process, r *request, deadline int64) {
	c := r.conn
	if c.clientErr != nil {
		w.sched.Handoff(&p.proc, reply{err: errClosed(true)})
		return
	}
	if r.ch != nil && r.ch.closedErr != nil {
		w.sched.Handoff(&p.proc, reply{err: errClosed(false)})
		return
	}
	p.counters.methods[r.m]++
	p.counters.roundTrips++
	if r.m == mChanOpen {
		p.counters.channels++
	}
	c.lastSent = w.now
	if c.held() {
		c.outbox = append(c.outbox, pending{p: p, r: *r})
		p.proc.Block()
		if deadline != noDeadline {
			p.deadline = w.sched.At(deadline, func() { w.abandon(p, c) })
		}
		return
	}
	if w.cl != nil && w.stallIfCut(p, c, r, deadline) {
		return
	}
	rep := w.arrive(c, r)
	if p.dropNext {
		p.dropNext = false
		if w.trace != nil {
			w.tracef("%s reply dropped, connection %s severed", p.name, c.name)
		}
		w.clientClose(c, errReset)
		w.fin(c)
		rep = reply{err: errReset}
	}
	if hook := p.dueHook(); hook != nil {
		p.proc.Deliver(rep) // the process hears the reply when next scheduled, if it still can
		hook()
		return
	}
	w.sched.Handoff(&p.proc, rep)
}

// dueHook removes and returns the earliest hook whose method count p has
// reached (a dial sends three methods at once).
func (p *process) dueHook() func() {
	if len(p.hooks) == 0 {
		return nil
	}
	sent := p.counters.sent()
	due := 0
	for n := range p.hooks {
		if n <= sent && (due == 0 || n < due) {
			due = n
		}
	}
	f := p.hooks[due]
	delete(p.hooks, due)
	return f
}

// arrive applies a request at the broker and returns the reply the client
// gets, updating the client's view of its channel and connection.
func (w *World) arrive(c *conn, r *request) reply {
	rep := w.apply(r)
	w.now += int64(rep.cost)
	c.lastRecv = w.now
	if w.trace != nil {
		arg := r.queue
		if arg != "" {
			arg += " "
		}
		w.tracef("%s %s ch%d %s %s-> %s", c.p.name, c.name, chanID(r.ch), r.m, arg, describe(r.m, rep))
	}
	if e, ok := rep.err.(*broker.Error); ok && e.Server {
		if e.Connection {
			w.clientClose(c, e)
		} else if r.ch != nil && r.ch.closedErr == nil {
			w.closeChannel(r.ch)
			r.ch.closedErr = e
			c.p.counters.methods[mChanCloseOk]++
		}
	}
	return rep
}

// apply is the broker's side of method r.m.
func (w *World) apply(r *request) reply {
	c, ch := r.conn, r.ch
	switch r.m {
	case mChanOpen:
		ch := &channel{id: len(c.chans) + 1, c: c, open: true}
		c.chans = append(c.chans, ch)
		return reply{ch: ch, cost: latChanOpen}
	case mChanClose:
		w.closeChannel(ch)
		ch.closedErr = errClosed(false)
		return reply{cost: latChanClose}
	case mConnClose:
		cost := latConnClose + time.Duration(len(c.owned))*latDelete
		if d := w.closeRelease(c); d > 0 {
			// 4.3.6: close-ok first, the exclusive queues a little later.
			for _, ch := range c.chans {
				w.closeChannel(ch)
			}
			c.releaseTimer = w.sched.After(d, func() { w.brokerClose(c, "closed by client") })
		} else {
			w.brokerClose(c, "closed by client")
		}
		w.clientClose(c, errClosed(true))
		return reply{cost: cost}
	case mConfirmSelect:
		ch.confirm = true
		return reply{cost: latConfirm}
	case mQueueDeclare:
		return w.declare(c, r.queue, r.declare)
	case mQueueDelete:
		return w.deleteQ(c, r.queue, r.delete)
	case mBasicPublish:
		return w.publish(c, ch, r.pub)
	case mBasicConsume:
		return w.consume(c, ch, r.queue, r.exclusive)
	case mBasicGet:
		return w.get(c, ch, r.queue)
	case mQueuePurge:
		return w.purge(c, r.queue)
	case mQueueBind:
		return w.bind(c, r.queue, r.pub.Exchange, r.pub.Key)
	case mBasicCancel:
		return w.cancel(ch, r.queue)
	case mBasicAck, mBasicNack, mBasicReject:
		return w.settle(ch, r.tag, r.multiple, r.m == mBasicAck, r.requeue)
	}
	panic(fmt.Sprintf("sim: no broker side for %v", r.m))
}

func chanID(ch *channel) int {
	if ch == nil {
		return 0
	}
	return ch.id
}

func describe(m method, rep reply) string {
	switch {
	case rep.err != nil:
		return rep.err.Error()
	case m == mBasicPublish && rep.conf.Returned:
		return "return 312 NO_ROUTE, ack"
	case m == mBasicPublish && rep.conf.Acked:
		return "ack"
	case m == mBasicPublish:
		return "nack"
	case m == mQueueDelete, m == mQueuePurge:
		return fmt.Sprintf("ok n=%d", rep.n)
	case m == mBasicGet && !rep.ok:
		return "empty"
	}
	return "ok"
}

// abandon ends p's wait for a reply held by a partition because its
// context's virtual deadline passed. Like the amqp091-go adapter, the
// client then tears the connection down: the outcome is unknown.
func (w *World) abandon(p *process, c *conn) {
	p.deadline = nil
	for i := range c.outbox {
		if c.outbox[i].p == p {
			c.outbox[i].p = nil
		}
	}
	err := &broker.Error{Code: broker.FrameError, Reason: "context deadline exceeded; connection torn down", Connection: true}
	w.clientClose(c, err)
	w.fin(c)
	p.proc.Deliver(reply{err: deadlineErr{err}})
}

// deadlineErr is a connection-level error that is also
// context.DeadlineExceeded.
type deadlineErr struct{ err *broker.Error }

func (e deadlineErr) Error() string   { return e.err.Error() }
func (e deadlineErr) Unwrap() []error { return []error{e.err, context.DeadlineExceeded} }

// clientClose makes the client aware that c is closed, failing any request
// of its process that waits on c.
func (w *World) clientClose(c *conn, err error) {
	if c.clientErr != nil {
		return
	}
	c.clientErr = err
	c.pendingClose = nil
	c.clientTimer.Cancel()
	for _, ch := range c.chans {
		if ch.closedErr == nil {
			ch.closedErr = err
		}
	}
	for i := range c.outbox {
		if p := c.outbox[i].p; p != nil {
			c.outbox[i].p = nil
			p.deadline.Cancel()
			p.proc.Deliver(reply{err: err})
		}
	}
	if w.cl != nil {
		w.cl.failStalls(c, err)
	}
	if w.trace != nil {
		w.tracef("%s %s closed for the client: %v", c.p.name, c.name, err)
	}
}

// notifyClose sends a broker-initiated close to the client, which hears it
// at once unless the link is down or its process is paused.
func (w *World) notifyClose(c *conn, err error) {
	if c.clientErr != nil || c.p.proc.Killed() {
		return
	}
	if c.held() || c.p.proc.Paused() {
		c.pendingClose = err
		return
	}
	w.clientClose(c, err)
}

// brokerClose ends c on the broker's side: its channels close and its
// exclusive queues are deleted.
func (w *World) brokerClose(c *conn, why string) {
	if !c.brokerOpen {
		return
	}
	c.brokerOpen = false
	c.brokerTimer.Cancel()
	c.releaseTimer.Cancel()
	for _, ch := range c.chans {
		w.closeChannel(ch)
	}
	if w.cl != nil && w.cl.khepri() {
		w.cl.ownerGone(c)
	}
	for len(c.owned) > 0 {
		w.deleteQueue(c.owned[0])
	}
	if w.trace != nil {
		w.tracef("%s %s closed by the broker: %s", c.p.name, c.name, why)
	}
}

// fin is the client's socket closing with no AMQP close: the broker
// releases the connection a few milliseconds later, or at heal.
func (w *World) fin(c *conn) {
	if !c.brokerOpen || c.releaseTimer != nil {
		return
	}
	if c.held() {
		c.finPending = true
		return
	}
	d := finDelays[w.pick(len(finDelays))]
	c.releaseTimer = w.sched.After(d, func() { w.brokerClose(c, "socket closed") })
}

// closeReleases are how long after its close-ok RabbitMQ 4.3.6 deletes a
// closed connection's exclusive queues (row 6.8 of broker-semantics.md:
// before close-ok in 26 and 31 of 50 trials, else after p50 2.7 ms, at
// most 4.3 ms).
var closeReleases = [...]time.Duration{0, 1 * time.Millisecond, 2700 * time.Microsecond, 4300 * time.Microsecond}

// khepriReleases are closeReleases on a Khepri cluster, where the
// deletion is a Raft commit and reaches the other nodes' copies after it:
// besides the single node's, 12 and 25 ms (a differential's sequence on
// 4.3.6: a delete through n1 about 10 ms after the close-ok of the owner
// on n2 still got 405; not measured apart).
var khepriReleases = append(closeReleases[:len(closeReleases):len(closeReleases)], 12*time.Millisecond, 25*time.Millisecond)

// closeRelease is how long after its close-ok c's exclusive queues go: 0
// (before it) but on a 4.3.6 broker or a Khepri cluster with queues to
// delete, where the Decider picks.
func (w *World) closeRelease(c *conn) time.Duration {
	khepri := w.cl != nil && w.cl.khepri()
	if !w.lateRelease && !khepri || len(c.owned) == 0 || c.releaseTimer != nil {
		return 0
	}
	if khepri {
		return khepriReleases[w.pick(len(khepriReleases))]
	}
	return closeReleases[w.pick(len(closeReleases))]
}

func (w *World) pick(n int) int {
	if n < 2 {
		return 0
	}
	return w.decide.Pick(n)
}

// sense starts or stops heartbeat detection on c after its process or
// link changed.
func (w *World) sense(c *conn) {
	p := c.p
	if send := p.proc.Paused() || c.held() || p.proc.Killed(); send != c.sendSilent {
		c.sendSilent = send
		if send {
			// (A paused node times no one out: what its clients sent waits
			// in its socket buffers until it runs again.)
			if c.hb > 0 && c.brokerOpen && (c.node == nil || !c.node.frozen) {
				last := max(c.lastSent, lastTick(c.opened, c.hb/2, w.now))
				// The broker checks every hb from the connection's start and gives
				// up after two checks in a row saw no bytes: 2T to 3T after the last.
				d := nextTick(c.opened, c.hb, last) + 2*int64(c.hb)
				c.brokerTimer = w.sched.At(d, func() {
					if w.trace != nil {
						w.tracef("%s %s missed heartbeats (timeout %v)", p.name, c.name, c.hb)
					}
					w.brokerClose(c, "missed heartbeats")
					w.notifyClose(c, errReset)
				})
			}
		} else {
			c.brokerTimer.Cancel()
			c.lastSent = w.now
		}
	}
	if recv := (p.proc.Paused() || c.held()) && !p.proc.Killed(); recv != c.recvSilent {
		c.recvSilent = recv
		if recv {
			if c.hb > 0 && c.clientErr == nil {
				last := max(c.lastRecv, lastTick(c.opened, c.hb/2, w.now))
				c.readDeadline = last + int64(c.hb)*3/2
				c.clientTimer = w.sched.At(c.readDeadline, func() {
					if p.proc.Paused() {
						c.expired = true
						return
					}
					w.clientDetect(c)
				})
			}
		} else {
			c.clientTimer.Cancel()
			c.lastRecv = w.now
		}
	}
}

// clientDetect is the client's read deadline passing: amqp091-go closes the
// connection with a 501 and its socket.
func (w *World) clientDetect(c *conn) {
	if w.trace != nil {
		w.tracef("%s %s client read deadline passed", c.p.name, c.name)
	}
	w.clientClose(c, errTimeout)
	w.fin(c)
}

// lastTick is the latest time open+k*period at or before t.
func lastTick(open int64, period time.Duration, t int64) int64 {
	if period <= 0 || t < open {
		return open
	}
	return open + (t-open)/int64(period)*int64(period)
}

// nextTick is the earliest time open+k*period strictly after t.
func nextTick(open int64, period time.Duration, t int64) int64 {
	return lastTick(open, period, t) + int64(period)
}

// heal delivers what a partition held on c.
func (w *World) heal(c *conn) {
	c.down = false
	w.sense(c)
	if c.held() {
		return // its node is paused: what is held waits for its resume
	}
	if c.clientErr == nil {
		switch {
		case c.pendingClose != nil:
			w.clientClose(c, c.pendingClose)
		case !c.brokerOpen:
			w.clientClose(c, errReset)
		}
	}
	for len(c.outbox) > 0 && c.brokerOpen {
		pd := c.outbox[0]
		c.outbox = c.outbox[1:]
		if w.gateOutbox(c, pd) {
			continue
		}
		rep := w.arrive(c, &pd.r)
		if pd.p != nil {
			pd.p.deadline.Cancel()
			pd.p.proc.Deliver(rep)
		}
	}
	c.outbox = nil
	if c.finPending {
		c.finPending = false
		w.fin(c)
	}
}
