// Package amqplocks is the reference implementation of amqp-locks: a
// persistent semaphore, a true mutex and a persistent mutex built from
// RabbitMQ queues, as the amqp-locks spec describes them.
//
// A semaphore named N with C slots is the durable queues N-1-A .. N-C-A (the
// slots); a client holds slot L while its connection owns the exclusive queue
// N-L-B. Acquire scans for a slot whose A queue exists and whose B queue does
// not, then declares the B queue; RabbitMQ lets exactly one connection win.
// Verify publishes to A[L] under confirms; release deletes B[L]. Admins change
// the number of slots by declaring and deleting A queues under an
// administration mutex, the exclusive queue N.
//
// The library talks to RabbitMQ through package broker, so it runs unchanged
// on the simulator and on a real broker. Every choice the spec leaves open is
// an Option whose zero value is the spec's recommendation.
package amqplocks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Errors an operation may return. An error that is none of these (a
// connection failure in the middle of an operation, say) means the outcome
// is unknown.
var (
	// ErrFull: every slot was held when acquire looked.
	ErrFull = errors.New("amqplocks: every slot is held")
	// ErrAbsent: the semaphore has no slots (its A[1] does not exist).
	ErrAbsent = errors.New("amqplocks: the semaphore does not exist")
	// ErrContended: acquire lost the race for a B queue more times than
	// Options.ContentionRetries allows, or an admin found the
	// administration mutex held.
	ErrContended = errors.New("amqplocks: gave up after repeated RESOURCE_LOCKED races")
	// ErrLost: the lock is not held (any more): its slot was removed, its
	// connection died, or it was never held by this client.
	ErrLost = errors.New("amqplocks: the lock is not held")
	// ErrHeld: a true mutex is held by another client.
	ErrHeld = errors.New("amqplocks: the mutex is held by another client")
	// ErrExists: Create found the semaphore already has slots.
	ErrExists = errors.New("amqplocks: the semaphore already exists")
	// ErrUnavailable: acquire found no slot, full or absent, and does not
	// say which (Options.PlainFailure).
	ErrUnavailable = errors.New("amqplocks: no slot: full or absent")
)

// A Client is one amqp-locks client: one AMQP connection and one channel in
// confirm mode (Options.Channels), used for any number of locks. By default
// it never reconnects: once its connection is lost, every lock it held is
// lost too, and a new Client is needed (Options.Reconnect connects again
// instead, holding nothing). A Client is safe for concurrent use; its
// operations run one at a time.
type Client struct {
	b    broker.Broker
	o    Options
	rnd  *rand.Rand
	mu   sync.Mutex
	conn broker.Conn // nil until the first operation with Options.LazyConnect
	// chans are the open channels by purpose; nil after a channel error,
	// reopened on next use.
	chans [numPurposes]broker.Channel
	admin bool // an admin's operation is running (Options.Channels)
	// held are the exclusive queues this client declared and has not
	// deleted; relinquished are those of them whose lock a verify found
	// gone: the client holds nothing there any more (the spec's
	// "lock-relinquished"), though it keeps the queue until it releases it.
	held, relinquished map[string]bool
}

// purpose is what a channel is for, with Options.Channels set to
// ChannelPerPurpose; with OneChannel every purpose shares forProbes.
type purpose int

const (
	forProbes purpose = iota // publishes under confirms: probes and verifies
	forQueues                // declares and deletes
	forAdmin                 // everything an admin does
	numPurposes
)

// Dial connects a Client to the broker (with Options.LazyConnect, it only
// prepares to: the first operation connects).
func Dial(ctx context.Context, b broker.Broker, o Options) (*Client, error) {
	c := &Client{b: b, o: o, rnd: o.Rand}
	c.forget()
	if c.rnd == nil {
		c.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.LazyConnect {
		return c, nil
	}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	if _, err := c.channel(ctx, forProbes); err != nil {
		c.conn.Close()
		return nil, err
	}
	return c, nil
}

// connect opens the client's connection if it has none yet (lazily, or
// afresh after afresh dropped a lost one); a lost connection is an error.
func (c *Client) connect(ctx context.Context) error {
	if c.conn != nil {
		return c.conn.Err()
	}
	conn, err := c.b.Dial(ctx, broker.Config{Heartbeat: c.o.ProposedHeartbeat()})
	if err != nil {
		return fmt.Errorf("amqplocks: dial: %w", err)
	}
	c.conn = conn
	return nil
}

// afresh starts an operation: with Options.Reconnect, a client whose
// connection is gone drops it, and everything it held with it, so that
// the operation connects anew. Only ever at an operation's start: an
// operation that lost its connection midway must not go on over another
// one (an admin would carry on without the administration mutex its old
// connection held).
func (c *Client) afresh() {
	if c.o.Reconnect && c.conn != nil && c.conn.Err() != nil {
		c.conn, c.chans = nil, [numPurposes]broker.Channel{}
		c.forget()
	}
}

// Close closes the connection, which releases every lock the client holds.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget()
	if c.conn == nil || c.conn.Err() != nil {
		return nil
	}
	return c.conn.Close()
}

// Err reports why the client's connection is closed, or nil while it is
// open as far as the client knows (or it has not connected yet).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	return c.conn.Err()
}

// route is the channel that serves purpose p.
func (c *Client) route(p purpose) purpose {
	switch {
	case c.o.Channels != ChannelPerPurpose:
		return forProbes
	case c.admin:
		return forAdmin
	}
	return p
}

// dead reports why the connection the client's holds were taken on is
// gone, or nil: a hold never survives its connection, whatever
// Options.Reconnect does next.
func (c *Client) dead() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Err()
}

// channel returns the channel for p, connecting first if need be, and
// opening the channel after a channel error.
func (c *Client) channel(ctx context.Context, p purpose) (broker.Channel, error) {
	p = c.route(p)
	if c.chans[p] != nil && c.conn.Err() == nil {
		return c.chans[p], nil
	}
	if err := c.connect(ctx); err != nil {
		return nil, c.lost(err)
	}
	if c.chans[p] != nil {
		return c.chans[p], nil
	}
	ch, err := c.conn.Channel(ctx)
	if err != nil {
		return nil, fmt.Errorf("amqplocks: open channel: %w", err)
	}
	if p != forQueues {
		if err := ch.Confirm(ctx); err != nil {
			return nil, fmt.Errorf("amqplocks: confirm.select: %w", err)
		}
	}
	c.chans[p] = ch
	return ch, nil
}

// lost turns a connection loss into ErrLost for everything the client held.
func (c *Client) lost(err error) error {
	c.forget()
	return fmt.Errorf("%w: connection lost: %w", ErrLost, err)
}

// failed records what err did to the client's channel and connection. A
// channel the broker closed is reopened at once, by the operation that lost
// it, as the spec's acquire does after a RESOURCE_LOCKED; if that fails the
// next operation tries again.
func (c *Client) failed(ctx context.Context, err error, p purpose) {
	var e *broker.Error
	if !errors.As(err, &e) {
		return
	}
	if e.Connection {
		c.chans = [numPurposes]broker.Channel{}
		c.forget()
		return
	}
	c.chans[c.route(p)] = nil
	c.channel(ctx, p)
}

// exists probes queue q with a mandatory publish under confirms: a
// basic.return means q does not exist. It never breaks the channel.
func (c *Client) exists(ctx context.Context, q string) (bool, error) {
	ch, err := c.channel(ctx, forProbes)
	if err != nil {
		return false, err
	}
	conf, err := ch.Publish(ctx, broker.Publishing{Key: q, Mandatory: true})
	if err != nil {
		c.failed(ctx, err, forProbes)
		return false, fmt.Errorf("amqplocks: probe %s: %w", q, err)
	}
	return !conf.Returned, nil
}

// declare declares q exclusively (a B queue or a mutex); it reports false
// when another connection holds it.
func (c *Client) declareExclusive(ctx context.Context, q string) (bool, error) {
	ch, err := c.channel(ctx, forQueues)
	if err != nil {
		return false, err
	}
	_, err = ch.Declare(ctx, q, broker.DeclareOptions{Exclusive: true, Args: c.o.queueArgs()})
	if err == nil {
		c.held[q] = true
		delete(c.relinquished, q)
		return true, nil
	}
	c.failed(ctx, err, forQueues)
	if broker.Code(err) == broker.ResourceLocked && !broker.ConnectionLost(err) {
		return false, nil
	}
	return false, fmt.Errorf("amqplocks: declare %s: %w", q, err)
}

// remove deletes q, waiting for delete-ok.
func (c *Client) remove(ctx context.Context, q string) error {
	ch, err := c.channel(ctx, forQueues)
	if err != nil {
		return err
	}
	if _, err := ch.Delete(ctx, q, broker.DeleteOptions{}); err != nil {
		c.failed(ctx, err, forQueues)
		return fmt.Errorf("amqplocks: delete %s: %w", q, err)
	}
	delete(c.held, q)
	delete(c.relinquished, q)
	return nil
}

// forget drops every hold: the connection they were taken on is gone (or
// is being closed).
func (c *Client) forget() {
	if c.held == nil {
		c.held, c.relinquished = map[string]bool{}, map[string]bool{}
		return
	}
	clear(c.held)
	clear(c.relinquished)
}

// release deletes a queue this client holds exclusively.
func (c *Client) release(ctx context.Context, q string) error {
	if err := c.dead(); err != nil {
		return c.lost(err)
	}
	if !c.held[q] {
		return fmt.Errorf("%w: %s is not held by this client", ErrLost, q)
	}
	return c.remove(ctx, q)
}

// verifyHeld checks that this client still holds q's lock by probing
// probe: the connection must be alive (so its exclusive queues are) and
// probe must exist. Once probe is found gone the lock is relinquished, as
// the spec names a failed verify: every later verify says so too, even
// if an admin creates probe again, until the client acquires anew.
// Options.TidyVerify then deletes the held queue at once; otherwise the
// client keeps it until its release.
func (c *Client) verifyHeld(ctx context.Context, held, probe string) error {
	if err := c.dead(); err != nil {
		return c.lost(err)
	}
	if !c.held[held] {
		return fmt.Errorf("%w: %s is not held by this client", ErrLost, held)
	}
	if c.relinquished[held] {
		return fmt.Errorf("%w: %s was relinquished when a verify found the lock gone", ErrLost, held)
	}
	ok, err := c.probeForVerify(ctx, probe)
	switch {
	case err != nil && broker.ConnectionLost(err):
		return c.lost(err)
	case err != nil:
		return err
	case !ok:
		c.relinquished[held] = true
		if c.o.TidyVerify {
			// A failed delete leaves the queue relinquished, for release.
			c.remove(ctx, held)
		}
		return fmt.Errorf("%w: %s no longer exists", ErrLost, probe)
	}
	return nil
}

func (c *Client) probeForVerify(ctx context.Context, q string) (bool, error) {
	if c.o.VerifyMethod != VerifyPassive {
		return c.exists(ctx, q)
	}
	ch, err := c.channel(ctx, forProbes)
	if err != nil {
		return false, err
	}
	_, err = ch.Declare(ctx, q, broker.DeclareOptions{Passive: true})
	if err == nil {
		return true, nil
	}
	c.failed(ctx, err, forProbes)
	if broker.Code(err) == broker.NotFound && !broker.ConnectionLost(err) {
		return false, nil
	}
	return false, fmt.Errorf("amqplocks: passive declare %s: %w", q, err)
}

// sleep waits d on the broker's clock.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	return c.b.Sleep(ctx, d)
}
