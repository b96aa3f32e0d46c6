package all_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/exhausttest"
	"github.com/lockprover/lockprover/internal/quick"
)

// The lease families' reduction is sound: pruning a schedule at a state
// the search has explored from before (the simulator's servers, its
// processes' inputs, the runner and the history so far, fingerprinted)
// reaches the same histories as running every schedule, so the same
// verdicts, on the scopes small enough for that, the reference and
// mutants alike; and it prunes. (A pruned schedule's history is not run:
// its state held its history so far, and what can follow was run from
// the state's first meeting, so every history it could end in was.)
func TestLeaseReductionSound(t *testing.T) {
	one, fault := prover.ExhaustScope{Clients: 1, Ops: 1}, prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1}
	mutant := func(m string) prover.Scope { return prover.Scope{Mutant: m} }
	for _, c := range []struct {
		name  string
		f     prover.Subject
		scope prover.ExhaustScope
		slow  bool
	}{
		{"redlock, a fault", redlockrun.Config{}, fault, false},
		{"redlock, 2 servers", redlockrun.Config{Servers: 2}, one, true},
		{"redlock no-drift, a fault", redlockrun.Config{Scope: mutant("no-drift")}, fault, false},
		{"redlock always-ok, 1x3", redlockrun.Config{Scope: mutant("always-ok")}, prover.ExhaustScope{Clients: 1, Ops: 3}, true},
		{"priority-redlock", redlockrun.Config{Priority: true}, one, false},
		{"consul-semaphore, 1x2", consulsemrun.Config{}, prover.ExhaustScope{Clients: 1, Ops: 2}, false},
		{"consul-semaphore on etcd, a fault", consulsemrun.Config{Backend: consulsemrun.Etcd}, fault, false},
		{"consul-plain-contender", consulsemrun.Config{Scope: mutant("consul-plain-contender")}, one, false},
		{"db-semaphore, a fault", dbsemrun.Config{}, fault, false},
		{"db-semaphore, 1x2", dbsemrun.Config{}, prover.ExhaustScope{Clients: 1, Ops: 2}, false},
		{"pg-advisory, a fault", pgadvisoryrun.Config{}, fault, false},
		{"pg-advisory, 1x3", pgadvisoryrun.Config{}, prover.ExhaustScope{Clients: 1, Ops: 3}, false},
		{"consul-delete-fence on etcd, 1x2", consulsemrun.Config{Scope: mutant("consul-delete-fence"), Backend: consulsemrun.Etcd}, prover.ExhaustScope{Clients: 1, Ops: 2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.slow {
				quick.Long(t, "a slow scope, every schedule of it twice")
				if testing.Short() {
					t.Skip("a slow scope")
				}
			}
			t.Parallel()
			search := func(reduce bool) (*prover.ExhaustOutcome, map[string]bool) {
				f := exhausttest.Record(c.f.(prover.Exhaustive))
				o, err := prover.Exhaust{Config: prover.Config{Subject: f}, Scope: c.scope, Reduce: reduce, MaxSchedules: 1e7}.Run()
				if err != nil {
					t.Fatal(err)
				}
				return o, f.Seen
			}
			plain, all := search(false)
			reduced, some := search(true)
			if missed := len(all) - len(some); missed != 0 || !maps.Equal(all, some) {
				t.Errorf("every schedule reached %d histories, the reduced search %d, %d of them not among the others", len(all), len(some), missed)
			}
			if p, r := slices.Sorted(maps.Keys(plain.Outcomes)), slices.Sorted(maps.Keys(reduced.Outcomes)); !slices.Equal(p, r) {
				t.Errorf("verdicts: every schedule %v, reduced %v", p, r)
			}
			if (plain.Found == nil) != (reduced.Found == nil) {
				t.Errorf("a counterexample found by every schedule: %v, reduced: %v", plain.Found != nil, reduced.Found != nil)
			}
			if reduced.Pruned == 0 || reduced.Schedules >= plain.Schedules {
				t.Errorf("reduced: %d schedules, %d pruned, against %d: nothing pruned", reduced.Schedules, reduced.Pruned, plain.Schedules)
			}
			t.Logf("%d schedules, reduced %d (%d states, %d pruned); %d histories, %d kinds of verdicts", plain.Schedules, reduced.Schedules, reduced.States, reduced.Pruned, len(all), len(plain.Outcomes))
		})
	}
}
