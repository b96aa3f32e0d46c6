package pgadvisoryrun

import (
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"pgregory.net/rapid"
)

// steering is what the lease families' steering needs of c's plans: its
// faults, a mutex (an advisory lock has one holder), and how long its
// operations take where they run.
func (c Config) steering() leaserun.Steering {
	s := leaserun.Steering{Ops: steps.Ops, Faults: c.Faults, Clients: c.Clients, OpMs: 1}
	if c.Server != nil {
		// Measured (replay --history): an acquire tens of milliseconds, a
		// refresh or a release from under one to tens. (On the simulator
		// a statement takes 0.1 ms, a connect 0.5: a fault lands on an
		// operation's start, the schedule deciding which goes first.)
		s.OpMs, s.Took, s.StartMs = 5, map[string]int{histories.Acquire: 30}, 5
	}
	return s
}

// Goals are the interleavings c's plans can reach and DrawToward aims at
// (prover.Steerable; leaserun.Steering says which).
func (c Config) Goals() []prover.Interleaving { return c.withDefaults().steering().Goals() }

// DrawToward draws a plan as Draw does, then leans it toward g
// (leaserun.Steering.Toward): g's operations lead two clients' scripts
// (one's); the faults drawn at those clients or at the server are left
// out, unless g is a fault, which then strikes inside the operation.
func (c Config) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	c = c.withDefaults()
	p := draw(t, c)
	m := c.steering().Toward(t, p.Clients, g)
	p.Clients = m.Scripts
	met := m.Names
	// The faults drawn that would strike the meeting's clients would
	// mostly stop it.
	p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool {
		return f.Target == "" || slices.Contains(met, f.Target)
	})
	if g.How != prover.Struck {
		return p
	}
	f := Fault{Fault: g.Y, Target: met[0], At: m.StrikeAt}
	if f.Fault == histories.RestartBroker {
		f.Target = ""
	}
	if histories.EndOf(f.Fault) != "" {
		f.For = rapid.IntRange(1, 3*p.TTLMs).Draw(t, "steer_for_ms")
	}
	p.Nemesis = leaserun.Strike(p.Nemesis, f, c.MaxFaults)
	return p
}
