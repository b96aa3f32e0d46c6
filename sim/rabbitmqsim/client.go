package rabbitmqsim

import (
	"context"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// client is a process's view of the broker.
type client struct{ p *process }

type deadlineKey struct{}

// WithTimeout returns a context whose deadline is d from now in the World's
// virtual time. Simulated calls made with it give up at that virtual moment
// the way the amqp091-go adapter gives up at a real one: a call held by a
// partition fails with an error that is both connection-level and
// context.DeadlineExceeded, and its connection is torn down.
func (w *World) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	t := w.now + int64(d)
	if old, ok := ctx.Value(deadlineKey{}).(int64); ok && old < t {
		t = old
	}
	return context.WithCancel(context.WithValue(ctx, deadlineKey{}, t))
}

func deadlineOf(ctx context.Context) int64 {
	if t, ok := ctx.Value(deadlineKey{}).(int64); ok {
		return t
	}
	return noDeadline
}

// do makes a call unless ctx is already done.
func (p *process) do(ctx context.Context, r *request) reply {
	if err := ctx.Err(); err != nil {
		return reply{err: err}
	}
	r.deadline = deadlineOf(ctx)
	if p.w.now >= r.deadline {
		return reply{err: context.DeadlineExceeded}
	}
	return p.call(r)
}

func (cl *client) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	rep := cl.p.do(ctx, &request{kind: reqDial, cfg: cfg})
	if rep.err != nil {
		return nil, rep.err
	}
	return &connHandle{p: cl.p, c: rep.conn}, nil
}

func (cl *client) Sleep(ctx context.Context, d time.Duration) error {
	return cl.p.do(ctx, &request{kind: reqSleep, d: d}).err
}

type connHandle struct {
	p *process
	c *conn
}

// method sends a method of the connection (ch nil) or of one of its
// channels; r carries the method's arguments.
func (h *connHandle) method(ctx context.Context, m method, ch *channel, r *request) reply {
	r.kind, r.m, r.conn, r.ch = reqMethod, m, h.c, ch
	return h.p.do(ctx, r)
}

func (h *connHandle) Channel(ctx context.Context) (broker.Channel, error) {
	rep := h.method(ctx, mChanOpen, nil, &request{})
	if rep.err != nil {
		return nil, rep.err
	}
	return &chanHandle{h: h, ch: rep.ch}, nil
}

func (h *connHandle) Close() error {
	return h.method(context.Background(), mConnClose, nil, &request{}).err
}

func (h *connHandle) Err() error { return h.c.clientErr }

// Name is the connection's name in the World: what faults aimed at it
// (CloseSocket, ForceClose) take.
func (h *connHandle) Name() string { return h.c.name }

// Drop is the client's socket closing with no AMQP close (a client that
// exits, or one the served broker, adapters/served, saw go): the broker
// releases the connection a few milliseconds later, as after a kill.
func (h *connHandle) Drop() error {
	w, conn := h.p.w, h.c
	return h.p.do(context.Background(), &request{kind: reqFault, fault: func() (reply, bool) {
		if conn.clientErr == nil {
			w.clientClose(conn, errClosed(true))
		}
		w.fin(conn)
		return reply{}, false
	}}).err
}

type chanHandle struct {
	h  *connHandle
	ch *channel
}

func (c *chanHandle) call(ctx context.Context, m method, r *request) reply {
	return c.h.method(ctx, m, c.ch, r)
}

func (c *chanHandle) Confirm(ctx context.Context) error {
	return c.call(ctx, mConfirmSelect, &request{}).err
}

// tooLong fails a queue name amqp091-go cannot encode: the library tears
// the whole connection down before anything is sent.
func (c *chanHandle) tooLong(ctx context.Context, name string) error {
	w, conn := c.h.p.w, c.h.c
	return c.h.p.do(ctx, &request{kind: reqFault, fault: func() (reply, bool) {
		err := &broker.Error{Code: broker.FrameError, Reason: fmt.Sprintf("amqp: shortstr %q exceeds 255 bytes", name[:16]+"..."), Connection: true}
		if conn.clientErr != nil {
			return reply{err: errClosed(true)}, false
		}
		w.clientClose(conn, err)
		w.fin(conn)
		return reply{err: err}, false
	}}).err
}

func (c *chanHandle) Declare(ctx context.Context, name string, o broker.DeclareOptions) (broker.Queue, error) {
	if len(name) > 255 {
		return broker.Queue{}, c.tooLong(ctx, name)
	}
	rep := c.call(ctx, mQueueDeclare, &request{queue: name, declare: o})
	return rep.queue, rep.err
}

func (c *chanHandle) Delete(ctx context.Context, name string, o broker.DeleteOptions) (int, error) {
	if len(name) > 255 {
		return 0, c.tooLong(ctx, name)
	}
	rep := c.call(ctx, mQueueDelete, &request{queue: name, delete: o})
	return rep.n, rep.err
}

func (c *chanHandle) Publish(ctx context.Context, pb broker.Publishing) (broker.Confirmation, error) {
	if c.ch.closedErr == nil && !c.ch.confirm {
		return broker.Confirmation{}, broker.ErrNotConfirming
	}
	rep := c.call(ctx, mBasicPublish, &request{queue: pb.Key, pub: pb})
	return rep.conf, rep.err
}

// Send is basic.publish on a channel that may not be in confirm mode: the
// served broker's (adapters/served), whose clients publish without
// confirms too. Confirmation says what the broker did (routed nowhere and
// mandatory: Returned); a client outside confirm mode hears only the
// return.
func (c *chanHandle) Send(ctx context.Context, pb broker.Publishing) (broker.Confirmation, error) {
	rep := c.call(ctx, mBasicPublish, &request{queue: pb.Key, pub: pb})
	return rep.conf, rep.err
}

func (c *chanHandle) Consume(ctx context.Context, queue string, exclusive bool) (string, error) {
	rep := c.call(ctx, mBasicConsume, &request{queue: queue, exclusive: exclusive})
	return rep.tag, rep.err
}

func (c *chanHandle) Get(ctx context.Context, queue string) (bool, error) {
	rep := c.call(ctx, mBasicGet, &request{queue: queue})
	return rep.ok, rep.err
}

// Got is a message given to a channel, for the served broker
// (adapters/served): its delivery tag on the channel, the consumer's tag
// ("" for a get), its queue, its body, whether it is persistent and was
// delivered before, and (for a get) how many messages the queue has left.
type Got struct {
	Tag                     uint64
	Consumer, Queue         string
	Body                    []byte
	Persistent, Redelivered bool
	Left                    int
}

func gotOf(d delivery) Got {
	g := Got{Tag: d.tag, Consumer: d.consumer, Body: d.m.body, Persistent: d.m.persistent, Redelivered: d.m.redelivered}
	if d.q != nil {
		g.Queue = d.q.name
	}
	return g
}

// Delivered are the channel's deliveries to its consumers under tags
// after after, not yet acknowledged: what the served broker has still to
// send as basic.deliver. It reads the World and moves nothing.
func (c *chanHandle) Delivered(after uint64) []Got {
	var out []Got
	for _, d := range c.ch.unacked {
		if d.tag > after && d.consumer != "" {
			out = append(out, gotOf(d))
		}
	}
	return out
}

// Consumers are the tags of the channel's consumers. It reads the World
// and moves nothing.
func (c *chanHandle) Consumers() []string {
	var out []string
	for _, cs := range c.ch.consumers {
		out = append(out, cs.tag)
	}
	return out
}

// Cancel is basic.cancel of the consumer tagged tag.
func (c *chanHandle) Cancel(ctx context.Context, tag string) error {
	return c.call(ctx, mBasicCancel, &request{queue: tag}).err
}

// Take is basic.get, with the message it took (ok false: the queue was
// empty): the served broker's, whose clients read what they get.
func (c *chanHandle) Take(ctx context.Context, queue string) (Got, bool, error) {
	rep := c.call(ctx, mBasicGet, &request{queue: queue})
	var g Got
	if n := len(c.ch.unacked); rep.ok && n > 0 {
		// What the get delivered last (gone only if a fault closed the
		// channel right after it: then the client hears of the close).
		g = gotOf(c.ch.unacked[n-1])
	}
	g.Left = rep.n
	return g, rep.ok, rep.err
}

// Ack is basic.ack: the deliveries up to tag (multiple) or tag alone are
// done with.
func (c *chanHandle) Ack(ctx context.Context, tag uint64, multiple bool) error {
	return c.call(ctx, mBasicAck, &request{tag: tag, multiple: multiple}).err
}

// Nack is basic.nack: the deliveries up to tag (multiple) or tag alone go
// back to their queues (requeue) or are dropped.
func (c *chanHandle) Nack(ctx context.Context, tag uint64, multiple, requeue bool) error {
	return c.call(ctx, mBasicNack, &request{tag: tag, multiple: multiple, requeue: requeue}).err
}

// Reject is basic.reject: Nack of tag alone.
func (c *chanHandle) Reject(ctx context.Context, tag uint64, requeue bool) error {
	return c.call(ctx, mBasicReject, &request{tag: tag, requeue: requeue}).err
}

func (c *chanHandle) Purge(ctx context.Context, queue string) (int, error) {
	rep := c.call(ctx, mQueuePurge, &request{queue: queue})
	return rep.n, rep.err
}

func (c *chanHandle) Bind(ctx context.Context, queue, exchange, key string) error {
	return c.call(ctx, mQueueBind, &request{queue: queue, pub: broker.Publishing{Exchange: exchange, Key: key}}).err
}

func (c *chanHandle) Close() error {
	if c.ch.closedErr != nil {
		return nil
	}
	return c.call(context.Background(), mChanClose, &request{}).err
}
