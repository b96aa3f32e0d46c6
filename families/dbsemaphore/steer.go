package dbsemaphore

import (
	"slices"

	"github.com/lockprover/lockprover/families/lease/leaseplan"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/prover"
	"pgregory.net/rapid"
)

// ops are a client's operations, in the order goals name them.
var ops = []string{histories.Acquire, histories.Refresh, histories.Release}

// holds says whether a client does op only while it holds a lease.
func holds(op string) bool { return op != histories.Acquire }

// Goals are the interleavings c's plans can reach and DrawToward aims at
// (prover.Steerable), the most wanted first: two clients' operations at
// once and one after the other, a client's two in a row, and every fault
// c strikes inside every operation. Left out are those no plan can show:
// a client's acquire right after its own acquire or refresh (skipped, as
// it holds a lease), its refresh or release after its own release (it
// holds none), two clients' meetings if c has one client at most, and a
// restart of the server inside an operation (a plan restarts it at a
// time, not after a client's statements), and a lost reply inside a
// refresh or a release (it loses a COMMIT's, and only an acquire
// commits).
func (c Config) Goals() []prover.Interleaving {
	c = c.withDefaults()
	var out []prover.Interleaving
	if c.Clients > 1 {
		for _, how := range []prover.How{prover.During, prover.After} {
			for _, x := range ops {
				for _, y := range ops {
					out = append(out, prover.Interleaving{X: x, Y: y, How: how, Who: "client/client"})
				}
			}
		}
	}
	for _, x := range ops {
		for _, y := range ops {
			if x == histories.Acquire && y == histories.Release || x != histories.Acquire && y != histories.Release {
				out = append(out, prover.Interleaving{X: x, Y: y, How: prover.AfterOwn, Who: "client/client"})
			}
		}
	}
	for _, f := range c.Faults {
		if f == histories.RestartBroker {
			continue // it strikes at a time, never inside a client's operation
		}
		for _, x := range ops {
			if f == histories.DropReply && x != histories.Acquire {
				continue // it loses a COMMIT's reply: only an acquire commits
			}
			out = append(out, prover.Interleaving{X: x, Y: f, How: prover.Struck, Who: "client"})
		}
	}
	return out
}

// DrawToward draws a plan of c toward g (prover.Steerable).
func (c Config) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	return drawToward(t, c.withDefaults(), g)
}

// drawToward draws a plan as draw does, then leans it toward g, as
// amqp-locks' DrawToward does: g's operations first in the scripts of c1
// (X) and c2 (Y), Y first, then after a pause of tens of milliseconds X,
// for X after another's Y; three of each, after pauses of up to 30 ms, for
// X during another's Y (with room for two leases, and no fault on the two
// clients); for a fault, X first in c1's script, and the fault right after
// one of X's statements.
func drawToward(t *rapid.T, c Config, g prover.Interleaving) *Plan {
	p := draw(t, c)
	for len(p.Clients) < 2 && g.How != prover.Struck && g.How != prover.AfterOwn {
		p.Clients = append(p.Clients, nil)
	}
	a := &p.Clients[0]
	switch g.How {
	case prover.After, prover.During:
		b := &p.Clients[1]
		if holds(g.X) && holds(g.Y) || g.How == prover.During {
			p.Max = max(p.Max, 2) // both hold at once
		}
		if g.How == prover.After {
			*b = append(opSteps(g.Y), *b...)
			x := opSteps(g.X)
			x = append(x[:len(x)-1:len(x)-1], Step{Op: Sleep, Ms: rapid.IntRange(20, 200).Draw(t, "steer_pause_ms")}, x[len(x)-1])
			*a = append(x, *a...)
		} else {
			var xs, ys []Step
			for range 3 {
				xs, ys = append(xs, opSteps(g.X)...), append(ys, opSteps(g.Y)...)
			}
			*a = append(pausedFor(t, xs, "steer_pause_ms"), *a...)
			*b = append(pausedFor(t, ys, "steer_y_pause_ms"), *b...)
		}
		p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool {
			return f.Target == "" || f.Target == leaseplan.ClientName(0) || f.Target == leaseplan.ClientName(1)
		})
	case prover.AfterOwn:
		pre := opSteps(g.Y)
		if holds(g.X) {
			pre = append(pre, Step{Op: g.X})
		} else {
			pre = append(pre, opSteps(g.X)...)
		}
		*a = append(pre, *a...)
		p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool { return f.Target == "" || f.Target == leaseplan.ClientName(0) })
	case prover.Struck:
		pre := opSteps(g.X)
		*a = append(pre, *a...)
		before := connectStatements
		for _, s := range pre[:len(pre)-1] {
			before += statements(p, s)
		}
		f := Fault{Fault: g.Y, Target: leaseplan.ClientName(0),
			AfterStatements: before + rapid.IntRange(1, statements(p, pre[len(pre)-1])).Draw(t, "steer_statement")}
		if histories.IsClockFault(f.Fault) {
			f.OffsetMs = rapid.IntRange(1, 3*p.TTLMs).Draw(t, "steer_offset_ms")
			if rapid.Bool().Draw(t, "steer_behind") {
				f.OffsetMs = -f.OffsetMs
			}
		}
		if histories.EndOf(f.Fault) != "" || histories.IsClockFault(f.Fault) {
			f.For = rapid.IntRange(0, 4*p.TTLMs).Draw(t, "steer_for_ms")
		}
		if len(p.Nemesis) >= c.MaxFaults && len(p.Nemesis) > 0 {
			p.Nemesis = p.Nemesis[1:]
		}
		p.Nemesis = append([]Fault{f}, p.Nemesis...)
	}
	return p
}

// opSteps are the steps that do op: a refresh or a release after an
// acquire, so that the client holds what it refreshes or releases.
func opSteps(op string) []Step {
	if holds(op) {
		return []Step{{Op: histories.Acquire}, {Op: op}}
	}
	return []Step{{Op: op}}
}

// connectStatements is how many statements a client of the reference
// sends before its first operation.
const connectStatements = 2

// statements is about how many statements the reference sends for step s
// of p: an acquire's transaction (fewer with a row per slot), one for a
// refresh or a release.
func statements(p *Plan, s Step) int {
	switch {
	case s.Op != histories.Acquire:
		return 1
	case p.Options.Design == "row-per-slot":
		return 6
	}
	return 8
}

// pausedFor puts a pause of up to 30 ms (none if 0), drawn as name,
// before steps.
func pausedFor(t *rapid.T, s []Step, name string) []Step {
	if ms := rapid.IntRange(0, 30).Draw(t, name); ms > 0 {
		return append([]Step{{Op: Sleep, Ms: ms}}, s...)
	}
	return s
}
