package amqprun

import (
	"context"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// A place is where a plan's processes run: the simulator (virtual time,
// one process moving at a time) or a real broker (goroutines, wall-clock
// time, a fault proxy in front of each process). The runner is the same on
// both.
type place interface {
	// Target is the clock histories are recorded on, and the faults,
	// struck at once: kill, pause (until its resume), partition (until
	// its heal), force-close, drop-reply, restart-broker (Aim.Process "",
	// or a node of a cluster), aimed at a process, a node, or the links
	// between nodes (Aim.Process "n1>n2 ...").
	run.Target
	// Go runs fn as the process name, with its view of the broker.
	Go(name string, fn func(broker.Broker))
	// AfterMethods runs f once process name has sent n AMQP methods in all.
	AfterMethods(name string, n int, f func())
	// After runs f once d has passed.
	After(d time.Duration, f func())
	// Cost is what process name has sent so far.
	Cost(name string) broker.Cost
	// Hold blocks a process between steps while it is paused, for places
	// that cannot freeze it outright.
	Hold(b broker.Broker, name string)
	// OpContext bounds one operation (a wait gets long).
	OpContext(wait bool) (context.Context, context.CancelFunc)
	// Queues lists the queues whose names start with prefix, with the
	// process owning each exclusive one ("" for none or unknown).
	Queues(prefix string) ([]queueOwner, error)
	// Notice waits, once every process is done, until the broker has
	// noticed every connection of the plan that is gone (deleted its
	// exclusive queues, requeued its consumers' messages), for at most
	// limit: on the simulator, limit itself, as heartbeats decide there.
	Notice(b broker.Broker, lock string, limit time.Duration)
}

type queueOwner struct {
	name, owner string
	// how, if set, says how the queue was found where not by a passive
	// declare (a leak names it).
	how string
}

// A settler is a place whose backend must be brought back to its first
// state before the quiescent probe (a cluster made one again), whatever
// the plan's heartbeat.
type settler interface {
	Settle()
}

// onCluster is a place that may run on a RabbitMQ cluster: its
// partition handling mode ("" on a single broker).
type onCluster interface {
	partitionHandling() string
}

// A countReader reads what process name has sent into c, with no map,
// where place.Cost makes a fresh one on every call: the simulator's
// place, which the runner asks twice an operation.
type countReader interface {
	ReadCounts(name string, c *rabbitmqsim.Counts)
}

// endOf is the history's name of a's end: resume, heal.
func endOf(a run.Aim) string { return histories.EndOf(a.Fault) }
