package prover

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockprover/lockprover/amqplocks/broker"
)

// An engine is where a plan's processes run: the simulator (virtual time,
// one process moving at a time) or a real broker (goroutines, wall-clock
// time, a fault proxy in front of each process). The runner is the same on
// both.
type engine interface {
	// Go runs fn as the process name, with its view of the broker.
	Go(name string, fn func(broker.Broker))
	// Now is the clock histories are recorded on, in nanoseconds.
	Now() int64
	// Fault strikes kill, pause, resume, partition, heal, force-close,
	// drop-reply or restart-broker (target "") at once.
	Fault(fault, target string) error
	// AfterMethods runs f once process name has sent n AMQP methods in all.
	AfterMethods(name string, n int, f func())
	// After runs f once d has passed.
	After(d time.Duration, f func())
	// Cost is what process name has sent so far.
	Cost(name string) Cost
	// Hold blocks a process between steps while it is paused, for engines
	// that cannot freeze it outright.
	Hold(b broker.Broker, name string)
	// OpContext bounds one operation (a wait gets long).
	OpContext(wait bool) (context.Context, context.CancelFunc)
	// Queues lists the queues whose names start with prefix, with the
	// process owning each exclusive one ("" for none or unknown).
	Queues(prefix string) ([]queueOwner, error)
}

type queueOwner struct{ name, owner string }

// Cost is what an operation (or a process) sent to the broker: AMQP methods
// by name, connections dialled, channels opened. The efficiency properties
// are judged from it.
type Cost struct {
	Methods     map[string]int
	Connections int
	Channels    int
}

// Sub is the cost between two snapshots.
func (c Cost) Sub(d Cost) Cost {
	out := Cost{Methods: map[string]int{}, Connections: c.Connections - d.Connections, Channels: c.Channels - d.Channels}
	for m, n := range c.Methods {
		if n -= d.Methods[m]; n != 0 {
			out.Methods[m] = n
		}
	}
	return out
}

// Total is the number of methods.
func (c Cost) Total() int {
	n := 0
	for _, k := range c.Methods {
		n += k
	}
	return n
}

func (c Cost) String() string {
	names := make([]string, 0, len(c.Methods))
	for m := range c.Methods {
		names = append(names, m)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, m := range names {
		fmt.Fprintf(&b, "%s=%d ", m, c.Methods[m])
	}
	fmt.Fprintf(&b, "channels=%d connections=%d", c.Channels, c.Connections)
	return b.String()
}
