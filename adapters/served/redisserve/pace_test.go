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
