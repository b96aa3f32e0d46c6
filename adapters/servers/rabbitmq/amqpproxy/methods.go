package amqpproxy

import "github.com/lockprover/lockprover/internal/amqpwire"

// methodID is an AMQP method as class-id<<16 | method-id, the first four
// bytes of a method frame's payload: an amqpwire.MethodID as the tracker
// and the counters hold it.
type methodID uint32

func mid(class, method uint16) methodID { return methodID(amqpwire.ID(class, method)) }

func (id methodID) class() uint16  { return amqpwire.MethodID(id).Class() }
func (id methodID) method() uint16 { return amqpwire.MethodID(id).Method() }

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

// methodInfo is a row of amqpwire's method table as the tracker reads it.
type methodInfo struct {
	id      methodID
	name    string
	replies []methodID // for a client request: the broker methods that answer it
	wire    amqpwire.MethodInfo
}

// methods is every method of the protocol, in amqpwire's table's order,
// which indexes the Proxy's counters. A method only the broker sends
// (connection.start, secure, tune) has no replies here: the proxy waits
// only on the client's requests.
var methods = func() []methodInfo {
	var ms []methodInfo
	for _, w := range amqpwire.Methods() {
		m := methodInfo{id: methodID(w.ID), name: w.Name, wire: w}
		if w.FromClient {
			for _, r := range w.Replies {
				m.replies = append(m.replies, methodID(r))
			}
		}
		ms = append(ms, m)
	}
	return ms
}()

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
func methodName(id methodID) string { return amqpwire.MethodID(id).String() }

// isNoWait reports whether a request's arguments (the method payload after
// the class and method ids) have the no-wait bit set. Arguments too short to
// hold the bit count as a request that waits.
func isNoWait(m *methodInfo, args []byte) bool { return m.wire.NoWaitSet(args) }
