package sim

import (
	"fmt"
	"strings"
)

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
	numMethods
)

var methodNames = [numMethods]string{
	"connection.start-ok", "connection.tune-ok", "connection.open", "connection.close", "connection.close-ok",
	"channel.open", "channel.close", "channel.close-ok",
	"confirm.select",
	"queue.declare", "queue.delete", "queue.purge", "queue.bind",
	"basic.publish", "basic.consume", "basic.get",
}

func (m method) String() string { return methodNames[m] }

// Counters are what one process sent to the broker: AMQP methods, channels
// and connections opened, and round trips it waited for. The efficiency
// properties are judged from them.
type Counters struct {
	Methods     [numMethods]int
	Channels    int // channel.open sent
	Connections int // connections dialled
	RoundTrips  int // synchronous exchanges waited for
}

// Method returns how many times the method with the AMQP name (for example
// "queue.declare") was sent.
func (c Counters) Method(name string) int {
	for m, n := range methodNames {
		if n == name {
			return c.Methods[m]
		}
	}
	return 0
}

// Class returns how many methods of the AMQP class (for example "queue")
// were sent.
func (c Counters) Class(class string) int {
	n := 0
	for m, name := range methodNames {
		if strings.HasPrefix(name, class+".") {
			n += c.Methods[m]
		}
	}
	return n
}

// Sub returns the counts in c that are not in d: what happened between two
// snapshots.
func (c Counters) Sub(d Counters) Counters {
	for m := range c.Methods {
		c.Methods[m] -= d.Methods[m]
	}
	c.Channels -= d.Channels
	c.Connections -= d.Connections
	c.RoundTrips -= d.RoundTrips
	return c
}

// String lists the non-zero counts, for reports.
func (c Counters) String() string {
	var b strings.Builder
	for m, n := range c.Methods {
		if n > 0 {
			fmt.Fprintf(&b, "%s=%d ", methodNames[m], n)
		}
	}
	fmt.Fprintf(&b, "channels=%d connections=%d round-trips=%d", c.Channels, c.Connections, c.RoundTrips)
	return b.String()
}

// Counters returns what the process named name has sent so far.
func (w *World) Counters(name string) Counters {
	if p := w.byName[name]; p != nil {
		return p.counters
	}
	return Counters{}
}
