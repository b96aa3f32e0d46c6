package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/amqplocks/broker"
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
func (p *process) do(ctx context.Context, r request) reply {
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
	rep := cl.p.do(ctx, request{kind: reqDial, cfg: cfg})
	if rep.err != nil {
		return nil, rep.err
	}
	return &connHandle{p: cl.p, c: rep.conn}, nil
}

func (cl *client) Sleep(ctx context.Context, d time.Duration) error {
	return cl.p.do(ctx, request{kind: reqSleep, d: d}).err
}

type connHandle struct {
	p *process
	c *conn
}

func (h *connHandle) method(ctx context.Context, m method, ch *channel, arg string, apply func() reply) reply {
	return h.p.do(ctx, request{kind: reqMethod, m: m, arg: arg, conn: h.c, ch: ch, apply: apply})
}

func (h *connHandle) Channel(ctx context.Context) (broker.Channel, error) {
	c := h.c
	rep := h.method(ctx, mChanOpen, nil, "", func() reply {
		ch := &channel{id: len(c.chans) + 1, c: c, open: true}
		c.chans = append(c.chans, ch)
		return reply{ch: ch, cost: latChanOpen}
	})
	if rep.err != nil {
		return nil, rep.err
	}
	return &chanHandle{h: h, ch: rep.ch}, nil
}

func (h *connHandle) Close() error {
	c, w := h.c, h.p.w
	return h.method(context.Background(), mConnClose, nil, "", func() reply {
		cost := latConnClose + time.Duration(len(c.owned))*latDelete
		w.brokerClose(c, "closed by client")
		w.clientClose(c, errClosed(true))
		return reply{cost: cost}
	}).err
}

func (h *connHandle) Err() error { return h.c.clientErr }

type chanHandle struct {
	h  *connHandle
	ch *channel
}

func (c *chanHandle) call(ctx context.Context, m method, arg string, apply func() reply) reply {
	if arg != "" {
		arg += " "
	}
	return c.h.method(ctx, m, c.ch, arg, apply)
}

func (c *chanHandle) Confirm(ctx context.Context) error {
	ch := c.ch
	return c.call(ctx, mConfirmSelect, "", func() reply {
		ch.confirm = true
		return reply{cost: latConfirm}
	}).err
}

// tooLong fails a queue name amqp091-go cannot encode: the library tears
// the whole connection down before anything is sent.
func (c *chanHandle) tooLong(ctx context.Context, name string) error {
	w, conn := c.h.p.w, c.h.c
	return c.h.p.do(ctx, request{kind: reqFault, fault: func() (reply, bool) {
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
	w, conn := c.h.p.w, c.h.c
	rep := c.call(ctx, mQueueDeclare, name, func() reply { return w.declare(conn, name, o) })
	return rep.queue, rep.err
}

func (c *chanHandle) Delete(ctx context.Context, name string, o broker.DeleteOptions) (int, error) {
	if len(name) > 255 {
		return 0, c.tooLong(ctx, name)
	}
	w, conn := c.h.p.w, c.h.c
	rep := c.call(ctx, mQueueDelete, name, func() reply { return w.deleteQ(conn, name, o) })
	return rep.n, rep.err
}

func (c *chanHandle) Publish(ctx context.Context, pb broker.Publishing) (broker.Confirmation, error) {
	if c.ch.closedErr == nil && !c.ch.confirm {
		return broker.Confirmation{}, broker.ErrNotConfirming
	}
	w, conn, ch := c.h.p.w, c.h.c, c.ch
	rep := c.call(ctx, mBasicPublish, pb.Key, func() reply { return w.publish(conn, ch, pb) })
	return rep.conf, rep.err
}

func (c *chanHandle) Consume(ctx context.Context, queue string, exclusive bool) (string, error) {
	w, conn, ch := c.h.p.w, c.h.c, c.ch
	rep := c.call(ctx, mBasicConsume, queue, func() reply { return w.consume(conn, ch, queue, exclusive) })
	return rep.tag, rep.err
}

func (c *chanHandle) Get(ctx context.Context, queue string) (bool, error) {
	w, conn, ch := c.h.p.w, c.h.c, c.ch
	rep := c.call(ctx, mBasicGet, queue, func() reply { return w.get(conn, ch, queue) })
	return rep.ok, rep.err
}

func (c *chanHandle) Purge(ctx context.Context, queue string) (int, error) {
	w, conn := c.h.p.w, c.h.c
	rep := c.call(ctx, mQueuePurge, queue, func() reply { return w.purge(conn, queue) })
	return rep.n, rep.err
}

func (c *chanHandle) Bind(ctx context.Context, queue, exchange, key string) error {
	w, conn := c.h.p.w, c.h.c
	return c.call(ctx, mQueueBind, queue, func() reply { return w.bind(conn, queue, exchange, key) }).err
}

func (c *chanHandle) Close() error {
	if c.ch.closedErr != nil {
		return nil
	}
	w, ch := c.h.p.w, c.ch
	return c.call(context.Background(), mChanClose, "", func() reply {
		w.closeChannel(ch)
		ch.closedErr = errClosed(false)
		return reply{cost: latChanClose}
	}).err
}
