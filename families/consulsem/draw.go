package consulsemfamily

import (
	"slices"

	"github.com/lockprover/lockprover/families/lease/leaseplan"
	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// draw draws a plan with rapid, so that rapid can shrink a failing plan to
// a minimal one: fewer clients, fewer operations, fewer faults, simpler
// schedules.
func draw(t *rapid.T, c Config) *Plan {
	p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: c.Backend, Mutant: c.Mutant,
		StaleReads: c.StaleReads, BehaviorRelease: c.BehaviorRelease, LockDelay: c.LockDelay, Persistent: c.Persistent && c.Backend == Consul}
	p.Limit = rapid.SampledFrom([]int{1, 1, 2}).Draw(t, "limit")
	p.TTLMs = c.TTLMs
	if p.TTLMs == 0 {
		p.TTLMs = rapid.SampledFrom([]int{1000, 2000}).Draw(t, "ttl_ms")
	}
	// A session may live up to k TTLs after its last renewal.
	ttl, k := p.TTLMs, int(Expiry(p.Backend)+0.5)
	// Short pauses, pauses on the scale of the session's life (where it
	// is just over or not yet), and long ones.
	sleep := leaseplan.Sleeps(ttl/2, k*ttl+ttl/2, 3*k*ttl)
	// Work refreshes the lease or asks whether it still holds it.
	work := rapid.SampledFrom([]string{histories.Refresh, histories.Refresh, histories.Verify})
	p.Clients = leaseplan.DrawScripts(t, c.Clients, c.Ops, sleep, work)
	nClients := len(p.Clients)
	if m := MutantNamed(c.Mutant); nClients > 1 && (m != nil && m.mixedLimits || rapid.IntRange(0, 7).Draw(t, "mixed limits") == 0) {
		// Clients that disagree on the limit: the first acquire sets it.
		for range nClients {
			p.Limits = append(p.Limits, rapid.IntRange(1, 3).Draw(t, "own_limit"))
		}
	}
	faults := c.Faults
	if c.real() {
		// A given server (Addrs) is not lockprover's to restart.
		// An implementation's proxy cannot lose a reply (ImplFaults).
		faults = slices.DeleteFunc(slices.Clone(faults), func(f string) bool {
			return !slices.Contains(realFaults, f) || len(c.Addrs) > 0 && f == histories.RestartBroker ||
				c.Impl != nil && f == histories.DropReply
		})
	}
	if kinds := drawable(faults, c.AnyRestart || c.keeps()); len(kinds) > 0 {
		p.Nemesis = drawNemesis(t, c, kinds, p, k)
	}
	p.Schedule = rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(t, "schedule")
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	return p
}

// drawable are the faults of faults a plan may draw: restarts only when
// they may (of a server that keeps its sessions, or any with
// Config.AnyRestart: see the package documentation).
func drawable(faults []string, restarts bool) []string {
	var out []string
	for _, f := range faults {
		if f != histories.RestartBroker || restarts {
			out = append(out, f)
		}
	}
	return out
}

// drawNemesis draws a plan's faults, of the kinds given (at least one);
// a session lives up to k TTLs.
func drawNemesis(t *rapid.T, c Config, kinds []string, p *Plan, k int) []Fault {
	// Swarm testing: each plan draws the fault kinds it may use.
	kinds = rapid.SliceOfNDistinct(rapid.SampledFrom(kinds), 1, len(kinds), rapid.ID[string]).Draw(t, "fault_kinds")
	procs, ttl := p.processes(), p.TTLMs
	fault := rapid.Custom(func(t *rapid.T) Fault {
		f := Fault{Fault: rapid.SampledFrom(kinds).Draw(t, "fault")}
		if f.Fault != histories.RestartBroker {
			f.Target = rapid.SampledFrom(procs).Draw(t, "target")
		}
		f.At = rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, 3*k*ttl)).Draw(t, "at_ms")
		switch f.Fault {
		case histories.Pause:
			// Just under or beyond the session's life: a GC pause.
			f.For = rapid.OneOf(rapid.IntRange(ttl/2, 2*k*ttl), rapid.IntRange(0, 4*k*ttl)).Draw(t, "for_ms")
		case histories.Partition:
			f.For = rapid.IntRange(0, 4*k*ttl).Draw(t, "for_ms")
		case histories.RestartBroker:
			f.For = rapid.IntRange(0, 2*ttl).Draw(t, "down_ms")
		}
		return f
	})
	return rapid.SliceOfN(fault, 0, c.MaxFaults).Draw(t, "nemesis")
}
