package broker

import (
	"fmt"
	"sort"
	"strings"
)

// Cost is what an operation (or a process) sent to the broker: AMQP methods
// by name, connections dialled, channels opened. The amqp-locks checker
// judges the efficiency properties from it. It is the one representation
// of what a client sent: the simulator reports it (rabbitmqsim.World.Cost), and so
// does the counting proxy in front of a real broker (amqpproxy.Counts.Sent). It
// lives here, beside the interface whose methods it counts, so that the
// simulator and the proxy need nothing above them.
type Cost struct {
	// Methods counts methods by full AMQP name ("queue.declare",
	// "basic.publish"); names never sent are absent.
	Methods     map[string]int
	Connections int // connections dialled
	Channels    int // channels opened (channel.open sent)
}

// Sub is the cost between two snapshots, c the later: methods whose
// difference is zero are left out (counts only grow, so a name only in d
// does not occur).
func (c Cost) Sub(d Cost) Cost {
	out := Cost{Methods: map[string]int{}, Connections: c.Connections - d.Connections, Channels: c.Channels - d.Channels}
	for m, n := range c.Methods {
		if n -= d.Methods[m]; n != 0 {
			out.Methods[m] = n
		}
	}
	return out
}

// Class sums the methods of one AMQP class ("connection", "channel",
// "queue", "basic", "confirm", ...): Class("queue") counts queue.declare,
// queue.delete and the rest.
func (c Cost) Class(class string) int {
	n := 0
	for m, k := range c.Methods {
		if cl, _, _ := strings.Cut(m, "."); cl == class {
			n += k
		}
	}
	return n
}

// Total is the number of methods.
func (c Cost) Total() int {
	n := 0
	for _, k := range c.Methods {
		n += k
	}
	return n
}

// String lists the methods by name, then channels and connections, for
// reports: "channel.open=1 queue.declare=2 channels=1 connections=1".
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
