package dbsemrun

import (
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// steering is what the lease families' steering needs of c's plans: its
// faults, a semaphore; a fault aimed at a client strikes after one of its
// statements (Fault.AfterStatements); an operation takes about a
// millisecond on the simulator.
func (c Config) steering() leaserun.Steering {
	return leaserun.Steering{Ops: steps.Ops, Faults: c.Faults, Clients: c.Clients, Semaphore: true, OpMs: 1,
		// A lost reply is a COMMIT's: only an acquire is a transaction.
		Only: map[string][]string{histories.DropReply: {histories.Acquire}}}
}

// Goals are the interleavings c's plans can reach and DrawToward aims at
// (prover.Steerable; leaserun.Steering says which).
func (c Config) Goals() []prover.Interleaving { return c.withDefaults().steering().Goals() }

// DrawToward draws a plan as Draw does, then leans it toward g
// (leaserun.Steering.Toward): g's operations lead two clients' scripts
// (one's), under a max of 2 where both must hold; the faults drawn at
// those clients or at the server are left out, unless g is a fault, which
// then strikes inside the operation: after one of the first
// statements of a client's, or at a time within them for a fault of the
// server or of a clock.
func (c Config) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	c = c.withDefaults()
	p := draw(t, c)
	scripts := make([][]lease.Step, len(p.Clients))
	for i, sc := range p.Clients {
		for _, s := range sc {
			scripts[i] = append(scripts[i], lease.Step{Op: s.Op, Ms: s.Ms})
		}
	}
	m := c.steering().Toward(t, scripts, g)
	for i, sc := range m.Scripts {
		lead := len(sc)
		if i < len(p.Clients) {
			lead -= len(p.Clients[i])
		} else {
			p.Clients = append(p.Clients, nil)
		}
		var steps []Step
		for _, s := range sc[:lead] {
			steps = append(steps, Step{Op: s.Op, Ms: s.Ms})
		}
		p.Clients[i] = append(steps, p.Clients[i]...)
	}
	if m.BothHold {
		p.Max = max(p.Max, 2)
	}
	met := m.Names
	// The faults drawn that would strike the meeting's clients would
	// mostly stop it.
	p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool {
		return f.Target == "" || slices.Contains(met, f.Target)
	})
	if g.How != prover.Struck {
		return p
	}
	ttl := p.TTLMs
	f := Fault{Fault: g.Y, Target: met[0]}
	if f.Fault == histories.RestartBroker || histories.IsClockFault(f.Fault) && c.Impl != nil {
		f.Target = "" // the server's, or its clock
	}
	if f.Target != "" {
		// A client's first two statements set its connection up; then
		// an acquire is eight (a transaction: the master-row design), a
		// refresh or a release one. Four refreshes follow an acquire;
		// four releases each follow one.
		switch g.X {
		case histories.Acquire:
			f.AfterStatements = rapid.IntRange(3, 10).Draw(t, "steer_after_statements")
		case histories.Refresh:
			f.AfterStatements = rapid.IntRange(11, 14).Draw(t, "steer_after_statements")
		default:
			f.AfterStatements = 11 + 9*rapid.IntRange(0, 3).Draw(t, "steer_release")
		}
	} else {
		f.At = rapid.IntRange(0, 10).Draw(t, "steer_at_ms")
	}
	if histories.IsClockFault(f.Fault) {
		f.OffsetMs = rapid.IntRange(1, 3*ttl).Draw(t, "steer_offset_ms")
	}
	if histories.EndOf(f.Fault) != "" || histories.IsClockFault(f.Fault) {
		f.For = rapid.IntRange(0, 4*ttl).Draw(t, "steer_for_ms")
	}
	p.Nemesis = leaserun.Strike(p.Nemesis, f, c.MaxFaults)
	return p
}
