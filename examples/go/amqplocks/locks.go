package main

import (
	"errors"
	"fmt"
	"log"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// This file is amqp-locks itself, on amqp091-go: a port of
// examples/python/amqp_locks.py, the same design call for call.
//
// A semaphore named N with C slots is the durable queues N-1-A .. N-C-A
// (the slots). A client holds slot L while its connection owns the
// exclusive queue N-L-B; RabbitMQ lets exactly one connection own an
// exclusive queue, so at most one client holds each slot. Admins add and
// remove slots by declaring and deleting A queues under an administration
// mutex, the exclusive queue N. A true mutex named N is the exclusive
// queue N itself.
//
// Queue existence is probed with a mandatory publish under publisher
// confirms: a basic.return (which the broker sends before the ack) means
// the queue does not exist. Unlike a passive declare, a probe never breaks
// the channel. Every queue is declared with x-max-length 0, so that the
// probes' empty messages are dropped instead of piling up.

// resourceLocked is the AMQP reply code for another connection's exclusive queue.
const resourceLocked = 405

// queueArgs length-limits every queue to 0 (default overflow: drop-head),
// so that the existence probes published to it are acknowledged and then
// dropped.
var queueArgs = amqp.Table{"x-max-length": int64(0)}

func slotQueue(name string, slot int) string   { return fmt.Sprintf("%s-%d-A", name, slot) }
func holderQueue(name string, slot int) string { return fmt.Sprintf("%s-%d-B", name, slot) }

// Failed is an operation that certainly did not take effect; Reason names
// why (full, absent, contended, held, exists, not held).
type Failed struct{ Reason, Text string }

func (f *Failed) Error() string { return f.Text }

// ChannelError is a channel the broker closed (Code is the AMQP reply
// code): the connection, and what it holds, survive, and the Client has
// opened a new channel (or will at its next call). Its outcome is unknown.
type ChannelError struct {
	Code int
	Text string
}

func (e *ChannelError) Error() string { return e.Text }

// ConnectionLost is a connection gone (or never opened): everything the
// Client held is lost, and an operation in progress has an unknown outcome.
type ConnectionLost struct{ Text string }

func (e *ConnectionLost) Error() string { return e.Text }

// A Client is one connection and one channel in confirm mode. It never
// reconnects: once its connection is lost, everything it held is lost, and
// a new Client is needed. It serves one operation at a time.
type Client struct {
	conn         *amqp.Connection
	ch           *amqp.Channel
	returns      chan amqp.Return
	held         map[string]bool // the exclusive queues this connection declared
	relinquished map[string]bool // those of them a verify found gone
	lost         error           // why the connection is gone, once it is
}

// dial opens a Client's connection and channel. heartbeat is proposed
// rounded up to whole seconds, and 0 proposes none (the broker's value
// applies: amqp091-go's Config.Heartbeat 0 would be its own 10 s, so the
// URL says heartbeat=0). timeout bounds the TCP connect and the handshake;
// name is the connection's name in the management UI.
func dial(rawURL string, heartbeat time.Duration, name string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &ConnectionLost{"could not connect: " + err.Error()}
	}
	q := u.Query()
	q.Del("heartbeat")
	if heartbeat <= 0 {
		q.Set("heartbeat", "0")
	}
	u.RawQuery = q.Encode()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	cfg := amqp.Config{Heartbeat: (heartbeat + time.Second - 1) / time.Second * time.Second, Properties: props, Dial: amqp.DefaultDial(timeout)}
	conn, err := amqp.DialConfig(u.String(), cfg)
	if err != nil {
		return nil, &ConnectionLost{"could not connect: " + err.Error()}
	}
	c := &Client{conn: conn, held: map[string]bool{}, relinquished: map[string]bool{}}
	if err := c.reopenChannel(); err != nil {
		c.close()
		return nil, &ConnectionLost{"could not open a channel: " + err.Error()}
	}
	return c, nil
}

// open says whether the connection is alive, as far as the client knows.
func (c *Client) open() bool {
	if c.lost == nil && c.conn.IsClosed() {
		c.markLost(errors.New("the connection closed"))
	}
	return c.lost == nil
}

func (c *Client) markLost(err error) {
	if c.lost != nil {
		return
	}
	log.Printf("connection lost: %v", err)
	c.lost = err
	c.ch = nil
	clear(c.held)
	clear(c.relinquished)
}

// close closes the connection, which releases everything the client holds
// (RabbitMQ deletes its exclusive queues before close-ok); it gives up
// waiting after two seconds (a partitioned broker).
func (c *Client) close() {
	if c.lost != nil {
		return
	}
	c.lost = errors.New("closed by the client")
	c.ch = nil
	clear(c.held)
	clear(c.relinquished)
	if err := c.conn.CloseDeadline(time.Now().Add(2 * time.Second)); err != nil && !errors.Is(err, amqp.ErrClosed) {
		log.Printf("closing the connection: %v", err)
	}
}

func (c *Client) reopenChannel() error {
	c.ch = nil
	ch, err := c.conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	c.returns = ch.NotifyReturn(make(chan amqp.Return, 8))
	c.ch = ch
	return nil
}

// call runs op on the client's channel; what names it in errors. A
// channel the broker closed becomes a *ChannelError (after a new channel
// was opened, as the spec's acquire does after a RESOURCE_LOCKED), a dead
// connection *ConnectionLost; anything else is returned as it is (an
// unknown outcome).
func (c *Client) call(what string, op func(ch *amqp.Channel) error) error {
	if !c.open() {
		return &ConnectionLost{fmt.Sprintf("%s: the connection is gone: %v", what, c.lost)}
	}
	var err error
	if c.ch == nil || c.ch.IsClosed() {
		err = c.reopenChannel()
	}
	if err == nil {
		err = op(c.ch)
	}
	if err == nil {
		return nil
	}
	if c.conn.IsClosed() {
		c.markLost(err)
		return &ConnectionLost{fmt.Sprintf("%s: %v", what, err)}
	}
	var ae *amqp.Error
	if errors.As(err, &ae) && c.ch != nil && c.ch.IsClosed() {
		if rerr := c.reopenChannel(); rerr != nil {
			log.Printf("reopening the channel: %v", rerr)
		}
		return &ChannelError{Code: ae.Code, Text: fmt.Sprintf("%s: %v", what, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// exists probes queue with a mandatory publish under confirms. A return
// means it does not exist; an ack without a return (or a nack, from a
// queue with x-overflow reject-publish) means it does. A channel closed
// before the confirm (amqp091-go then nacks it) leaves it unknown.
func (c *Client) exists(queue string) (bool, error) {
	var exists bool
	err := c.call("probe "+queue, func(ch *amqp.Channel) error {
		c.drainReturns("")
		dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{})
		if err != nil {
			return err
		}
		if !dc.Wait() && ch.IsClosed() {
			return amqp.ErrClosed
		}
		exists = !c.drainReturns(queue)
		return nil
	})
	return exists, err
}

// drainReturns empties the returns channel and says whether one of the
// returns was of a message to queue (never, for "").
func (c *Client) drainReturns(queue string) bool {
	found := false
	for {
		select {
		case r := <-c.returns:
			found = found || queue != "" && r.RoutingKey == queue
		default:
			return found
		}
	}
}

// declareExclusive declares queue exclusively to this connection; false
// when another connection owns it (RESOURCE_LOCKED, which costs a channel).
func (c *Client) declareExclusive(queue string) (bool, error) {
	err := c.call("declare "+queue, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(queue, false, false, true, false, queueArgs)
		return err
	})
	var ce *ChannelError
	if errors.As(err, &ce) && ce.Code == resourceLocked {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.held[queue] = true
	delete(c.relinquished, queue)
	return true, nil
}

func (c *Client) declareDurable(queue string) error {
	return c.call("declare "+queue, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(queue, true, false, false, false, queueArgs)
		return err
	})
}

// remove deletes queue and waits for delete-ok (deleting a missing queue
// succeeds).
func (c *Client) remove(queue string) error {
	err := c.call("delete "+queue, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(queue, false, false, false)
		return err
	})
	if err == nil {
		delete(c.held, queue)
		delete(c.relinquished, queue)
	}
	return err
}

// verifyHeld says whether this client still holds the exclusive queue
// held: it declared it, and a probe of probe is routed on its live
// connection. One that finds probe gone relinquishes held (the spec's
// lock-relinquished): it says false from then on, and the client keeps the
// queue until its release deletes it.
func (c *Client) verifyHeld(held, probe string) (bool, error) {
	if !c.held[held] || c.relinquished[held] || !c.open() {
		return false, nil
	}
	ok, err := c.exists(probe)
	var lost *ConnectionLost
	switch {
	case errors.As(err, &lost):
		return false, nil
	case err != nil:
		return false, err
	case ok:
		return true, nil
	}
	c.relinquished[held] = true
	return false, nil
}

func (c *Client) release(queue string) error {
	if !c.held[queue] || !c.open() {
		return &Failed{"not held", queue + " is not held by this client"}
	}
	return c.remove(queue)
}

// sleep waits d, then fails if the connection was lost meanwhile.
func (c *Client) sleep(d time.Duration) error {
	time.Sleep(d)
	if !c.open() {
		return &ConnectionLost{fmt.Sprint(c.lost)}
	}
	return nil
}
