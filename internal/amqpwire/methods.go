package amqpwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
)

// Method is one of the method structs of spec.go (ConnectionStart, ...,
// TxRollbackOK), always by pointer.
type Method interface {
	fields(c *codec)
}

// MethodID is a method as its class id << 16 | its method id: the first
// four bytes of a method frame's payload, big-endian.
type MethodID uint32

// ID makes the MethodID of a class id and a method id.
func ID(class, method uint16) MethodID { return MethodID(class)<<16 | MethodID(method) }

// Class is the id's class id (10 connection, 20 channel, 40 exchange, 50
// queue, 60 basic, 85 confirm, 90 tx).
func (id MethodID) Class() uint16 { return uint16(id >> 16) }

// Method is the id's method id within its class.
func (id MethodID) Method() uint16 { return uint16(id) }

// String is the method's full name ("queue.declare"), or
// "class.method(c,m)" for an id outside the protocol.
func (id MethodID) String() string {
	if m, ok := Lookup(id); ok {
		return m.Name
	}
	return fmt.Sprintf("class.method(%d,%d)", id.Class(), id.Method())
}

// MethodInfo is what the protocol says of one method beyond its fields.
type MethodInfo struct {
	ID   MethodID
	Name string // class.method, as the spec and RabbitMQ's errors spell it: "queue.declare"
	// FromClient and FromServer say who may send the method (the spec's
	// chassis, the other way round).
	FromClient, FromServer bool
	// Sync is the spec's synchronous: a request its sender waits on for
	// one of Replies (unless NoWait says it was sent with no-wait set), or
	// the reply to one.
	Sync bool
	// Replies are the methods that answer it; RabbitMQ answers
	// connection.start-ok and secure-ok with secure or tune, and
	// basic.recover with recover-ok, where the spec lists none.
	Replies []MethodID
	// NoWait says the method has a no-wait bit (its struct's NoWait
	// field): when set, no reply comes. NoWaitSet finds it in arguments.
	NoWait bool
	// Content says a content header and body frames follow the method.
	Content bool

	new     func() Method
	noWaitF int // index of the NoWait field in the struct; -1: none
}

// who sends a method and what it is, for the table below.
const (
	byClient    = 1 << iota // the client sends it
	byServer                // the server sends it
	synchronous             // the spec's synchronous
	withContent             // content follows it
	byBoth      = byClient | byServer
)

// info is one row of the table.
func info(class, method uint16, name string, flags int, new func() Method, replies ...uint16) MethodInfo {
	m := MethodInfo{ID: ID(class, method), Name: name, FromClient: flags&byClient != 0,
		FromServer: flags&byServer != 0, Sync: flags&synchronous != 0, Content: flags&withContent != 0, new: new}
	for _, r := range replies {
		m.Replies = append(m.Replies, ID(class, r))
	}
	return m
}

// methods is every method of AMQP 0-9-1 with RabbitMQ's extensions
// (connection.blocked, unblocked and update-secret, exchange.bind and
// unbind, basic.nack, confirm.select), once each, in the order of their ids.
var methods = []MethodInfo{
	info(10, 10, "connection.start", byServer|synchronous, func() Method { return new(ConnectionStart) }, 11),
	info(10, 11, "connection.start-ok", byClient|synchronous, func() Method { return new(ConnectionStartOK) }, 20, 30),
	info(10, 20, "connection.secure", byServer|synchronous, func() Method { return new(ConnectionSecure) }, 21),
	info(10, 21, "connection.secure-ok", byClient|synchronous, func() Method { return new(ConnectionSecureOK) }, 20, 30),
	info(10, 30, "connection.tune", byServer|synchronous, func() Method { return new(ConnectionTune) }, 31),
	info(10, 31, "connection.tune-ok", byClient|synchronous, func() Method { return new(ConnectionTuneOK) }),
	info(10, 40, "connection.open", byClient|synchronous, func() Method { return new(ConnectionOpen) }, 41),
	info(10, 41, "connection.open-ok", byServer|synchronous, func() Method { return new(ConnectionOpenOK) }),
	info(10, 50, "connection.close", byBoth|synchronous, func() Method { return new(ConnectionClose) }, 51),
	info(10, 51, "connection.close-ok", byBoth|synchronous, func() Method { return new(ConnectionCloseOK) }),
	info(10, 60, "connection.blocked", byBoth, func() Method { return new(ConnectionBlocked) }),
	info(10, 61, "connection.unblocked", byBoth, func() Method { return new(ConnectionUnblocked) }),
	info(10, 70, "connection.update-secret", byClient|synchronous, func() Method { return new(ConnectionUpdateSecret) }, 71),
	info(10, 71, "connection.update-secret-ok", byServer|synchronous, func() Method { return new(ConnectionUpdateSecretOK) }),

	info(20, 10, "channel.open", byClient|synchronous, func() Method { return new(ChannelOpen) }, 11),
	info(20, 11, "channel.open-ok", byServer|synchronous, func() Method { return new(ChannelOpenOK) }),
	info(20, 20, "channel.flow", byBoth|synchronous, func() Method { return new(ChannelFlow) }, 21),
	info(20, 21, "channel.flow-ok", byBoth, func() Method { return new(ChannelFlowOK) }),
	info(20, 40, "channel.close", byBoth|synchronous, func() Method { return new(ChannelClose) }, 41),
	info(20, 41, "channel.close-ok", byBoth|synchronous, func() Method { return new(ChannelCloseOK) }),

	info(40, 10, "exchange.declare", byClient|synchronous, func() Method { return new(ExchangeDeclare) }, 11),
	info(40, 11, "exchange.declare-ok", byServer|synchronous, func() Method { return new(ExchangeDeclareOK) }),
	info(40, 20, "exchange.delete", byClient|synchronous, func() Method { return new(ExchangeDelete) }, 21),
	info(40, 21, "exchange.delete-ok", byServer|synchronous, func() Method { return new(ExchangeDeleteOK) }),
	info(40, 30, "exchange.bind", byClient|synchronous, func() Method { return new(ExchangeBind) }, 31),
	info(40, 31, "exchange.bind-ok", byServer|synchronous, func() Method { return new(ExchangeBindOK) }),
	info(40, 40, "exchange.unbind", byClient|synchronous, func() Method { return new(ExchangeUnbind) }, 51),
	info(40, 51, "exchange.unbind-ok", byServer|synchronous, func() Method { return new(ExchangeUnbindOK) }),

	info(50, 10, "queue.declare", byClient|synchronous, func() Method { return new(QueueDeclare) }, 11),
	info(50, 11, "queue.declare-ok", byServer|synchronous, func() Method { return new(QueueDeclareOK) }),
	info(50, 20, "queue.bind", byClient|synchronous, func() Method { return new(QueueBind) }, 21),
	info(50, 21, "queue.bind-ok", byServer|synchronous, func() Method { return new(QueueBindOK) }),
	info(50, 30, "queue.purge", byClient|synchronous, func() Method { return new(QueuePurge) }, 31),
	info(50, 31, "queue.purge-ok", byServer|synchronous, func() Method { return new(QueuePurgeOK) }),
	info(50, 40, "queue.delete", byClient|synchronous, func() Method { return new(QueueDelete) }, 41),
	info(50, 41, "queue.delete-ok", byServer|synchronous, func() Method { return new(QueueDeleteOK) }),
	info(50, 50, "queue.unbind", byClient|synchronous, func() Method { return new(QueueUnbind) }, 51),
	info(50, 51, "queue.unbind-ok", byServer|synchronous, func() Method { return new(QueueUnbindOK) }),

	info(60, 10, "basic.qos", byClient|synchronous, func() Method { return new(BasicQos) }, 11),
	info(60, 11, "basic.qos-ok", byServer|synchronous, func() Method { return new(BasicQosOK) }),
	info(60, 20, "basic.consume", byClient|synchronous, func() Method { return new(BasicConsume) }, 21),
	info(60, 21, "basic.consume-ok", byServer|synchronous, func() Method { return new(BasicConsumeOK) }),
	info(60, 30, "basic.cancel", byBoth|synchronous, func() Method { return new(BasicCancel) }, 31),
	info(60, 31, "basic.cancel-ok", byBoth|synchronous, func() Method { return new(BasicCancelOK) }),
	info(60, 40, "basic.publish", byClient|withContent, func() Method { return new(BasicPublish) }),
	info(60, 50, "basic.return", byServer|withContent, func() Method { return new(BasicReturn) }),
	info(60, 60, "basic.deliver", byServer|withContent, func() Method { return new(BasicDeliver) }),
	info(60, 70, "basic.get", byClient|synchronous, func() Method { return new(BasicGet) }, 71, 72),
	info(60, 71, "basic.get-ok", byServer|synchronous|withContent, func() Method { return new(BasicGetOK) }),
	info(60, 72, "basic.get-empty", byServer|synchronous, func() Method { return new(BasicGetEmpty) }),
	info(60, 80, "basic.ack", byBoth, func() Method { return new(BasicAck) }),
	info(60, 90, "basic.reject", byClient, func() Method { return new(BasicReject) }),
	info(60, 100, "basic.recover-async", byClient, func() Method { return new(BasicRecoverAsync) }),
	info(60, 110, "basic.recover", byClient|synchronous, func() Method { return new(BasicRecover) }, 111),
	info(60, 111, "basic.recover-ok", byServer|synchronous, func() Method { return new(BasicRecoverOK) }),
	info(60, 120, "basic.nack", byBoth, func() Method { return new(BasicNack) }),

	info(85, 10, "confirm.select", byClient|synchronous, func() Method { return new(ConfirmSelect) }, 11),
	info(85, 11, "confirm.select-ok", byServer|synchronous, func() Method { return new(ConfirmSelectOK) }),

	info(90, 10, "tx.select", byClient|synchronous, func() Method { return new(TxSelect) }, 11),
	info(90, 11, "tx.select-ok", byServer|synchronous, func() Method { return new(TxSelectOK) }),
	info(90, 20, "tx.commit", byClient|synchronous, func() Method { return new(TxCommit) }, 21),
	info(90, 21, "tx.commit-ok", byServer|synchronous, func() Method { return new(TxCommitOK) }),
	info(90, 30, "tx.rollback", byClient|synchronous, func() Method { return new(TxRollback) }, 31),
	info(90, 31, "tx.rollback-ok", byServer|synchronous, func() Method { return new(TxRollbackOK) }),
}

var (
	byID   = map[MethodID]int{}
	byType = map[reflect.Type]int{}
)

func init() {
	for i := range methods {
		m := &methods[i]
		byID[m.ID] = i
		t := reflect.TypeOf(m.new())
		byType[t] = i
		m.noWaitF = -1
		if f, ok := t.Elem().FieldByName("NoWait"); ok {
			m.NoWait, m.noWaitF = true, f.Index[0]
		}
	}
}

// Methods is the table of every method, in the order of their ids. The
// slice is a copy; its rows' Replies are shared and must not be changed.
func Methods() []MethodInfo { return append([]MethodInfo(nil), methods...) }

// Lookup returns the method with that id, and whether there is one.
func Lookup(id MethodID) (MethodInfo, bool) {
	i, ok := byID[id]
	if !ok {
		return MethodInfo{}, false
	}
	return methods[i], true
}

// IDOf is the id of m's method (0 for a nil m).
func IDOf(m Method) MethodID {
	i, ok := byType[reflect.TypeOf(m)]
	if !ok {
		return 0
	}
	return methods[i].ID
}

// ErrUnknownMethod is what DecodeMethod's error wraps for a class and
// method id outside the protocol.
var ErrUnknownMethod = errors.New("not a method of AMQP 0-9-1 or of RabbitMQ's extensions")

// AppendMethod appends the payload of m's method frame to b: its class and
// method ids, then its fields. It fails on a value the wire cannot hold: a
// short string over 255 bytes, a table value of a Go type that is no field
// type.
func AppendMethod(b []byte, m Method) ([]byte, error) {
	i, ok := byType[reflect.TypeOf(m)]
	if !ok {
		return b, fmt.Errorf("amqpwire: %T is not a method", m)
	}
	c := codec{enc: true, b: binary.BigEndian.AppendUint32(b, uint32(methods[i].ID))}
	m.fields(&c)
	if c.err != nil {
		return b, fmt.Errorf("amqpwire: %s: %w", methods[i].Name, c.err)
	}
	return c.b, nil
}

// DecodeMethod decodes a method frame's payload. It fails, naming the
// method and the field, on an unknown method id (wrapping
// ErrUnknownMethod), on fields the payload is too short for, and on bytes
// left after the last field (RabbitMQ refuses each).
func DecodeMethod(payload []byte) (Method, error) {
	if len(payload) < 4 {
		return nil, fmt.Errorf("amqpwire: method frame of %d bytes, shorter than its class and method ids", len(payload))
	}
	id := MethodID(binary.BigEndian.Uint32(payload))
	i, ok := byID[id]
	if !ok {
		return nil, fmt.Errorf("amqpwire: class %d, method %d: %w", id.Class(), id.Method(), ErrUnknownMethod)
	}
	m := methods[i].new()
	c := codec{b: payload[4:]}
	m.fields(&c)
	if c.err == nil && len(c.b) > 0 {
		c.err = fmt.Errorf("%d bytes after the last field", len(c.b))
	}
	if c.err != nil {
		return nil, fmt.Errorf("amqpwire: %s: %w", methods[i].Name, c.err)
	}
	return m, nil
}

// NoWaitSet reports whether a request's arguments (its payload after the
// class and method ids) have the no-wait bit set. The arguments may end
// anywhere after the bit, as they do for a proxy that looks only at the
// start of a frame; arguments that end before it, or a method with no such
// bit, count as a request that waits for its reply.
func (m MethodInfo) NoWaitSet(args []byte) bool {
	if m.noWaitF < 0 || m.new == nil {
		return false
	}
	v := m.new()
	c := codec{b: args}
	v.fields(&c)
	return reflect.ValueOf(v).Elem().Field(m.noWaitF).Bool()
}
