package semantics

import (
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Queue actions. Queue names are symbolic: the runner prefixes them, except
// "" (server-named), names under "amq." and "LONG" (256 bytes).

// Declare declares q with o.
func Declare(q string, o broker.DeclareOptions) Action {
	return Action{op: "declare", queue: q, declare: o}
}

// Passive declares q passively with o's other fields (which RabbitMQ ignores).
func Passive(q string, o broker.DeclareOptions) Action {
	o.Passive = true
	return Declare(q, o)
}

// Delete deletes q.
func Delete(q string, o broker.DeleteOptions) Action {
	return Action{op: "delete", queue: q, delete: o}
}

// Publish publishes to q through p.Exchange ("" is the default exchange).
func Publish(q string, p broker.Publishing) Action {
	return Action{op: "publish", queue: q, publish: p}
}

// Consume starts a consumer on q.
func Consume(q string, exclusive bool) Action {
	return Action{op: "consume", queue: q, exclusive: exclusive}
}

// Get sends basic.get on q: "ok" for a message, "empty" for none.
func Get(q string) Action { return Action{op: "get", queue: q} }

// Purge purges q.
func Purge(q string) Action { return Action{op: "purge", queue: q} }

// Bind binds q to exchange with q's name as the key.
func Bind(q, exchange string) Action { return Action{op: "bind", queue: q, exchange: exchange} }

// Inspect describes q from the broker's side ("gone" if it does not exist).
func Inspect(q string) Action { return Action{op: "inspect", queue: q} }

// AwaitGone polls q until it no longer exists.
func AwaitGone(q string) Action { return Action{op: "await-gone", queue: q} }

// Connection and channel actions.
var (
	Dial         = Action{op: "dial"}          // open the step's connection and channel now
	Reopen       = Action{op: "reopen"}        // replace the step's channel by a new one
	Redial       = Action{op: "redial"}        // dial the step's connection again
	CloseChannel = Action{op: "close-channel"} // channel.close
	CloseConn    = Action{op: "close-conn"}    // connection.close
	ConnError    = Action{op: "conn-error"}    // why the connection closed, as the client knows it
	Partition    = Action{op: "partition"}     // no bytes either way, sockets open
	Heal         = Action{op: "heal"}
	CloseSocket  = Action{op: "close-socket"} // the client's socket closes with no AMQP close
	ForceClose   = Action{op: "force-close"}  // rabbitmqctl close_connection
	Stop         = Action{op: "stop"}         // rabbitmqctl stop_app
	Start        = Action{op: "start"}        // rabbitmqctl start_app
	Mark         = Action{op: "mark"}         // Within counts from here
)

// Heartbeat sets the heartbeat the step's connection proposes when dialled.
func Heartbeat(d time.Duration) Action { return Action{op: "heartbeat", d: d} }

// Wait sleeps d on the broker's clock.
func Wait(d time.Duration) Action { return Action{op: "wait", d: d} }
