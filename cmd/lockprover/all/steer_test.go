package all_test

import (
	"slices"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/internal/prover"
)

// unsteered is a family without its goals: plans drawn as before
// steering, judged as the family judges them.
type unsteered struct{ prover.Subject }

func (u unsteered) Judging(model string) any { return u.Subject.(prover.Judging).Judging(model) }

// Steering reaches every goal of each lease family with a simulator
// within 600 plans of seed 1 (leaserun.Steering), on a simulated cluster
// the faults on its nodes among them, where the same search
// unsteered leaves some goals unreached or under 1 % of plans (the
// figures are this test's log).
func TestLeaseSteeringReachesEveryGoal(t *testing.T) {
	if testing.Short() {
		t.Skip("fourteen searches of 600 plans")
	}
	for _, c := range []struct {
		name    string
		f       prover.Subject
		cluster bool // goals of faults on the cluster's nodes too
	}{
		{"consul-semaphore", consulsemrun.Config{}, false},
		{"consul-semaphore on etcd", consulsemrun.Config{Backend: consulsemrun.Etcd}, false},
		{"consul-semaphore on a Consul cluster", consulsemrun.Config{SimCluster: true}, true},
		{"consul-semaphore on an etcd cluster", consulsemrun.Config{Backend: consulsemrun.Etcd, SimCluster: true}, true},
		{"redlock", redlockrun.Config{}, false},
		{"priority-redlock", redlockrun.Config{Priority: true}, false},
		{"db-semaphore", dbsemrun.Config{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			goals := c.f.(prover.Steerable).Goals()
			if c.cluster {
				for _, y := range []string{"partition of nodes", "restart-broker"} {
					for _, x := range []string{"acquire", "refresh", "verify", "release"} {
						if g := (prover.Interleaving{X: x, Y: y, How: prover.Struck, Who: "client"}); !slices.Contains(goals, g) {
							t.Errorf("no goal %s among the cluster's", g)
						}
					}
				}
			}
			search := func(f prover.Subject) *prover.Outcome {
				out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: 1, Plans: 600}.Run()
				if err != nil {
					t.Fatal(err)
				}
				if out.Found != nil {
					t.Fatalf("%s", out.Found.Summary())
				}
				return out
			}
			below := func(out *prover.Outcome) (never, rare []string) {
				for _, g := range goals {
					switch n := out.Interleavings[g]; {
					case n == 0:
						never = append(never, g.String())
					case n < 6:
						rare = append(rare, g.String())
					}
				}
				return never, rare
			}
			steered := search(c.f)
			never, rare := below(steered)
			if len(goals) < 20 || len(never) > 0 || steered.Steered != 300 {
				t.Errorf("steered: %d goals, never reached: %v; %d plans steered", len(goals), never, steered.Steered)
			}
			freeNever, freeRare := below(search(unsteered{c.f}))
			if len(freeNever)+len(freeRare) <= len(rare) {
				t.Errorf("unsteered: %d never reached, %d below 1%%; steered %d below 1%%: not the contrast this test shows", len(freeNever), len(freeRare), len(rare))
			}
			t.Logf("of %d goals in 600 plans: steered, %d below 1%% and none never reached; unsteered, %d below 1%% and %d never reached: %v",
				len(goals), len(rare), len(freeRare), len(freeNever), freeNever)
		})
	}
}
