package amqpproxy

import "fmt"

// methodID is an AMQP method as class-id<<16 | method-id, the first four
// bytes of a method frame's payload.
type methodID uint32

func mid(class, method uint16) methodID { return methodID(class)<<16 | methodID(method) }

func (id methodID) class() uint16  { return uint16(id >> 16) }
func (id methodID) method() uint16 { return uint16(id) }

// Methods the tracker looks at by identity.
var (
	connectionClose = mid(10, 50)
	channelOpen     = mid(20, 10)
	channelClose    = mid(20, 40)
	channelCloseOk  = mid(20, 41)
	basicPublish    = mid(60, 40)
	basicReturn     = mid(60, 50)
	basicAck        = mid(60, 80)
	basicNack       = mid(60, 120)
	confirmSelect   = mid(85, 10)
)

// noWait says where a request's no-wait bit sits: after `shorts` 16-bit
// fields and `strs` short strings comes the bit octet, and the flag is bit
// `bit` of it. A request sent with no-wait set gets no reply.
type noWait struct {
	ok           bool
	shorts, strs int
	bit          uint
}

// methodInfo describes one method of AMQP 0-9-1 (with RabbitMQ's
// extensions: confirm, basic.nack, exchange bindings, connection.blocked,
// connection.update-secret).
type methodInfo struct {
	id      methodID
	name    string
	replies []methodID // for a client request: the broker methods that answer it
	noWait  noWait
}

func nw(shorts, strs int, bit uint) noWait {
	return noWait{ok: true, shorts: shorts, strs: strs, bit: bit}
}

// methods is every method of the protocol. The order is fixed: it indexes
// the Proxy's counters.
var methods = []methodInfo{
	{id: mid(10, 10), name: "connection.start"},
	{id: mid(10, 11), name: "connection.start-ok", replies: []methodID{mid(10, 20), mid(10, 30)}},
	{id: mid(10, 20), name: "connection.secure"},
	{id: mid(10, 21), name: "connection.secure-ok", replies: []methodID{mid(10, 20), mid(10, 30)}},
	{id: mid(10, 30), name: "connection.tune"},
	{id: mid(10, 31), name: "connection.tune-ok"},
	{id: mid(10, 40), name: "connection.open", replies: []methodID{mid(10, 41)}},
	{id: mid(10, 41), name: "connection.open-ok"},
	{id: mid(10, 50), name: "connection.close", replies: []methodID{mid(10, 51)}},
	{id: mid(10, 51), name: "connection.close-ok"},
	{id: mid(10, 60), name: "connection.blocked"},
	{id: mid(10, 61), name: "connection.unblocked"},
	{id: mid(10, 70), name: "connection.update-secret", replies: []methodID{mid(10, 71)}},
	{id: mid(10, 71), name: "connection.update-secret-ok"},

	{id: mid(20, 10), name: "channel.open", replies: []methodID{mid(20, 11)}},
	{id: mid(20, 11), name: "channel.open-ok"},
	{id: mid(20, 20), name: "channel.flow", replies: []methodID{mid(20, 21)}},
	{id: mid(20, 21), name: "channel.flow-ok"},
	{id: mid(20, 40), name: "channel.close", replies: []methodID{mid(20, 41)}},
	{id: mid(20, 41), name: "channel.close-ok"},

	{id: mid(40, 10), name: "exchange.declare", replies: []methodID{mid(40, 11)}, noWait: nw(1, 2, 4)},
	{id: mid(40, 11), name: "exchange.declare-ok"},
	{id: mid(40, 20), name: "exchange.delete", replies: []methodID{mid(40, 21)}, noWait: nw(1, 1, 1)},
	{id: mid(40, 21), name: "exchange.delete-ok"},
	{id: mid(40, 30), name: "exchange.bind", replies: []methodID{mid(40, 31)}, noWait: nw(1, 3, 0)},
	{id: mid(40, 31), name: "exchange.bind-ok"},
	{id: mid(40, 40), name: "exchange.unbind", replies: []methodID{mid(40, 51)}, noWait: nw(1, 3, 0)},
	{id: mid(40, 51), name: "exchange.unbind-ok"},

	{id: mid(50, 10), name: "queue.declare", replies: []methodID{mid(50, 11)}, noWait: nw(1, 1, 4)},
	{id: mid(50, 11), name: "queue.declare-ok"},
	{id: mid(50, 20), name: "queue.bind", replies: []methodID{mid(50, 21)}, noWait: nw(1, 3, 0)},
	{id: mid(50, 21), name: "queue.bind-ok"},
	{id: mid(50, 30), name: "queue.purge", replies: []methodID{mid(50, 31)}, noWait: nw(1, 1, 0)},
	{id: mid(50, 31), name: "queue.purge-ok"},
	{id: mid(50, 40), name: "queue.delete", replies: []methodID{mid(50, 41)}, noWait: nw(1, 1, 2)},
	{id: mid(50, 41), name: "queue.delete-ok"},
	{id: mid(50, 50), name: "queue.unbind", replies: []methodID{mid(50, 51)}},
	{id: mid(50, 51), name: "queue.unbind-ok"},

	{id: mid(60, 10), name: "basic.qos", replies: []methodID{mid(60, 11)}},
	{id: mid(60, 11), name: "basic.qos-ok"},
	{id: mid(60, 20), name: "basic.consume", replies: []methodID{mid(60, 21)}, noWait: nw(1, 2, 3)},
	{id: mid(60, 21), name: "basic.consume-ok"},
	{id: mid(60, 30), name: "basic.cancel", replies: []methodID{mid(60, 31)}, noWait: nw(0, 1, 0)},
	{id: mid(60, 31), name: "basic.cancel-ok"},
	{id: mid(60, 40), name: "basic.publish"}, // replies are confirms: see session
	{id: mid(60, 50), name: "basic.return"},
	{id: mid(60, 60), name: "basic.deliver"},
	{id: mid(60, 70), name: "basic.get", replies: []methodID{mid(60, 71), mid(60, 72)}},
	{id: mid(60, 71), name: "basic.get-ok"},
	{id: mid(60, 72), name: "basic.get-empty"},
	{id: mid(60, 80), name: "basic.ack"},
	{id: mid(60, 90), name: "basic.reject"},
	{id: mid(60, 100), name: "basic.recover-async"},
	{id: mid(60, 110), name: "basic.recover", replies: []methodID{mid(60, 111)}},
	{id: mid(60, 111), name: "basic.recover-ok"},
	{id: mid(60, 120), name: "basic.nack"},

	{id: mid(85, 10), name: "confirm.select", replies: []methodID{mid(85, 11)}, noWait: nw(0, 0, 0)},
	{id: mid(85, 11), name: "confirm.select-ok"},

	{id: mid(90, 10), name: "tx.select", replies: []methodID{mid(90, 11)}},
	{id: mid(90, 11), name: "tx.select-ok"},
	{id: mid(90, 20), name: "tx.commit", replies: []methodID{mid(90, 21)}},
	{id: mid(90, 21), name: "tx.commit-ok"},
	{id: mid(90, 30), name: "tx.rollback", replies: []methodID{mid(90, 31)}},
	{id: mid(90, 31), name: "tx.rollback-ok"},
}

var (
	methodIndex  = map[methodID]int{}
	methodByName = map[string]int{}
)

func init() {
	for i, m := range methods {
		methodIndex[m.id] = i
		methodByName[m.name] = i
	}
}

// lookup returns the method's description, or nil for an id outside the
// protocol.
func lookup(id methodID) (int, *methodInfo) {
	i, ok := methodIndex[id]
	if !ok {
		return -1, nil
	}
	return i, &methods[i]
}

// methodName is the full name of a method ("queue.declare"), or
// "class.method(c,m)" for ids outside the protocol.
func methodName(id methodID) string {
	if _, m := lookup(id); m != nil {
		return m.name
	}
	return fmt.Sprintf("class.method(%d,%d)", id.class(), id.method())
}

// isNoWait reports whether a request's arguments (the method payload after
// the class and method ids) have the no-wait bit set. Arguments too short to
// hold the bit count as a request that waits.
func isNoWait(m *methodInfo, args []byte) bool {
	if !m.noWait.ok {
		return false
	}
	i := 2 * m.noWait.shorts
	for range m.noWait.strs {
		if i >= len(args) {
			return false
		}
		i += 1 + int(args[i])
	}
	return i < len(args) && args[i]&(1<<m.noWait.bit) != 0
}
