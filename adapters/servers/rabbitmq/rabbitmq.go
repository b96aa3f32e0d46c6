// Package rabbitmq implements broker.Broker against a real RabbitMQ broker
// through github.com/rabbitmq/amqp091-go.
//
// It is a thin, faithful mapping: every method sends the AMQP method the
// broker interface names and reports what the broker (or amqp091-go) said,
// with these rules:
//
//   - Errors. Every error that comes from amqp091-go is returned as a
//     *broker.Error: Code and Reason from the *amqp091.Error, Server as
//     amqp091 reports it, and Connection true when the connection is gone
//     (the error is not recoverable, or the connection is closed) and false
//     when only the channel is. A call on a closed channel gives Code 504
//     ("channel/connection is not open"), Server false. A failed client-side
//     write (for example a queue name over 255 bytes, which amqp091-go
//     refuses to encode) makes amqp091-go tear the whole connection down; it
//     is reported as Code 501, Server false, Connection true.
//   - Contexts. amqp091-go's methods take no context. Each method checks ctx
//     before it sends anything; if ctx is already done it returns ctx.Err()
//     (a plain error, nothing was sent, the connection is untouched). If ctx
//     ends while a method is outstanding, the outcome of that method is
//     unknown, so the connection is torn down at once by closing its socket
//     (no AMQP close handshake; the broker then releases the connection's
//     exclusive queues within milliseconds) and the method returns an error
//     that wraps both ctx.Err() and a connection-level *broker.Error (Code
//     501, Server false). The same error is what Conn.Err reports afterwards.
//   - Dial. Config.Heartbeat > 0 is proposed as is, rounded up to a whole
//     second (amqp091-go and AMQP count heartbeats in seconds; a sub-second
//     value would otherwise round down to 0 and negotiate the broker's
//     value). Config.Heartbeat == 0 proposes none by putting heartbeat=0 in
//     the URI (amqp091-go's Config.Heartbeat=0 would mean its 10 s default),
//     which negotiates the broker's value (60 s by default). Config.Name is
//     sent as the connection_name client property. A refused TCP connection
//     gives an error that wraps broker.ErrRefused. amqp091-go's experimental
//     auto-recovery is never enabled: it would silently re-declare exclusive
//     queues, that is re-acquire locks.
//   - Publish needs confirm mode: without a prior successful Confirm it
//     returns broker.ErrNotConfirming (a plain, client-side error; nothing is sent
//     and the channel stays usable). One publish is in flight per channel at
//     a time (all methods of a channel are serialized), every publish carries
//     a channel-unique message id, and Confirmation.Returned is true only if a
//     basic.return carrying that id preceded the confirm. A nack gives
//     Acked false and no error; a channel or connection that closes before
//     the confirm arrives gives the mapped close error instead.
//   - Consume starts a manual-ack consumer whose deliveries are drained and
//     dropped (never acknowledged) until the channel closes.
//
// All methods of one Channel are serialized; a Conn and its Channels may be
// used from several goroutines. Conn.Close waits until amqp091-go has torn the
// connection down and the adapter's goroutines have exited.
package rabbitmq

import (
	"context"
	"github.com/lockprover/lockprover/internal/realtime"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// New returns a Broker whose Dial connects to the AMQP URI url (for example
// amqp://guest:guest@127.0.0.1:5672/) and whose Sleep is a real timer.
func New(url string) broker.Broker {
	return &rmqBroker{url: url}
}

type rmqBroker struct {
	url string
}

// Sleep waits for d or until ctx is done, whichever comes first; in the
// second case it returns ctx.Err().
func (b *rmqBroker) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return realtime.Sleep(ctx, d)
}
