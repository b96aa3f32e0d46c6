package dbsemaphore

import (
	"testing"

	"github.com/lockprover/lockprover/prover"
)

// unsteered is Config without its goals: plans drawn as before steering.
type unsteered struct{ Config }

func (unsteered) Goals() {}

// Steering reaches every goal of the database semaphore within 1,000
// plans of seed 1, where the same search unsteered never reaches some
// (the figures are this test's).
func TestSteeringReachesEveryGoal(t *testing.T) {
	search := func(f prover.Family) *prover.Outcome {
		out, err := prover.Search{Config: prover.Config{Family: f}, Seed: 1, Plans: 1000}.Run()
		if err != nil {
			t.Fatal(err)
		}
		if out.Found != nil {
			t.Fatalf("%s", out.Found.Summary())
		}
		return out
	}
	goals := Config{}.Goals()
	never := func(out *prover.Outcome) (n []string) {
		for _, g := range goals {
			if out.Interleavings[g] == 0 {
				n = append(n, g.String())
			}
		}
		return n
	}
	steered := search(Config{})
	if n := never(steered); len(goals) != 42 || len(n) > 0 || steered.Steered != 500 {
		t.Errorf("steered: %d goals, never reached: %v; %d plans steered", len(goals), n, steered.Steered)
	}
	free := never(search(unsteered{Config{}}))
	if len(free) < 5 {
		t.Errorf("unsteered: only %d goals never reached: not the contrast this test shows", len(free))
	}
	t.Logf("of %d goals in 1000 plans, unsteered never reached %d: %v", len(goals), len(free), free)
}
