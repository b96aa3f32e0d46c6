package leaserun

import (
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// Sleeps draws a script's pauses: short ones (1 to 50 ms), ones about a
// lease's life (aboutLo to aboutHi ms: a lease just over or not yet), and
// long ones (1 to longMs), so that leases expire under their holders (a
// GC pause, say).
func Sleeps(aboutLo, aboutHi, longMs int) *rapid.Generator[lease.Step] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) lease.Step {
			return lease.Step{Op: lease.Sleep, Ms: rapid.IntRange(1, 50).Draw(t, "ms")}
		}),
		rapid.Custom(func(t *rapid.T) lease.Step {
			return lease.Step{Op: lease.Sleep, Ms: rapid.IntRange(aboutLo, aboutHi).Draw(t, "about_ttl_ms")}
		}),
		rapid.Custom(func(t *rapid.T) lease.Step {
			return lease.Step{Op: lease.Sleep, Ms: rapid.IntRange(1, longMs).Draw(t, "long_ms")}
		}))
}

// DrawScripts draws the scripts of 1 to clients clients, each of up to
// ops operations (lease.WithinOps). Clients arrive at different times, as
// a service's instances do (some after a sleep), and work as lease users
// do, in cycles: try for the lease a few times, work and refresh now and
// then, let go (or not, mostly after some work: at times longer than the
// lease, the holder paused past its ttl, then letting go). work, if not
// nil, draws each piece of work's operation (a refresh, or a verify);
// nil: a refresh. With the same draws, a family's plans stay the same.
func DrawScripts(t *rapid.T, clients, ops int, sleep *rapid.Generator[lease.Step], work *rapid.Generator[string]) [][]lease.Step {
	cycle := rapid.Custom(func(t *rapid.T) []lease.Step {
		steps := []lease.Step{{Op: histories.Acquire}}
		for i := rapid.IntRange(0, 2).Draw(t, "retries"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "backoff"), lease.Step{Op: histories.Acquire})
		}
		for i := rapid.IntRange(0, 3).Draw(t, "refreshes"); i > 0; i-- {
			op := histories.Refresh
			if work != nil {
				op = work.Draw(t, "work_op")
			}
			steps = append(steps, sleep.Draw(t, "work"), lease.Step{Op: op})
		}
		if rapid.Bool().Draw(t, "release") {
			if rapid.IntRange(0, 3).Draw(t, "work then release") > 0 {
				steps = append(steps, sleep.Draw(t, "work"))
			}
			steps = append(steps, lease.Step{Op: histories.Release})
		}
		return steps
	})
	var scripts [][]lease.Step
	for range rapid.IntRange(1, clients).Draw(t, "clients") {
		var script []lease.Step
		if rapid.Bool().Draw(t, "arrives late") {
			script = append(script, sleep.Draw(t, "arrival"))
		}
		for _, cy := range rapid.SliceOfN(cycle, 1, ops).Draw(t, "client") {
			script = append(script, cy...)
		}
		scripts = append(scripts, lease.WithinOps(script, ops))
	}
	return scripts
}
