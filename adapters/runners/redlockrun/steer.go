package redlockrun

import (
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"pgregory.net/rapid"
)

// steering is what the lease families' steering needs of c's plans: its
// faults (a restart only where a plan's servers may persist every write,
// or any restart goes), a mutex unless c proves a semaphore of leases, an
// operation (a round of calls to every server) taking under a millisecond
// on the simulator and about two on real servers.
func (c Config) steering() leaserun.Steering {
	persist := PersistAlways
	if c.Persistence != "" {
		persist = c.Persistence
	}
	s := leaserun.Steering{Ops: steps.Ops, Faults: drawable(c.Faults, persist, c.AnyRestart), Clients: c.Clients,
		Semaphore: c.Limit > 1, OpMs: 1}
	if c.real() {
		// Measured (replay --history): an acquire on three servers about
		// 10 ms, a refresh or a release 3.
		s.Took, s.StartMs = map[string]int{histories.Acquire: 10, histories.Refresh: 3, histories.Release: 3}, 1
	}
	return s
}

// Goals are the interleavings c's plans can reach and DrawToward aims at
// (prover.Steerable; leaserun.Steering says which).
func (c Config) Goals() []prover.Interleaving { return c.withDefaults().steering().Goals() }

// DrawToward draws a plan as Draw does, then leans it toward g
// (leaserun.Steering.Toward): g's operations lead two clients' scripts
// (one's); the faults drawn at those clients or at every client are left
// out, unless g is a fault, which then strikes inside the operation (a
// server's fault at a server drawn, a restart on servers that persist
// every write).
func (c Config) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	c = c.withDefaults()
	p := draw(t, c)
	m := c.steering().Toward(t, p.Clients, g)
	p.Clients = m.Scripts
	for len(p.Priorities) > 0 && len(p.Priorities) < len(p.Clients) {
		p.Priorities = append(p.Priorities, 0)
	}
	for len(p.TTLs) > 0 && len(p.TTLs) < len(p.Clients) {
		p.TTLs = append(p.TTLs, p.TTLs[0])
	}
	met := m.Names
	// The faults drawn that would strike the meeting's clients would
	// mostly stop it.
	p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool {
		client, _ := aims(f.Fault)
		return !client || slices.Contains(met, f.Target)
	})
	if g.How != prover.Struck {
		return p
	}
	ttl := p.TTLMs
	f := Fault{Fault: g.Y, At: m.StrikeAt}
	client, server := aims(f.Fault)
	if client {
		f.Target = met[0]
	}
	if server {
		f.Server = rapid.IntRange(1, p.Servers).Draw(t, "steer_server")
	}
	switch f.Fault {
	case histories.Partition, histories.Pause:
		f.For = rapid.IntRange(0, 4*ttl).Draw(t, "steer_for_ms")
	case histories.RestartBroker:
		f.For = rapid.IntRange(c.MinDownMs, max(c.MinDownMs, 2*ttl)).Draw(t, "steer_down_ms")
		if !c.AnyRestart {
			p.Persistence = PersistAlways
		}
	case histories.ClockJump:
		f.OffsetMs = rapid.IntRange(1, 3*ttl).Draw(t, "steer_offset_ms")
	}
	p.Nemesis = leaserun.Strike(p.Nemesis, f, c.MaxFaults)
	return p
}
