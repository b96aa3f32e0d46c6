package rabbitmqsim

import "github.com/lockprover/lockprover/model/amqplocks/broker"

// method is an AMQP method a client sends.
type method uint8

const (
	mConnStartOk method = iota
	mConnTuneOk
	mConnOpen
	mConnClose
	mConnCloseOk
	mChanOpen
	mChanClose
	mChanCloseOk
	mConfirmSelect
	mQueueDeclare
	mQueueDelete
	mQueuePurge
	mQueueBind
	mBasicPublish
	mBasicConsume
	mBasicGet
	mBasicAck
	mBasicNack
	mBasicReject
	mBasicCancel
	numMethods
)

var methodNames = [numMethods]string{
	"connection.start-ok", "connection.tune-ok", "connection.open", "connection.close", "connection.close-ok",
	"channel.open", "channel.close", "channel.close-ok",
	"confirm.select",
	"queue.declare", "queue.delete", "queue.purge", "queue.bind",
	"basic.publish", "basic.consume", "basic.get", "basic.ack", "basic.nack", "basic.reject", "basic.cancel",
}

func (m method) String() string { return methodNames[m] }

// counters are what one process sent to the broker, kept as an array by
// method for the hot path: AMQP methods, channels and connections opened,
// and round trips it waited for. World.Cost is their exported view.
type counters struct {
	methods     [numMethods]int
	channels    int // channel.open sent
	connections int // connections dialled
	roundTrips  int // synchronous exchanges waited for
}

// sent is the number of methods sent.
func (c *counters) sent() int {
	n := 0
	for _, k := range c.methods {
		n += k
	}
	return n
}

// Cost returns what the process named name has sent so far: the AMQP
// methods it sent at least once by name, the connections it dialled and
// the channels it opened. An unknown name has sent nothing. (ReadCounts
// says the same without a map.)
func (w *World) Cost(name string) broker.Cost {
	c := broker.Cost{Methods: map[string]int{}}
	p := w.byName[name]
	if p == nil {
		return c
	}
	for m, n := range p.counters.methods {
		if n > 0 {
			c.Methods[methodNames[m]] = n
		}
	}
	c.Connections, c.Channels = p.counters.connections, p.counters.channels
	return c
}

// NumMethods is how many AMQP methods the simulated broker tells apart;
// MethodName names each, by its index in Counts.Methods.
const NumMethods = int(numMethods)

// MethodName is the full AMQP name of method i ("queue.declare"), for i
// in [0, NumMethods).
func MethodName(i int) string { return methodNames[i] }

// Counts is what a process has sent, as Cost says it but without a map:
// each method's count by its index (MethodName), the connections it
// dialled and the channels it opened. It is for callers that read what a
// process sent at every operation (the amqp-locks runner's ledger).
type Counts struct {
	Methods               [NumMethods]int
	Connections, Channels int
}

// ReadCounts is Cost into c: what the process named name has sent so far
// (nothing for an unknown name).
func (w *World) ReadCounts(name string, c *Counts) {
	*c = Counts{}
	if p := w.byName[name]; p != nil {
		c.Methods = p.counters.methods
		c.Connections, c.Channels = p.counters.connections, p.counters.channels
	}
}

// RoundTrips returns how many synchronous exchanges the process named name
// has waited for so far (a dial is two; each method sent is one).
func (w *World) RoundTrips(name string) int {
	if p := w.byName[name]; p != nil {
		return p.counters.roundTrips
	}
	return 0
}
