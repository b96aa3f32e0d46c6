package redisserve_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// setGet is a client that sets k and reads it back.
func setGet(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
	ctx := context.Background()
	c := goRedis(sp, 0)
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		return err
	}
	return c.Get(ctx, "k").Err()
}

// A replay holds what comes early: idle turns where the log has them,
// the client's commands waiting meanwhile, then the commands, with
// nothing to say.
func TestReplayHoldsWhatComesEarly(t *testing.T) {
	t.Parallel()
	_, s, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": setGet})
	check(errs, t)
	log := s.Log()["c1"]
	i := slices.Index(log, "s0 set k v")
	if i < 0 {
		t.Fatalf("no SET in the log %q", log)
	}
	script := slices.Concat(log[:i], []string{"idle", "idle", "idle"}, log[i:])
	_, s2, errs := serve(t, redissim.Options{}, redisserve.Options{Script: map[string][]string{"c1": script}}, map[string]client{"c1": setGet})
	check(errs, t)
	if d := s2.Diverged(); len(d) > 0 {
		t.Fatalf("diverged: %q", d)
	}
	if got := s2.Log()["c1"]; !slices.Equal(got, script) {
		t.Fatalf("replayed %q\nthe log was %q", got, script)
	}
}

// Where the client does what its log does not have next, the replay
// says so (the step, what the log had, that the client did not do it in
// Late), and records from there.
func TestReplaySaysWhereItDiverged(t *testing.T) {
	t.Parallel()
	_, s, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": setGet})
	check(errs, t)
	script := slices.Clone(s.Log()["c1"])
	i := slices.Index(script, "s0 get k")
	script[i] = "s0 get other"
	_, s2, errs := serve(t, redissim.Options{}, redisserve.Options{Script: map[string][]string{"c1": script}, Late: 300 * time.Millisecond}, map[string]client{"c1": setGet})
	check(errs, t)
	d := s2.Diverged()
	if len(d) != 1 || !strings.Contains(d[0], "step "+itoa(i+1)+" in the log is s0 get other") || !strings.Contains(d[0], "did not do it in 300ms") {
		t.Fatalf("diverged: %q", d)
	}
	if got := s2.Log()["c1"]; !slices.Contains(got, "s0 get k") {
		t.Fatalf("the client's GET was not taken once the replay ended: %q", got)
	}
}
