package semantics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// phases shift a timed case's Mark against the heartbeat ticks, which a
// real broker varies by itself.
var phases = []time.Duration{0, 137 * time.Millisecond, 411 * time.Millisecond, 733 * time.Millisecond, 1300 * time.Millisecond}

// TestSimulator runs every row of broker-semantics.md on the simulator,
// under several seeds (the broker's own open choices) and, for timed rows,
// several heartbeat phases.
func TestSimulator(t *testing.T) {
	for _, c := range Cases {
		t.Run(strings.ReplaceAll(c.ID+" "+c.Title, " ", "_"), func(t *testing.T) {
			for _, v := range variants(c) {
				for seed := uint64(0); seed < 8; seed++ {
					res, err := RunSim(v.c, rabbitmqsim.Seeded(seed))
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range res.Mismatches {
						t.Errorf("%s seed %d: %s", v.name, seed, m)
					}
				}
			}
		})
	}
}

type variant struct {
	name string
	c    Case
}

func variants(c Case) []variant {
	mark := -1
	for i, s := range c.Steps {
		if s.Do.op == "mark" {
			mark = i
		}
	}
	if mark < 0 {
		return []variant{{"", c}}
	}
	var vs []variant
	for _, d := range phases {
		v := c
		v.Steps = append(append(append([]Step(nil), c.Steps[:mark]...), Step{Do: Wait(d), Want: "ok"}), c.Steps[mark:]...)
		vs = append(vs, variant{fmt.Sprintf("phase %v", d), v})
	}
	return vs
}

// The table must be able to fail: a wrong expectation and a timing outside
// its bounds are both reported.
func TestMismatchesAreReported(t *testing.T) {
	c := Cases[0]
	c.Steps = append([]Step(nil), c.Steps...)
	c.Steps[1].Want = "ok"
	res, err := RunSim(c, rabbitmqsim.Seeded(1))
	if err != nil || len(res.Mismatches) != 1 || !strings.Contains(res.Mismatches[0], `got "405 channel", want "ok"`) {
		t.Errorf("mismatches = %q, %v", res.Mismatches, err)
	}
	c = partitionCase("x", time.Second, false)
	c.Steps[5].Within[1] = 1100 * time.Millisecond
	res, _ = RunSim(c, rabbitmqsim.Seeded(1))
	if len(res.Mismatches) != 1 || !strings.Contains(res.Mismatches[0], "(want 1s..1.1s)") {
		t.Errorf("timing mismatch not reported: %q", res.Mismatches)
	}
}

// A bound stretches with the broker's latency as the case measured it,
// and only by Slack times it: a release 340 ms after the Mark meets
// 0..100 ms when the slowest round trip took 48 ms (a loaded broker), not
// when it took 2 ms, and 600 ms meets it with neither.
func TestWindowStretchesWithLatency(t *testing.T) {
	ms := time.Millisecond
	w := [2]time.Duration{0, 100 * ms}
	for _, c := range []struct {
		seen, now, slowest time.Duration
		want               int
	}{
		{50 * ms, 60 * ms, 2 * ms, inside},
		{330 * ms, 340 * ms, 48 * ms, stretched},
		{330 * ms, 340 * ms, 2 * ms, outside},
		{590 * ms, 600 * ms, 48 * ms, outside},
	} {
		if got := window(w, c.seen, c.now, c.slowest); got != c.want {
			t.Errorf("seen %v, now %v, slowest %v: %d, want %d", c.seen, c.now, c.slowest, got, c.want)
		}
	}
	// The lower bound does not move: a change too early is too early.
	if got := window([2]time.Duration{time.Second, 2 * time.Second}, 400*ms, 500*ms, time.Second); got != outside {
		t.Errorf("a change before the lower bound: %d, want outside", got)
	}
}
