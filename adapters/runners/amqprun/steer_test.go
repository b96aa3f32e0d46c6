package amqprun

import (
	"slices"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/prover"
)

// unsteered is Config without its goals: plans drawn as before steering.
type unsteered struct{ Config }

func (unsteered) Goals() {}

// Steering reaches every goal of amqp-locks' semaphore within 1,000 plans
// of seed 1, where the same search unsteered never reaches some goals and
// reaches many in under 1 % of plans (the figures are this test's).
func TestSteeringReachesEveryGoal(t *testing.T) {
	search := func(f prover.Subject) *prover.Outcome {
		out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: 1, Plans: 1000}.Run()
		if err != nil {
			t.Fatal(err)
		}
		if out.Found != nil {
			t.Fatalf("%s", out.Found.Summary())
		}
		return out
	}
	goals := Config{}.Goals()
	below := func(out *prover.Outcome) (never, rare []string) {
		for _, g := range goals {
			switch n := out.Interleavings[g]; {
			case n == 0:
				never = append(never, g.String())
			case n < 10:
				rare = append(rare, g.String())
			}
		}
		return never, rare
	}
	steered := search(Config{})
	never, rare := below(steered)
	if len(goals) != 129 || len(never) > 0 || steered.Steered != 500 {
		t.Errorf("steered: %d goals, never reached: %v; %d plans steered", len(goals), never, steered.Steered)
	}
	freeNever, freeRare := below(search(unsteered{Config{}}))
	if len(freeNever) < 5 || len(freeNever)+len(freeRare) < 30 {
		t.Errorf("unsteered: %d never reached, %d below 1%%: not the contrast this test shows", len(freeNever), len(freeRare))
	}
	t.Logf("of %d goals in 1000 plans: steered, %d below 1%% and none never reached; unsteered, %d below 1%% and %d never reached: %v",
		len(goals), len(rare), len(freeRare), len(freeNever), freeNever)
}

// The mutant no-admin-mutex, whose admins both extend the maximum they
// read at once, is caught on the simulator in fewer plans steered than
// unsteered: the median over seeds 1 to 9 of the plans drawn up to the
// first violation (logged).
func TestSteeringCatchesNoAdminMutexSooner(t *testing.T) {
	if testing.Short() {
		t.Skip("18 searches")
	}
	f := Config{Scope: prover.Scope{Mutant: "no-admin-mutex"}}
	median := func(f prover.Subject) (int, []int) {
		var plans []int
		for seed := uint64(1); seed <= 9; seed++ {
			out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: seed, Plans: 5000, Shrink: time.Millisecond}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found == nil {
				plans = append(plans, 5001) // not caught
				continue
			}
			plans = append(plans, out.Plans)
		}
		sorted := slices.Sorted(slices.Values(plans))
		return sorted[len(sorted)/2], plans
	}
	s, sp := median(f)
	u, up := median(unsteered{f})
	t.Logf("plans to catch no-admin-mutex, seeds 1 to 9: steered %v (median %d), unsteered %v (median %d)", sp, s, up, u)
	if s >= u {
		t.Errorf("steered median %d plans, unsteered %d: steering did not catch it sooner", s, u)
	}
}
