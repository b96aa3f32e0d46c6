package semantics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/sim"
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
					res, err := RunSim(v.c, sim.Seeded(seed))
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
	res, err := RunSim(c, sim.Seeded(1))
	if err != nil || len(res.Mismatches) != 1 || !strings.Contains(res.Mismatches[0], `got "405 channel", want "ok"`) {
		t.Errorf("mismatches = %q, %v", res.Mismatches, err)
	}
	c = partitionCase("x", time.Second, false)
	c.Steps[5].Within[1] = 1100 * time.Millisecond
	res, _ = RunSim(c, sim.Seeded(1))
	if len(res.Mismatches) != 1 || !strings.Contains(res.Mismatches[0], "(want 1s..1.1s)") {
		t.Errorf("timing mismatch not reported: %q", res.Mismatches)
	}
}
