package pgadvisoryrun

import (
	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// draw draws a plan with rapid, so that a failing plan shrinks: fewer
// clients, fewer operations, fewer faults.
func draw(t *rapid.T, c Config) *Plan {
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Mutant: c.Mutant}
	p.TTLMs = c.TTLMs
	if p.TTLMs == 0 {
		p.TTLMs = rapid.SampledFrom([]int{200, 500}).Draw(t, "ttl_ms")
	}
	ttl := p.TTLMs
	p.Clients = leaserun.DrawScripts(t, c.Clients, c.Ops, leaserun.Sleeps(ttl*3/4, ttl*5/4, 3*ttl), nil)
	procs := leaserun.Processes(len(p.Clients))
	if len(c.Faults) > 0 {
		kinds := rapid.SliceOfNDistinct(rapid.SampledFrom(c.Faults), 1, len(c.Faults), rapid.ID[string]).Draw(t, "fault_kinds")
		fault := rapid.Custom(func(t *rapid.T) Fault {
			f := Fault{Fault: rapid.SampledFrom(kinds).Draw(t, "fault")}
			if f.Fault != histories.RestartBroker {
				f.Target = rapid.SampledFrom(procs).Draw(t, "target")
			}
			f.At = rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, 3*ttl)).Draw(t, "at_ms")
			if histories.EndOf(f.Fault) != "" {
				f.For = rapid.IntRange(1, 3*ttl).Draw(t, "for_ms")
			}
			return f
		})
		p.Nemesis = rapid.SliceOfN(fault, 0, c.MaxFaults).Draw(t, "nemesis")
	}
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	return p
}
