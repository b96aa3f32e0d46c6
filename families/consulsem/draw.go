package consulsemfamily

import (
	"slices"

	"github.com/lockprover/lockprover/families/lease"
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
	sleep := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: rapid.IntRange(1, 50).Draw(t, "ms")} }),
		rapid.Custom(func(t *rapid.T) Step {
			return Step{Op: Sleep, Ms: rapid.IntRange(ttl/2, k*ttl+ttl/2).Draw(t, "about_ttl_ms")}
		}),
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: rapid.IntRange(1, 3*k*ttl).Draw(t, "long_ms")} }))
	// A client works as lease users do: try for a slot a few times, work
	// and refresh now and then, let go (or not), again.
	cycle := rapid.Custom(func(t *rapid.T) []Step {
		steps := []Step{{Op: histories.Acquire}}
		for i := rapid.IntRange(0, 2).Draw(t, "retries"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "backoff"), Step{Op: histories.Acquire})
		}
		// Work, refreshing the lease or asking whether it still holds it.
		for i := rapid.IntRange(0, 3).Draw(t, "refreshes"); i > 0; i-- {
			op := rapid.SampledFrom([]string{histories.Refresh, histories.Refresh, histories.Verify}).Draw(t, "work_op")
			steps = append(steps, sleep.Draw(t, "work"), Step{Op: op})
		}
		if rapid.Bool().Draw(t, "release") {
			if rapid.IntRange(0, 3).Draw(t, "work then release") > 0 {
				steps = append(steps, sleep.Draw(t, "work"))
			}
			steps = append(steps, Step{Op: histories.Release})
		}
		return steps
	})
	nClients := rapid.IntRange(1, c.Clients).Draw(t, "clients")
	for range nClients {
		var script []Step
		if rapid.Bool().Draw(t, "arrives late") {
			script = append(script, sleep.Draw(t, "arrival"))
		}
		for _, cy := range rapid.SliceOfN(cycle, 1, c.Ops).Draw(t, "client") {
			script = append(script, cy...)
		}
		p.Clients = append(p.Clients, lease.WithinOps(script, c.Ops))
	}
	if m := MutantNamed(c.Mutant); nClients > 1 && (m != nil && m.mixedLimits || rapid.IntRange(0, 7).Draw(t, "mixed limits") == 0) {
		// Clients that disagree on the limit: the first acquire sets it.
		for range nClients {
			p.Limits = append(p.Limits, rapid.IntRange(1, 3).Draw(t, "own_limit"))
		}
	}
	faults := c.Faults
	if c.real() {
		faults = slices.DeleteFunc(slices.Clone(faults), func(f string) bool { return !slices.Contains(realFaults, f) })
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
