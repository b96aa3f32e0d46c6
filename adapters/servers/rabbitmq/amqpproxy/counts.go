package amqpproxy

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Counts is what passed through a Proxy, over all its connections so far.
// Efficiency properties ("verify is one basic.publish and its confirm") are
// judged from the difference of two snapshots (Sub).
//
// Frames are counted as the proxy reads and decides them, so a frame held
// by a partition is already counted, and one read just before a Kill may be
// counted without having been delivered. A reply dropped by DropReply, and
// anything after it, is not counted as received.
type Counts struct {
	// Sent is what the client sent to the broker: methods by full name
	// ("queue.declare"; "class.method(c,m)" for ids outside AMQP 0-9-1),
	// the connections the proxy accepted from it (a reconnect is a second
	// one) and the channels it opened (Sent.Methods["channel.open"]).
	Sent broker.Cost
	// Received counts methods from the broker to the client by full name
	// ("basic.ack"), as Sent.Methods does. Names never seen are absent.
	Received map[string]int
	// Heartbeat frames each way (they are not methods; content header
	// and body frames are not counted at all).
	HeartbeatsSent, HeartbeatsReceived int
	// Malformed is how many connections were closed because a frame was
	// malformed (bad frame-end, size over 128 MiB, a method frame too
	// short, no protocol header).
	Malformed int
	// Dropped is how many replies DropReply dropped (each killed its
	// connection).
	Dropped int
}

// Class sums the methods of one class ("connection", "channel", "exchange",
// "queue", "basic", "confirm", "tx") sent and received.
func (c Counts) Class(class string) (sent, received int) {
	return c.Sent.Class(class), broker.Cost{Methods: c.Received}.Class(class)
}

// Sub returns what c counted beyond an earlier snapshot: what happened
// between the two. Names whose difference is zero are left out.
func (c Counts) Sub(earlier Counts) Counts {
	received := maps.Clone(c.Received)
	if received == nil {
		received = map[string]int{}
	}
	for name, k := range earlier.Received {
		received[name] -= k
	}
	maps.DeleteFunc(received, func(_ string, k int) bool { return k == 0 })
	return Counts{
		Sent:               c.Sent.Sub(earlier.Sent),
		Received:           received,
		HeartbeatsSent:     c.HeartbeatsSent - earlier.HeartbeatsSent,
		HeartbeatsReceived: c.HeartbeatsReceived - earlier.HeartbeatsReceived,
		Malformed:          c.Malformed - earlier.Malformed,
		Dropped:            c.Dropped - earlier.Dropped,
	}
}

// Directions, indexing counters.
const (
	toBroker = 0
	toClient = 1
)

// counters are a Proxy's live counts. Known methods and heartbeats are
// atomics indexed by the method table; the rare methods outside it go to a
// map.
type counters struct {
	methods     [2][]atomic.Int64
	heartbeats  [2]atomic.Int64
	connections atomic.Int64
	malformed   atomic.Int64
	dropped     atomic.Int64

	mu      sync.Mutex
	unknown [2]map[string]int
}

func newCounters() *counters {
	c := &counters{}
	for d := range c.methods {
		c.methods[d] = make([]atomic.Int64, len(methods))
		c.unknown[d] = map[string]int{}
	}
	return c
}

// tally is one counted frame: a method (index into methods, or an id
// outside them) or a heartbeat.
type tally struct {
	heartbeat bool
	index     int // into methods; -1: id is outside the table
	id        methodID
}

func (c *counters) add(dir int, t tally) {
	switch {
	case t.heartbeat:
		c.heartbeats[dir].Add(1)
	case t.index >= 0:
		c.methods[dir][t.index].Add(1)
	default:
		c.mu.Lock()
		c.unknown[dir][methodName(t.id)]++
		c.mu.Unlock()
	}
}

func (c *counters) snapshot() Counts {
	s := Counts{
		Sent:               broker.Cost{Methods: map[string]int{}, Connections: int(c.connections.Load())},
		Received:           map[string]int{},
		HeartbeatsSent:     int(c.heartbeats[toBroker].Load()),
		HeartbeatsReceived: int(c.heartbeats[toClient].Load()),
		Malformed:          int(c.malformed.Load()),
		Dropped:            int(c.dropped.Load()),
	}
	for d, m := range [2]map[string]int{s.Sent.Methods, s.Received} {
		for i := range c.methods[d] {
			if k := c.methods[d][i].Load(); k != 0 {
				m[methods[i].name] = int(k)
			}
		}
		c.mu.Lock()
		maps.Copy(m, c.unknown[d])
		c.mu.Unlock()
	}
	s.Sent.Channels = s.Sent.Methods["channel.open"]
	return s
}
