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

	"github.com/lockprover/lockprover/amqplocks/broker"
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

	var (
		mu      sync.Mutex
		netConn net.Conn
		aborted bool
	)
	acfg := amqp.Config{
		Heartbeat:  roundUpToSecond(cfg.Heartbeat),
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: handshakeTimeout}
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// A deadline for the AMQP handshake (ctx is enforced by the
			// AfterFunc below); amqp091-go clears it in openComplete and
			// then leaves read deadlines to its heartbeater.
			if err := nc.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
				nc.Close()
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			if aborted {
				nc.Close()
				return nil, ctx.Err()
			}
			netConn = nc
			return nc, nil
		},
		// Recovery stays nil: auto-recovery would re-declare exclusive
		// queues behind the caller's back.
	}

	// The handshake takes no context: if ctx ends during it, close the socket.
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		aborted = true
		if netConn != nil {
			netConn.Close()
		}
	})
	ac, err := amqp.DialConfig(uri, acfg)
	stopped := stop()

	mu.Lock()
	nc := netConn
	mu.Unlock()

	if err != nil {
		if nc != nil {
			nc.Close() // make sure amqp091-go's reader and heartbeater exit
		}
		if !stopped || ctx.Err() != nil {
			// ctx ended during the dial: that is why it failed.
			return nil, fmt.Errorf("rabbitmq: dial: %w (%v)", ctx.Err(), err)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("rabbitmq: dial: %w: %w", broker.ErrRefused, err)
		}
		var ae *amqp.Error
		if errors.As(err, &ae) {
			return nil, &broker.Error{Code: ae.Code, Reason: ae.Reason, Server: ae.Server, Connection: true}
		}
		return nil, fmt.Errorf("rabbitmq: dial: %w", err)
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

// dialURI returns uri with its heartbeat query parameter set for hb: "0" when
// hb is zero (propose none), removed otherwise (so that amqp.Config.Heartbeat,
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
