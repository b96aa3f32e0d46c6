package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

const (
	// handshakeTimeout bounds the TCP connect and AMQP handshake when ctx has
	// no earlier deadline (amqp091-go's own default).
	handshakeTimeout = 30 * time.Second
	// closeTimeout bounds Conn.Close's close handshake, so that a silently
	// partitioned broker cannot hold Close for 1.5 heartbeats (or forever
	// when heartbeats are off on both sides).
	closeTimeout = 30 * time.Second
	// teardownWait bounds how long the adapter waits for amqp091-go to finish
	// tearing down a connection whose socket it has closed. It is a safety
	// net only: the teardown normally takes microseconds.
	teardownWait = 5 * time.Second
)

// Dial opens a connection. See the package documentation for how
// cfg.Heartbeat and cfg.Name are sent.
func (b *rmqBroker) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	uri, err := dialURI(b.url, cfg.Heartbeat)
	if err != nil {
		return nil, err
	}
	props := amqp.NewConnectionProperties()
	if cfg.Name != "" {
		props.SetClientConnectionName(cfg.Name)
	}

	g := &dialGuard{ctx: ctx}
	acfg := amqp.Config{
		Heartbeat:  roundUpToSecond(cfg.Heartbeat),
		Properties: props,
		Dial:       g.dial,
		// Recovery stays nil: auto-recovery would re-declare exclusive
		// queues behind the caller's back.
	}

	// The handshake takes no context: if ctx ends during it, close the socket.
	stop := context.AfterFunc(ctx, g.abort)
	ac, err := amqp.DialConfig(uri, acfg)
	stopped := stop()
	nc := g.socket()

	if err != nil {
		if nc != nil {
			nc.Close() // make sure amqp091-go's reader and heartbeater exit
		}
		return nil, dialError(ctx, err, stopped)
	}
	if !stopped {
		// The handshake finished but ctx ended meanwhile: the caller has
		// given up, so do not hand out (or leak) the connection.
		nc.Close()
		ac.Close()
		return nil, ctx.Err()
	}

	c := &conn{
		ac:      ac,
		netConn: nc,
		done:    make(chan struct{}),
	}
	notify := ac.NotifyClose(make(chan *amqp.Error, 1))
	go c.watch(notify)
	return c, nil
}

// dialGuard ties a dial's socket to the dial's context: amqp.DialConfig
// takes none, so the guard keeps the socket it dials and closes it when
// ctx ends during the handshake, and Dial can close it after a failed dial.
type dialGuard struct {
	ctx context.Context

	mu      sync.Mutex
	netConn net.Conn // the socket dialed, if any
	aborted bool     // ctx ended: no socket may be handed out
}

// dial is amqprun.Config.Dial: it connects within ctx and handshakeTimeout,
// and keeps the socket unless ctx has already ended (then it fails).
func (g *dialGuard) dial(network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: handshakeTimeout}
	nc, err := d.DialContext(g.ctx, network, addr)
	if err != nil {
		return nil, err
	}
	// A deadline for the AMQP handshake (ctx is enforced by the
	// AfterFunc in Dial); amqp091-go clears it in openComplete and
	// then leaves read deadlines to its heartbeater.
	if err := nc.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		nc.Close()
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted {
		nc.Close()
		return nil, g.ctx.Err()
	}
	g.netConn = nc
	return nc, nil
}

// abort runs when ctx ends during the dial: it closes the socket, if one
// was dialed, so that the handshake fails, and makes a later dial fail.
func (g *dialGuard) abort() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.aborted = true
	if g.netConn != nil {
		g.netConn.Close()
	}
}

// socket returns the socket dialed, or nil if none was.
func (g *dialGuard) socket() net.Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.netConn
}

// dialError is the error Dial returns when amqp.DialConfig failed with err;
// stopped says the context's AfterFunc was stopped before it ran. A dial
// cut short by ctx reports ctx's error, a refused connection
// broker.ErrRefused, and a broker's refusal its code as a *broker.Error.
func dialError(ctx context.Context, err error, stopped bool) error {
	if !stopped || ctx.Err() != nil {
		// ctx ended during the dial: that is why it failed.
		return fmt.Errorf("rabbitmq: dial: %w (%v)", ctx.Err(), err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("rabbitmq: dial: %w: %w", broker.ErrRefused, err)
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return &broker.Error{Code: ae.Code, Reason: ae.Reason, Server: ae.Server, Connection: true}
	}
	return fmt.Errorf("rabbitmq: dial: %w", err)
}

// dialURI returns uri with its heartbeat query parameter set for hb: "0" when
// hb is zero (propose none), removed otherwise (so that amqprun.Config.Heartbeat,
// which the URI would override, takes effect).
func dialURI(uri string, hb time.Duration) (string, error) {
	if _, err := amqp.ParseURI(uri); err != nil {
		return "", fmt.Errorf("rabbitmq: bad AMQP URI: %w", err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("rabbitmq: bad AMQP URI: %w", err)
	}
	q := u.Query()
	if hb <= 0 {
		q.Set("heartbeat", "0")
	} else {
		q.Del("heartbeat")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func roundUpToSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// conn is one AMQP connection.
type conn struct {
	ac      *amqp.Connection
	netConn net.Conn

	mu     sync.Mutex
	reason error // why the connection closed; the first reason recorded wins

	closing   atomic.Bool    // Close was called
	done      chan struct{}  // closed when the close notification has been handled
	consumers sync.WaitGroup // delivery drainers
}

// watch drains the connection's close notification and records the reason.
func (c *conn) watch(notify chan *amqp.Error) {
	for e := range notify {
		if e != nil {
			c.setReason(&broker.Error{Code: e.Code, Reason: e.Reason, Server: e.Server, Connection: true})
		}
	}
	// Closed without an error: normally our own Close (or a close that
	// happened before NotifyClose was registered, right after the dial).
	reason := "channel/connection is not open"
	if c.closing.Load() {
		reason += " (closed by Conn.Close)"
	}
	c.setReason(&broker.Error{Code: broker.ChannelError, Reason: reason, Connection: true})
	close(c.done)
}

func (c *conn) setReason(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == nil {
		c.reason = err
	}
}

func (c *conn) getReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// waitDown waits until amqp091-go has finished tearing the connection down.
func (c *conn) waitDown() {
	t := time.NewTimer(teardownWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
}

// kill records reason and tears the connection down without the AMQP close
// handshake, by closing the socket.
func (c *conn) kill(reason error) {
	c.setReason(reason)
	c.netConn.Close()
	c.waitDown()
}

// Err reports why the connection closed, or nil while it is open as far as
// the client knows.
func (c *conn) Err() error {
	select {
	case <-c.done:
		return c.getReason()
	default:
	}
	if !c.ac.IsClosed() {
		return nil
	}
	c.waitDown() // amqp091-go is delivering the close notification
	if err := c.getReason(); err != nil {
		return err
	}
	return c.mapErr(amqp.ErrClosed)
}

// Close sends connection.close and waits for close-ok (at most closeTimeout).
// It returns nil only if the close handshake completed, that is when the
// broker has deleted the connection's exclusive queues; closing a connection
// that was already closed (or lost) returns the mapped 504 error.
func (c *conn) Close() error {
	c.closing.Store(true)
	err := c.ac.CloseDeadline(time.Now().Add(closeTimeout))
	if err != nil {
		// Whatever happened, the connection must be gone afterwards.
		c.netConn.Close()
	}
	c.waitDown()
	c.consumers.Wait()
	if err != nil {
		return c.mapErr(err)
	}
	return nil
}

// Channel opens a new channel.
func (c *conn) Channel(ctx context.Context) (broker.Channel, error) {
	var ach *amqp.Channel
	err := c.call(ctx, "channel.open", func() error {
		var err error
		ach, err = c.ac.Channel()
		return err
	})
	if err != nil {
		return nil, err
	}
	prefix := make([]byte, 6)
	_, _ = rand.Read(prefix)
	ch := &channel{
		c:        c,
		ach:      ach,
		sem:      make(chan struct{}, 1),
		closes:   ach.NotifyClose(make(chan *amqp.Error, 1)),
		returns:  ach.NotifyReturn(make(chan amqp.Return, returnsBuffer)),
		idPrefix: hex.EncodeToString(prefix) + "-",
	}
	return ch, nil
}

// call runs f, one amqp091-go method call that takes no context. If ctx is
// done before f starts, nothing is sent and ctx.Err() is returned. If ctx
// ends while f is outstanding, the connection is torn down (which makes f
// return) and the error wraps ctx.Err() and a connection-level *broker.Error.
// Otherwise f's error is mapped with mapErr.
func (c *conn) call(ctx context.Context, what string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return c.mapErr(f())
	}
	var abandoned error
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		be := &broker.Error{
			Code:       broker.FrameError,
			Reason:     fmt.Sprintf("connection torn down by the client: %v while waiting for %s", ctx.Err(), what),
			Connection: true,
		}
		abandoned = fmt.Errorf("%w: %w", ctx.Err(), be)
		c.kill(abandoned)
	})
	err := f()
	if !stop() {
		<-fired
		return abandoned
	}
	return c.mapErr(err)
}

// mapErr turns an error from amqp091-go into a *broker.Error.
func (c *conn) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		be := &broker.Error{Code: ae.Code, Reason: ae.Reason, Server: ae.Server}
		if !ae.Server && ae.Code == amqp.ChannelError {
			// amqp.ErrClosed (use after close) and ErrChannelMax carry
			// Recover false although they may concern a channel only.
			be.Connection = c.ac.IsClosed()
		} else {
			be.Connection = !ae.Recover || c.ac.IsClosed()
		}
		return be
	}
	// Not an AMQP error: a client-side write failed (for example a shortstr
	// over 255 bytes), and amqp091-go is tearing the connection down (501).
	be := &broker.Error{Code: broker.FrameError, Reason: err.Error(), Connection: true}
	c.kill(be)
	return be
}
