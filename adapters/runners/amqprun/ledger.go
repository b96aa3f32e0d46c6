package amqprun

import (
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// A ledger follows one process's connection and channels through its method
// counts, so that an operation is charged only for what the spec calls
// waste, whatever the implementation's habits:
//
//   - a reconnect: a connection opened by a process that already had one,
//     with no fault (or broker close) to explain losing it. Opening the
//     first connection, at init or lazily at the first operation, is free,
//     and so is connecting again after a fault cut the process off.
//   - a reopened channel: one opened after the process closed a channel
//     itself on the same connection. Opening a channel per purpose is free,
//     and so is reopening one the broker closed (a RESOURCE_LOCKED race),
//     now or at a later operation.
//
// Deliberately not charged: a channel opened and never closed (a leak).
// Method counts do not say on which connection a channel was opened, and
// a process whose connection a fault cut off opens its channels again on
// a new one, so counting open channels would condemn correct
// implementations.
//
// The free setup (the handshake of a free connection, channel.open and
// confirm.select of free channels) is taken out of what the operation is
// charged, so the budgets judge only the methods the operation itself
// needed.
type ledger struct {
	sent         tally // the counts as last read (runner.counts), for every incarnation
	seen         tally // the counts accounted for so far
	scratch      tally // what account works out: what is charged
	had          bool  // the process has had a connection
	excuses      int   // faults (and broker closes) that may have cost it a connection, not yet used to excuse one
	closedOwn    bool  // it closed a channel itself on its current connection
	brokerClosed int   // channels the broker closed and it has not reopened
	// dialling counts dials an earlier window took whose handshake had
	// not reached connection.open by its end: a reconnect begun while
	// idle, opened inside the next operation, is a connection there (it
	// takes an excuse, or is charged as one), not a handshake without one.
	// A dial that failed stays counted, harmlessly: only an open with no
	// dial of its own window takes one.
	dialling int
}

// A tally is what a process sent (a broker.Cost) as the ledger works on
// it: the methods the simulator tells apart counted by their index
// (rabbitmqsim.MethodName), as the simulator reads them out with no map at every
// operation, and any other (a real broker's proxy counts whatever an
// implementation sends) by name. As in a Cost, a method never sent counts
// 0 (is absent).
type tally struct {
	rabbitmqsim.Counts
	other map[string]int
}

// methodIndex is the index of each method rabbitmqsim.MethodName names.
var methodIndex = func() map[string]int {
	m := make(map[string]int, rabbitmqsim.NumMethods)
	for i := range rabbitmqsim.NumMethods {
		m[rabbitmqsim.MethodName(i)] = i
	}
	return m
}()

// The methods the ledger looks at, by index.
var (
	mStartOk      = methodIndex["connection.start-ok"]
	mTuneOk       = methodIndex["connection.tune-ok"]
	mConnOpen     = methodIndex["connection.open"]
	mConnCloseOk  = methodIndex["connection.close-ok"]
	mChanOpen     = methodIndex["channel.open"]
	mChanClose    = methodIndex["channel.close"]
	mChanCloseOk  = methodIndex["channel.close-ok"]
	mConfirmSel   = methodIndex["confirm.select"]
	handshakeOnly = [...]int{mStartOk, mTuneOk}
	handshake     = [...]int{mStartOk, mTuneOk, mConnOpen}
)

// set makes t what c says.
func (t *tally) set(c broker.Cost) {
	t.Counts = rabbitmqsim.Counts{Connections: c.Connections, Channels: c.Channels}
	clear(t.other)
	for m, n := range c.Methods {
		if i, ok := methodIndex[m]; ok {
			t.Methods[i] = n
			continue
		}
		if t.other == nil {
			t.other = map[string]int{}
		}
		t.other[m] = n
	}
}

// total is the number of methods.
func (t *tally) total() int {
	n := 0
	for _, k := range t.Methods {
		n += k
	}
	for _, k := range t.other {
		n += k
	}
	return n
}

// cost is t as a Cost of its own, with the methods that count more than
// 0 (a map no larger than it needs).
func (t *tally) cost() broker.Cost {
	n := 0
	for _, k := range t.Methods {
		if k > 0 {
			n++
		}
	}
	for _, k := range t.other {
		if k > 0 {
			n++
		}
	}
	out := broker.Cost{Methods: make(map[string]int, n), Connections: t.Connections, Channels: t.Channels}
	for i, k := range t.Methods {
		if k > 0 {
			out.Methods[rabbitmqsim.MethodName(i)] = k
		}
	}
	for m, k := range t.other {
		if k > 0 {
			out.Methods[m] = k
		}
	}
	return out
}

// cut records a fault that may have cost the process its connection: it
// excuses one connection opened later.
func (l *ledger) cut() { l.excuses++ }

// absorb accounts for what the process sent outside any operation (its
// start, between operations): nothing there is charged.
func (l *ledger) absorb(now *tally) { l.account(now) }

// charge accounts for what the process sent since the last call and
// returns what of it is charged (a Cost of its own, its map no larger
// than it needs), with the waste it found ("" for none).
func (l *ledger) charge(now *tally) (broker.Cost, string) {
	waste := l.account(now)
	return l.scratch.cost(), waste
}

// see makes now what the ledger has accounted for, copied: the caller may
// read into now again.
func (l *ledger) see(now *tally) {
	l.seen.Counts = now.Counts
	if len(now.other) == 0 && len(l.seen.other) == 0 {
		return
	}
	if l.seen.other == nil {
		l.seen.other = make(map[string]int, len(now.other))
	}
	clear(l.seen.other)
	for m, n := range now.other {
		l.seen.other[m] = n
	}
}

// reconnectWaste is the waste of an operation that opened a connection
// with no excuse the ledger knew of when it ran.
const reconnectWaste = "opened a connection though it had one and no fault had cut it off"

// account works out in the ledger's scratch what is charged of now: now
// less what was seen (a method now counts 0 for stays 0, as
// broker.Cost.Sub leaves it out), less the free setup; what counts 0 or
// less there is not charged (tally.cost leaves it out).
func (l *ledger) account(now *tally) string {
	out := &l.scratch
	out.Connections, out.Channels = now.Connections-l.seen.Connections, now.Channels-l.seen.Channels
	for i, n := range now.Methods {
		if n != 0 {
			n -= l.seen.Methods[i]
		}
		out.Methods[i] = n
	}
	clear(out.other)
	for m, n := range now.other {
		if n -= l.seen.other[m]; n != 0 {
			if out.other == nil {
				out.other = map[string]int{}
			}
			out.other[m] = n
		}
	}
	l.see(now)
	ms := &out.Methods
	dialled, opens, brokerClosedConn := out.Connections, ms[mConnOpen], ms[mConnCloseOk]
	opened, own, byBroker := out.Channels, ms[mChanClose], ms[mChanCloseOk]
	var waste string
	// A connection counts once its handshake reached connection.open: an
	// attempt refused, or held by a partition until the client gave up, is
	// not one (and costs nothing).
	conns := min(dialled, opens)
	if failed := dialled - conns; failed > 0 {
		out.Connections -= failed
		for _, m := range handshakeOnly {
			ms[m] -= min(failed, max(0, ms[m]-conns))
		}
	}
	late := min(opens-conns, l.dialling)
	l.dialling += dialled - conns - late
	conns += late
	out.Connections += late
	if conns > 0 {
		// Each connection needs an excuse: being the first, a fault, or
		// the broker closing the one before (connection.close-ok).
		excuses := l.excuses + brokerClosedConn
		if !l.had {
			excuses++
		}
		free := min(conns, excuses)
		out.Connections -= free
		for _, m := range handshake {
			ms[m] -= free
		}
		if out.Connections > 0 {
			waste = reconnectWaste
		}
		l.had, l.excuses = true, excuses-free
		l.closedOwn, l.brokerClosed = false, 0
	} else {
		l.excuses += brokerClosedConn // the broker closed the connection
	}
	replaced := min(opened, l.brokerClosed+byBroker)
	l.brokerClosed += byBroker - replaced
	charged := 0
	if rest := opened - replaced; rest > 0 && (l.closedOwn || own > 0) {
		charged = rest
		if waste == "" {
			waste = "reopened a channel after closing one itself"
		}
	}
	l.closedOwn = l.closedOwn || own > 0
	free := opened - charged
	out.Channels = charged
	ms[mConfirmSel] -= min(free, ms[mConfirmSel])
	ms[mChanOpen] -= free
	return waste
}
