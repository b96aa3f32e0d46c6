package rabbitmq

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

const (
	// returnsBuffer and confirmsBuffer size the notification channels. With
	// one publish in flight there is at most one return and one confirm
	// outstanding; the slack only keeps amqp091-go's reader from ever
	// waiting on us.
	returnsBuffer  = 8
	confirmsBuffer = 8
)

var consumerSeq atomic.Uint64

// channel is one AMQP channel. sem serializes its methods, so there is at
// most one RPC, and at most one publish awaiting its confirm, at a time.
type channel struct {
	c   *conn
	ach *amqp.Channel
	sem chan struct{}

	closes  chan *amqp.Error       // capacity 1: amqp091-go sends at most one error, then closes it
	returns chan amqp.Return       // drained by every Publish
	confirm chan amqp.Confirmation // nil until Confirm succeeds

	idPrefix string // makes message ids unique across channels
	seq      uint64 // publishes on this channel
	closeErr error  // the channel's close reason, once read from closes
}

func (ch *channel) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case ch.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ch *channel) release() { <-ch.sem }

// run serializes f with the channel's other methods and runs it as one
// context-guarded call (see conn.call).
func (ch *channel) run(ctx context.Context, what string, f func() error) error {
	if err := ch.acquire(ctx); err != nil {
		return err
	}
	defer ch.release()
	return ch.c.call(ctx, what, f)
}

// Confirm sends confirm.select. Calling it again on a channel already in
// confirm mode sends nothing and returns nil.
func (ch *channel) Confirm(ctx context.Context) error {
	if err := ch.acquire(ctx); err != nil {
		return err
	}
	defer ch.release()
	if ch.confirm != nil {
		if ch.ach.IsClosed() {
			return ch.c.mapErr(amqp.ErrClosed)
		}
		return nil
	}
	// Listen before confirm.select so that no confirmation can be missed.
	confirms := ch.ach.NotifyPublish(make(chan amqp.Confirmation, confirmsBuffer))
	err := ch.c.call(ctx, "confirm.select-ok", func() error { return ch.ach.Confirm(false) })
	if err != nil {
		return err
	}
	ch.confirm = confirms
	return nil
}

// Declare sends queue.declare (passive or not).
func (ch *channel) Declare(ctx context.Context, name string, o broker.DeclareOptions) (broker.Queue, error) {
	args, err := toTable(o.Args)
	if err != nil {
		return broker.Queue{}, err
	}
	var q amqp.Queue
	err = ch.run(ctx, "queue.declare-ok", func() error {
		var err error
		if o.Passive {
			q, err = ch.ach.QueueDeclarePassive(name, o.Durable, o.AutoDelete, o.Exclusive, false, args)
		} else {
			q, err = ch.ach.QueueDeclare(name, o.Durable, o.AutoDelete, o.Exclusive, false, args)
		}
		return err
	})
	if err != nil {
		return broker.Queue{}, err
	}
	return broker.Queue{Name: q.Name, Messages: q.Messages, Consumers: q.Consumers}, nil
}

// Delete sends queue.delete and returns the ready-message count.
func (ch *channel) Delete(ctx context.Context, name string, o broker.DeleteOptions) (int, error) {
	var n int
	err := ch.run(ctx, "queue.delete-ok", func() error {
		var err error
		n, err = ch.ach.QueueDelete(name, o.IfUnused, o.IfEmpty, false)
		return err
	})
	return n, err
}

// Consume sends basic.consume without auto-ack. Deliveries are drained and
// dropped, never acknowledged, until the consumer or channel ends.
func (ch *channel) Consume(ctx context.Context, queue string, exclusive bool) (string, error) {
	// amqp091-go does not report the tag it generates, so choose it here.
	tag := "lockprover-" + ch.idPrefix + strconv.FormatUint(consumerSeq.Add(1), 10)
	var deliveries <-chan amqp.Delivery
	err := ch.run(ctx, "basic.consume-ok", func() error {
		var err error
		deliveries, err = ch.ach.Consume(queue, tag, false, exclusive, false, false, nil)
		return err
	})
	if err != nil {
		return "", err
	}
	ch.c.consumers.Add(1)
	go func() {
		defer ch.c.consumers.Done()
		for range deliveries {
		}
	}()
	return tag, nil
}

// Get sends basic.get without auto-ack; a message it gets stays unacked
// until the channel closes.
func (ch *channel) Get(ctx context.Context, queue string) (bool, error) {
	var ok bool
	err := ch.run(ctx, "basic.get-ok", func() error {
		var err error
		_, ok, err = ch.ach.Get(queue, false)
		return err
	})
	return ok, err
}

// Purge sends queue.purge.
func (ch *channel) Purge(ctx context.Context, queue string) (int, error) {
	var n int
	err := ch.run(ctx, "queue.purge-ok", func() error {
		var err error
		n, err = ch.ach.QueuePurge(queue, false)
		return err
	})
	return n, err
}

// Bind sends queue.bind.
func (ch *channel) Bind(ctx context.Context, queue, exchange, key string) error {
	return ch.run(ctx, "queue.bind-ok", func() error {
		return ch.ach.QueueBind(queue, key, exchange, false, nil)
	})
}

// Close sends channel.close and waits for close-ok. Closing a channel that is
// already closed returns nil.
func (ch *channel) Close() error {
	ch.sem <- struct{}{}
	defer ch.release()
	return ch.c.mapErr(ch.ach.Close())
}

// Publish sends basic.publish and waits for its confirm.
func (ch *channel) Publish(ctx context.Context, p broker.Publishing) (broker.Confirmation, error) {
	if err := ch.acquire(ctx); err != nil {
		return broker.Confirmation{}, err
	}
	defer ch.release()
	if ch.confirm == nil {
		if ch.ach.IsClosed() {
			return broker.Confirmation{}, ch.c.mapErr(amqp.ErrClosed)
		}
		return broker.Confirmation{}, broker.ErrNotConfirming
	}
	ch.drainReturns("") // none expected; never attribute a stale one

	ch.seq++
	id := ch.idPrefix + strconv.FormatUint(ch.seq, 10)
	msg := amqp.Publishing{MessageId: id, DeliveryMode: amqp.Transient, Body: p.Body}
	if p.Persistent {
		msg.DeliveryMode = amqp.Persistent
	}

	var (
		conf   broker.Confirmation
		closed bool
	)
	err := ch.c.call(ctx, "the publish confirm", func() error {
		dc, err := ch.ach.PublishWithDeferredConfirm(p.Exchange, p.Key, p.Mandatory, p.Immediate, msg)
		if err != nil {
			return err
		}
		for c := range ch.confirm {
			// Confirmations arrive in tag order, one per publish; with one
			// publish in flight an older tag cannot occur, but skip it if
			// it ever does.
			if c.DeliveryTag < dc.DeliveryTag {
				continue
			}
			conf.Acked = c.Ack
			return nil
		}
		// amqp091-go closes the listener (without a confirmation) when the
		// channel or connection closes: the publish is indeterminate.
		closed = true
		return nil
	})
	if err != nil {
		return broker.Confirmation{}, err
	}
	if closed {
		return broker.Confirmation{}, ch.closeReason()
	}
	// amqp091-go hands a basic.return to our (buffered) channel before it
	// resolves the confirm that follows it, so it is there already.
	conf.Returned = ch.drainReturns(id)
	return conf, nil
}

// drainReturns empties the returns channel and reports whether one of the
// returns carried message id (never true for id "").
func (ch *channel) drainReturns(id string) bool {
	found := false
	for {
		select {
		case r, ok := <-ch.returns:
			if !ok {
				return found
			}
			if id != "" && r.MessageId == id {
				found = true
			}
		default:
			return found
		}
	}
}

// closeReason returns the mapped error that closed the channel.
func (ch *channel) closeReason() error {
	if ch.closeErr == nil {
		// amqp091-go sends the error (if any) to closes before it closes
		// the confirm listener, so it is buffered by now.
		select {
		case e, ok := <-ch.closes:
			if ok && e != nil {
				ch.closeErr = ch.c.mapErr(e)
			}
		default:
		}
		if ch.closeErr == nil {
			ch.closeErr = ch.c.mapErr(amqp.ErrClosed)
		}
	}
	return ch.closeErr
}

// toTable converts x-arguments. Ints are sent as AMQP signed 32-bit ints
// when they fit (amqp091-go would otherwise truncate an int to 32 bits) and
// as signed 64-bit ints when they do not; other values must be types
// amqp091-go can encode. An invalid value is a client-side error: nothing is
// sent.
func toTable(args map[string]any) (amqp.Table, error) {
	if len(args) == 0 {
		return nil, nil
	}
	t := make(amqp.Table, len(args))
	for k, v := range args {
		if i, ok := v.(int); ok {
			if i >= math.MinInt32 && i <= math.MaxInt32 {
				v = int32(i)
			} else {
				v = int64(i)
			}
		}
		t[k] = v
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("rabbitmq: queue arguments: %w", err)
	}
	return t, nil
}
