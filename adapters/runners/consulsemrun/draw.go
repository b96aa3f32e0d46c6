package consulsemrun

import (
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
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
	sleep := leaserun.Sleeps(ttl/2, k*ttl+ttl/2, 3*k*ttl)
	// Work refreshes the lease or asks whether it still holds it.
	work := rapid.SampledFrom([]string{histories.Refresh, histories.Refresh, histories.Verify})
	p.Clients = leaserun.DrawScripts(t, c.Clients, c.Ops, sleep, work)
	nClients := len(p.Clients)
	if m := MutantNamed(c.Mutant); nClients > 1 && (m != nil && m.mixedLimits || rapid.IntRange(0, 7).Draw(t, "mixed limits") == 0) {
		// Clients that disagree on the limit: the first acquire sets it.
		for range nClients {
			p.Limits = append(p.Limits, rapid.IntRange(1, 3).Draw(t, "own_limit"))
		}
	}
	faults, onNodes := c.planFaults()
	if c.cluster() {
		drawNodes(t, p)
	}
	kinds := drawable(faults, c.AnyRestart || c.keeps())
	if len(kinds) > 0 {
		p.Nemesis = drawNemesis(t, c, kinds, p, k)
	}
	if len(onNodes) > 0 && len(p.Nemesis) < c.MaxFaults {
		p.Nemesis = append(p.Nemesis, rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Fault {
			return drawNodeFault(t, p, rapid.SampledFrom(onNodes).Draw(t, "node_fault"), k)
		}), 1, c.MaxFaults-len(p.Nemesis)).Draw(t, "node_faults")...)
	}
	p.Schedule = rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(t, "schedule")
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	if slices.Contains(faults, histories.ForceClose) {
		p.Nemesis = append(p.Nemesis, drawForceCloses(t, c, p, k, len(kinds) > 0)...)
	}
	return p
}

// planFaults are the faults c's plans may strike at their clients or
// their server, and apart, those on a cluster's nodes.
func (c Config) planFaults() (faults, onNodes []string) {
	faults = c.Faults
	if c.cluster() {
		faults = slices.DeleteFunc(slices.Clone(faults), func(f string) bool {
			if slices.Contains(ClusterFaultNames, f) {
				onNodes = append(onNodes, f)
				return true
			}
			return false
		})
	}
	if c.real() {
		// A given server (Addrs) is not lockprover's to restart.
		// An implementation's proxy cannot lose a reply (ImplFaults).
		faults = slices.DeleteFunc(slices.Clone(faults), func(f string) bool {
			return !slices.Contains(realFaults, f) || len(c.Addrs) > 0 && f == histories.RestartBroker ||
				c.Impl != nil && f == histories.DropReply
		})
	}
	return faults, onNodes
}

// drawable are the faults of faults a plan draws with drawNemesis:
// restarts only when they may (of a server that keeps its sessions, or
// any with Config.AnyRestart: see the package documentation); never
// force-closes, which drawForceCloses draws.
func drawable(faults []string, restarts bool) []string {
	var out []string
	for _, f := range faults {
		if f != histories.ForceClose && (f != histories.RestartBroker || restarts) {
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
		f.At = drawAt(t, k, ttl)
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

// drawAt draws when a fault strikes: early in the run, or anywhere in
// three sessions' lives (a session living up to k TTLs of ttl ms).
func drawAt(t *rapid.T, k, ttl int) int {
	return rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, 3*k*ttl)).Draw(t, "at_ms")
}

// drawForceCloses draws a plan's force-closes, after everything else the
// plan draws: rapid draws the rest from the same bits as before
// force-close was offered, so that a seed that draws none gives the plan
// (and the history) it gave then, and the plans and counterexamples
// found by seed stay put. Beside other kinds of faults (others), about
// one plan in five draws any (201 of the first 1,000 seeds with every
// fault), at most Config.MaxFaults faults in all; alone, they are drawn
// as drawNemesis draws its faults.
func drawForceCloses(t *rapid.T, c Config, p *Plan, k int, others bool) []Fault {
	room, least := c.MaxFaults-len(p.Nemesis), 0
	if others {
		if room <= 0 || rapid.IntRange(0, 3).Draw(t, "force_close") != 0 {
			return nil
		}
		least = 1
	}
	procs := p.processes()
	fault := rapid.Custom(func(t *rapid.T) Fault {
		return Fault{Fault: histories.ForceClose, Target: rapid.SampledFrom(procs).Draw(t, "target"), At: drawAt(t, k, p.TTLMs)}
	})
	return rapid.SliceOfN(fault, least, room).Draw(t, "force_closes")
}
