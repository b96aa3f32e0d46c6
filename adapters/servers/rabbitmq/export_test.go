package rabbitmq

import (
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// KillSocket closes c's socket without the AMQP close handshake, as a crash
// of the client process would.
func KillSocket(c broker.Conn) { c.(*conn).netConn.Close() }

// NegotiatedHeartbeat is the heartbeat interval amqp091-go negotiated for c.
func NegotiatedHeartbeat(c broker.Conn) time.Duration { return c.(*conn).ac.Config.Heartbeat }
