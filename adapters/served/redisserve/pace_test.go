package redisserve_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// With a Speedup, a jump of the World's clock lasts a Speedup-th of it in
// real time for the processes (a 2 s sleep at 4, half a second); without
// one, it takes none.
func TestSpeedupPacesTheClocksJumps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		speedup  float64
		min, max time.Duration
	}{{4, 500 * time.Millisecond, 5 * time.Second}, {0, 0, 400 * time.Millisecond}} {
		var took time.Duration
		_, _, errs := serve(t, redissim.Options{}, redisserve.Options{Speedup: tc.speedup}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
			start := time.Now()
			sp.Do(func() { wp.Sleep(2 * time.Second) })
			took = time.Since(start)
			if took < tc.min || took > tc.max {
				return fmt.Errorf("speedup %v: 2 s of the World's clock took %v of the machine's, want %v to %v", tc.speedup, took, tc.min, tc.max)
			}
			return nil
		}})
		check(errs, t)
	}
}

// A jump absorbs the real time the processes' own work took since the
// first jump (the World's clock stood still meanwhile): two jumps of a
// second at Speedup 2, with 400 ms of work between them, take a second of
// the machine's in all, not 1.4 s, so the processes' clocks keep with the
// World's.
func TestSpeedupAbsorbsTheProcessesWork(t *testing.T) {
	t.Parallel()
	var took time.Duration
	_, _, errs := serve(t, redissim.Options{}, redisserve.Options{Speedup: 2}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		start := time.Now()
		sp.Do(func() {
			wp.Sleep(time.Second)
			time.Sleep(400 * time.Millisecond) // work: the World's clock stands still
			wp.Sleep(time.Second)
		})
		took = time.Since(start)
		if took < time.Second || took > 1300*time.Millisecond {
			return fmt.Errorf("two jumps of 1 s at speedup 2 with 400 ms of work between took %v, want 1 s to 1.3 s", took)
		}
		return nil
	}})
	check(errs, t)
}
