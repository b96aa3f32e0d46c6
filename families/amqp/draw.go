package amqp

import (
	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// Draw draws a plan with rapid, so that rapid can shrink a failing plan to
// a minimal one: fewer clients, fewer operations, fewer faults, simpler
// schedules.
func Draw(t *rapid.T, c Config) *Plan {
	c = c.withDefaults()
	p := &Plan{Version: PlanVersion, Kind: c.Kind, Lock: "lp", Options: c.Options, Mutant: c.Mutant}
	hb := p.Options.Heartbeat().Milliseconds()
	if hb == 0 {
		hb = 60000 // the broker's
	}
	// Mostly short pauses; now and then one on the scale of heartbeats, so
	// that holds outlast detection and zombies wake up to verify.
	sleep := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: rapid.IntRange(1, 50).Draw(t, "ms")} }),
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: rapid.IntRange(1, int(3*hb)).Draw(t, "long_ms")} }))
	p.Clients = drawClients(t, c, sleep)
	if p.Kind == histories.Semaphore {
		p.Slots = rapid.IntRange(1, 3).Draw(t, "slots")
		p.Admins = drawAdmins(t, c, sleep)
	}
	p.Nemesis = drawNemesis(t, c, p, hb)
	p.Schedule = rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(t, "schedule")
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	return p
}

// drawClients draws the clients' scripts.
func drawClients(t *rapid.T, c Config, sleep *rapid.Generator[Step]) [][]Step {
	// A client works as lock users do: try for the lock a few times, work
	// and verify now and then, let go (or not), again. (An acquire while
	// the client believes it holds the lock is skipped.)
	cycle := rapid.Custom(func(t *rapid.T) []Step {
		steps := []Step{{Op: histories.Acquire}}
		for i := rapid.IntRange(0, 2).Draw(t, "retries"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "backoff"), Step{Op: histories.Acquire})
		}
		for i := rapid.IntRange(0, 3).Draw(t, "verifies"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "work"), Step{Op: histories.Verify})
		}
		if rapid.Bool().Draw(t, "release") {
			steps = append(steps, Step{Op: histories.Release})
		}
		return steps
	})
	var clients [][]Step
	nClients := rapid.IntRange(1, c.Clients).Draw(t, "clients")
	for i := 0; i < nClients; i++ {
		var script []Step
		for _, cy := range rapid.SliceOfN(cycle, 0, max(1, c.Ops/3)).Draw(t, "client") {
			script = append(script, cy...)
		}
		clients = append(clients, script)
	}
	return clients
}

// drawAdmins draws a semaphore's admins' scripts.
func drawAdmins(t *rapid.T, c Config, sleep *rapid.Generator[Step]) [][]Step {
	var out [][]Step
	adminStep := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Step {
			d := rapid.IntRange(1, 2).Draw(t, "delta")
			if rapid.Bool().Draw(t, "remove") {
				d = -d
			}
			return Step{Op: histories.Change, Delta: d}
		}),
		rapid.Just(Step{Op: histories.Count}),
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: histories.Wait, Slot: rapid.IntRange(1, 3).Draw(t, "slot")} }),
		sleep)
	admins := 1
	if c.Admins > 1 {
		admins = rapid.IntRange(1, c.Admins).Draw(t, "admins")
	}
	for i := 0; i < admins; i++ {
		out = append(out, rapid.SliceOfN(adminStep, 0, 4).Draw(t, "admin"))
	}
	return out
}

// drawNemesis draws the plan's faults: at a time, or right after a
// process's n-th method (inside an operation).
func drawNemesis(t *rapid.T, c Config, p *Plan, hb int64) []Fault {
	procs := p.processes()
	faults := c.Faults
	if len(p.Admins) == 0 {
		faults = nil
		for _, f := range c.Faults {
			if f != AdminCrash {
				faults = append(faults, f)
			}
		}
	}
	fault := rapid.Custom(func(t *rapid.T) Fault {
		f := Fault{Fault: rapid.SampledFrom(faults).Draw(t, "fault")}
		if f.Fault == AdminCrash {
			f.Target = adminName(rapid.IntRange(0, len(p.Admins)-1).Draw(t, "admin"))
			f.AfterCalls = rapid.IntRange(1, 8).Draw(t, "after_calls")
			return f
		}
		if rapid.Bool().Draw(t, "mid-operation") {
			// Right after the target's n-th method: inside an operation.
			f.AfterCalls = rapid.IntRange(1, 40).Draw(t, "after_calls")
			f.Target = rapid.SampledFrom(procs).Draw(t, "target")
		} else {
			f.At = rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, int(3*hb))).Draw(t, "at_ms")
			if f.Fault != histories.RestartBroker {
				f.Target = rapid.SampledFrom(procs).Draw(t, "target")
			}
		}
		if f.Fault == histories.Pause || f.Fault == histories.Partition {
			f.For = rapid.IntRange(0, int(4*hb)).Draw(t, "for_ms")
		}
		return f
	})
	if len(faults) == 0 {
		return nil
	}
	return rapid.SliceOfN(fault, 0, c.MaxFaults).Draw(t, "nemesis")
}
