// Package broker is the small AMQP 0-9-1 surface that amqp-locks needs from
// RabbitMQ, in the way database/sql/driver is the surface database/sql needs.
//
// Two implementations exist: the deterministic simulator (package sim) and
// real RabbitMQ through amqp091-go (package adapters/servers/rabbitmq). The reference
// implementation in package amqplocks is written against these interfaces
// only, so the same code runs on both.
//
// The surface is wider than the locks need: Consume, Get, Purge and Bind
// exist so that the simulator can be held to every measured broker behaviour
// and so that an implementation that uses them (which the spec forbids) can be
// caught.
package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Broker dials connections and keeps time. In the simulator both are
// virtual; against RabbitMQ they are real.
type Broker interface {
	// Dial opens a connection (the AMQP handshake included).
	Dial(ctx context.Context, cfg Config) (Conn, error)
	// Sleep waits for d on the broker's clock, or until ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

// Config is what a client asks for when it dials.
type Config struct {
	// Heartbeat is the heartbeat interval the client proposes. Zero proposes
	// none, which negotiates to the broker's own value (RabbitMQ's default
	// is 60 s); heartbeats are off only if both sides propose zero. A
	// negative value is a client that turns them off whatever the broker
	// proposes (its connection.tune-ok says 0, as pika's heartbeat=0 does):
	// the simulator serving such a client on the wire dials so.
	Heartbeat time.Duration
	// Name labels the connection in traces and broker listings.
	Name string
	// Node, on a simulated cluster, is the node the connection goes to,
	// as dialling that node's own port does on a real one (the simulator
	// served on the wire gives each node a port); empty, the process's
	// own node. A real broker's node is its URL's: Node is not read there.
	Node string
}

// A Conn is one AMQP connection. Exclusive queues belong to a connection,
// not to a channel: only the end of the connection releases them.
type Conn interface {
	// Channel opens a new channel.
	Channel(ctx context.Context) (Channel, error)
	// Close sends connection.close and waits for close-ok; the broker has
	// deleted the connection's exclusive queues when it returns.
	Close() error
	// Err reports why the connection is closed, or nil while it is open as
	// far as the client knows.
	Err() error
}

// A Channel is one AMQP channel. A channel-level error closes it; every
// later call returns a client-side 504 error and a new channel is needed.
type Channel interface {
	// Confirm puts the channel in publisher-confirm mode (confirm.select).
	Confirm(ctx context.Context) error
	// Declare sends queue.declare. With Passive set it is a three-way probe:
	// nil (exists and is not another connection's exclusive queue), a 404 or
	// a 405 error.
	Declare(ctx context.Context, name string, o DeclareOptions) (Queue, error)
	// Delete sends queue.delete and returns the number of ready messages the
	// queue held. Deleting a missing queue succeeds.
	Delete(ctx context.Context, name string, o DeleteOptions) (int, error)
	// Publish sends basic.publish and waits for its confirm. Without a prior
	// successful Confirm it sends nothing and returns ErrNotConfirming.
	Publish(ctx context.Context, p Publishing) (Confirmation, error)
	// Consume starts a consumer (manual acknowledgement) and returns its tag.
	Consume(ctx context.Context, queue string, exclusive bool) (string, error)
	// Get sends basic.get without auto-ack; ok is false when the queue was
	// empty.
	Get(ctx context.Context, queue string) (ok bool, err error)
	// Purge sends queue.purge and returns the number of messages removed.
	Purge(ctx context.Context, queue string) (int, error)
	// Bind binds queue to exchange with the routing key.
	Bind(ctx context.Context, queue, exchange, key string) error
	// Close sends channel.close. Exclusive queues survive it.
	Close() error
}

// DeclareOptions are the queue.declare flags and arguments.
type DeclareOptions struct {
	Passive, Durable, Exclusive, AutoDelete bool
	// Args are the x-arguments; values are int, int32, int64 or string.
	Args map[string]any
}

// Queue is the declare-ok reply.
type Queue struct {
	Name      string // the server's name for a queue declared as ""
	Messages  int    // ready messages
	Consumers int
}

// DeleteOptions are the queue.delete flags.
type DeleteOptions struct {
	IfUnused, IfEmpty bool
}

// Publishing is one basic.publish. Routing to a queue by name goes through
// the default exchange: Exchange "" and Key the queue's name.
type Publishing struct {
	Exchange, Key                    string
	Mandatory, Immediate, Persistent bool
	Body                             []byte
}

// Confirmation is what the broker answered to a confirmed publish.
type Confirmation struct {
	// Returned is true when a basic.return 312 NO_ROUTE preceded the
	// confirm: a mandatory message that no queue took.
	Returned bool
	// Acked is true for basic.ack and false for basic.nack (for example a
	// full queue with x-overflow reject-publish).
	Acked bool
}

// AMQP reply codes that amqp-locks meets.
const (
	ConnectionForced   = 320
	NoRoute            = 312
	AccessRefused      = 403
	NotFound           = 404
	ResourceLocked     = 405
	PreconditionFailed = 406
	FrameError         = 501
	ChannelError       = 504
	NotImplemented     = 540
)

// Error is an AMQP error as the client sees it.
type Error struct {
	Code   int    // AMQP reply code
	Reason string // reply text, e.g. "RESOURCE_LOCKED - cannot obtain ..."
	// Server is true when the broker sent the close; false when the client
	// detected it (heartbeat timeout, socket closed, use after close).
	Server bool
	// Connection is true when the whole connection is gone, false when only
	// the channel is.
	Connection bool
}

func (e *Error) Error() string {
	scope := "channel"
	if e.Connection {
		scope = "connection"
	}
	return fmt.Sprintf("amqp %s error %d: %s", scope, e.Code, e.Reason)
}

// ErrNotConfirming is returned by Publish on a channel that is not in
// confirm mode: a client-side usage error; the channel stays open.
var ErrNotConfirming = errors.New("broker: publish on a channel that is not in confirm mode (call Confirm first)")

// ErrRefused is returned by Dial when no broker accepts connections (for
// example while it restarts).
var ErrRefused = errors.New("broker: connection refused")

// Code returns the AMQP reply code carried by err, or 0 if there is none.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ConnectionLost reports whether err means the connection is gone: a
// connection-level AMQP error, or a refused dial.
func ConnectionLost(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Connection
	}
	return errors.Is(err, ErrRefused)
}
