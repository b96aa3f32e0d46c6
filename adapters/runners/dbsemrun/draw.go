package dbsemrun

import (
	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// draw draws a plan with rapid, so that rapid can shrink a failing plan to
// a minimal one: fewer clients, fewer operations, fewer faults, simpler
// schedules.
func draw(t *rapid.T, c Config) *Plan {
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Options: c.Options, Mutant: c.Mutant}
	nClients := rapid.IntRange(1, c.Clients).Draw(t, "clients")
	// Mostly fewer slots than clients, so that they contend.
	p.Max = rapid.IntRange(1, 3).Draw(t, "max")
	if nClients > 1 && rapid.IntRange(0, 3).Draw(t, "contended") > 0 {
		p.Max = rapid.IntRange(1, nClients-1).Draw(t, "contended_max")
	}
	p.TTLMs = c.TTLMs
	if p.TTLMs == 0 {
		p.TTLMs = rapid.SampledFrom([]int{100, 300, 1000}).Draw(t, "ttl_ms")
	}
	ttl := p.TTLMs
	// Mostly short pauses; now and then one on the scale of the ttl, so
	// that leases expire under their holders.
	sleep := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: rapid.IntRange(1, 50).Draw(t, "ms")} }),
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: rapid.IntRange(1, 3*ttl).Draw(t, "long_ms")} }))
	acquire := rapid.Custom(func(t *rapid.T) Step {
		s := Step{Op: histories.Acquire}
		if rapid.IntRange(0, 9).Draw(t, "other_max") == 0 {
			s.Max = p.Max + rapid.IntRange(1, 2).Draw(t, "more")
		}
		return s
	})
	// A client works as lease users do: try for a lease a few times, work
	// and refresh now and then, let go (or not), again.
	cycle := rapid.Custom(func(t *rapid.T) []Step {
		steps := []Step{acquire.Draw(t, "acquire")}
		for i := rapid.IntRange(0, 2).Draw(t, "retries"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "backoff"), acquire.Draw(t, "acquire"))
		}
		for i := rapid.IntRange(0, 3).Draw(t, "refreshes"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "work"), Step{Op: histories.Refresh})
		}
		if rapid.Bool().Draw(t, "release") {
			if rapid.Bool().Draw(t, "work then release") {
				steps = append(steps, sleep.Draw(t, "work"))
			}
			steps = append(steps, Step{Op: histories.Release})
		}
		return steps
	})
	for i := 0; i < nClients; i++ {
		var script []Step
		for _, cy := range rapid.SliceOfN(cycle, 1, max(1, c.Ops/3)).Draw(t, "client") {
			script = append(script, cy...)
		}
		p.Clients = append(p.Clients, script)
	}
	if len(c.Faults) > 0 {
		p.Nemesis = drawNemesis(t, c, p.processes(), ttl)
	}
	p.Schedule = rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(t, "schedule")
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	return p
}

// drawNemesis draws a plan's faults (at least one kind is allowed): at a
// time, or right after a client's n-th statement (inside an operation).
func drawNemesis(t *rapid.T, c Config, procs []string, ttl int) []Fault {
	// Swarm testing: each plan draws the fault kinds it may use, so that
	// some plans are all clock faults, some all kills, and so on, instead
	// of every plan thinly mixing all of them.
	kinds := rapid.SliceOfNDistinct(rapid.SampledFrom(c.Faults), 1, len(c.Faults), rapid.ID[string]).Draw(t, "fault_kinds")
	fault := rapid.Custom(func(t *rapid.T) Fault {
		f := Fault{Fault: rapid.SampledFrom(kinds).Draw(t, "fault")}
		if histories.IsClockFault(f.Fault) {
			// A client's clock, mostly: there are more of them. Not an
			// implementation's process's, which nothing can move (its
			// leases are timed by the database's clock anyway).
			if c.Impl == nil && rapid.IntRange(0, 3).Draw(t, "whose clock") > 0 {
				f.Target = rapid.SampledFrom(procs).Draw(t, "target")
			}
			f.OffsetMs = rapid.IntRange(1, 3*ttl).Draw(t, "offset_ms")
			if rapid.Bool().Draw(t, "behind") {
				f.OffsetMs = -f.OffsetMs
			}
		} else if f.Fault != histories.RestartBroker {
			f.Target = rapid.SampledFrom(procs).Draw(t, "target")
		}
		if f.Target != "" && rapid.Bool().Draw(t, "mid-operation") {
			// Right after the target's n-th statement: inside an operation.
			f.AfterStatements = rapid.IntRange(1, 30).Draw(t, "after_statements")
		} else {
			f.At = rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, 3*ttl)).Draw(t, "at_ms")
		}
		if histories.EndOf(f.Fault) != "" || histories.IsClockFault(f.Fault) {
			f.For = rapid.IntRange(0, 4*ttl).Draw(t, "for_ms")
		}
		return f
	})
	return rapid.SliceOfN(fault, 0, c.MaxFaults).Draw(t, "nemesis")
}
