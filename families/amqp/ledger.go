package amqp

import "github.com/lockprover/lockprover/amqplocks/broker"

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
	sent         broker.Cost // the counts as last read (runner.cost), for every incarnation
	seen         broker.Cost // the counts accounted for so far (its own map)
	scratch      broker.Cost // what absorb works out and throws away
	had          bool        // the process has had a connection
	excuses      int         // faults (and broker closes) that may have cost it a connection, not yet used to excuse one
	closedOwn    bool        // it closed a channel itself on its current connection
	brokerClosed int         // channels the broker closed and it has not reopened
}

// cut records a fault that may have cost the process its connection: it
// excuses one connection opened later.
func (l *ledger) cut() { l.excuses++ }

// absorb accounts for what the process sent outside any operation (its
// start, between operations): nothing there is charged.
func (l *ledger) absorb(now broker.Cost) { l.work(now) }

// charge accounts for what the process sent since the last call and
// returns what of it is charged (a Cost of its own, its map no larger
// than it needs), with the waste it found ("" for none).
func (l *ledger) charge(now broker.Cost) (broker.Cost, string) {
	waste := l.work(now)
	out := broker.Cost{Methods: make(map[string]int, len(l.scratch.Methods)),
		Connections: l.scratch.Connections, Channels: l.scratch.Channels}
	for m, n := range l.scratch.Methods {
		out.Methods[m] = n
	}
	return out, waste
}

// work accounts for now in the ledger's scratch Cost, used again from one
// call to the next.
func (l *ledger) work(now broker.Cost) string {
	if l.scratch.Methods == nil {
		l.scratch.Methods = map[string]int{}
	}
	clear(l.scratch.Methods)
	return l.account(now, &l.scratch)
}

// see makes now what the ledger has accounted for, copied: the caller may
// reuse now's map.
func (l *ledger) see(now broker.Cost) {
	if l.seen.Methods == nil {
		l.seen.Methods = make(map[string]int, len(now.Methods))
	}
	clear(l.seen.Methods)
	for m, n := range now.Methods {
		l.seen.Methods[m] = n
	}
	l.seen.Connections, l.seen.Channels = now.Connections, now.Channels
}

// reconnectWaste is the waste of an operation that opened a connection
// with no excuse the ledger knew of when it ran.
const reconnectWaste = "opened a connection though it had one and no fault had cut it off"

// account is charge into out, whose map is empty: out becomes what is
// charged of now (now less what was seen, methods whose difference is
// zero left out as broker.Cost.Sub leaves them, less the free setup).
func (l *ledger) account(now broker.Cost, out *broker.Cost) string {
	out.Connections, out.Channels = now.Connections-l.seen.Connections, now.Channels-l.seen.Channels
	for m, n := range now.Methods {
		if n -= l.seen.Methods[m]; n != 0 {
			out.Methods[m] = n
		}
	}
	l.see(now)
	dialled, opens, brokerClosedConn := out.Connections, out.Methods["connection.open"], out.Methods["connection.close-ok"]
	opened, own, byBroker := out.Channels, out.Methods["channel.close"], out.Methods["channel.close-ok"]
	var waste string
	// A connection counts once its handshake reached connection.open: an
	// attempt refused, or held by a partition until the client gave up, is
	// not one (and costs nothing).
	conns := min(dialled, opens)
	if failed := dialled - conns; failed > 0 {
		out.Connections -= failed
		for _, m := range []string{"connection.start-ok", "connection.tune-ok"} {
			out.Methods[m] -= min(failed, max(0, out.Methods[m]-conns))
		}
	}
	if conns > 0 {
		// Each connection needs an excuse: being the first, a fault, or
		// the broker closing the one before (connection.close-ok).
		excuses := l.excuses + brokerClosedConn
		if !l.had {
			excuses++
		}
		free := min(conns, excuses)
		out.Connections -= free
		for _, m := range []string{"connection.start-ok", "connection.tune-ok", "connection.open"} {
			out.Methods[m] -= free
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
	out.Methods["confirm.select"] -= min(free, out.Methods["confirm.select"])
	out.Methods["channel.open"] -= free
	for m, n := range out.Methods {
		if n <= 0 {
			delete(out.Methods, m)
		}
	}
	return waste
}
