package consulsemrun

import (
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/exhausttest"
	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/model/lease"
)

// etcd-no-live-check (consulsem.Defects.NoLiveCheck, the grant without
// its check that the contender's session is alive) is not in the
// catalogue: no lease property can tell its histories from the
// reference's (docs/consul-semaphore.md, "Defects"). Shown here on every
// schedule of scopes in which the defect strikes: a client paused between
// its decision and its grant for three ttls, its session dead meanwhile,
// is granted by the mutant where the reference refuses it, so the mutant
// reaches histories the reference does not; yet every property holds on
// every one of them, since the grant's certain validity (its session's
// creation, after the invoke, plus the ttl) had ended before the grant
// returned.
func TestNoLiveCheckStrikesUnseen(t *testing.T) {
	const name = "etcd-no-live-check"
	// Not parallel: it lends the catalogue a mutant for its length.
	saved := Mutants
	Mutants = append(append([]*Mutant(nil), Mutants...), &Mutant{Name: name, Property: lease.LeaseExclusive,
		defects: func(d *consulsem.Defects) { d.NoLiveCheck = true }})
	defer func() { Mutants = saved }()
	fault := prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{"pause"}}
	for _, tc := range []struct {
		name  string
		c     Config
		scope prover.ExhaustScope
		slow  bool
	}{
		{"etcd, 1x1, a pause", Config{Backend: Etcd}, fault, false},
		{"consul, 1x1, a pause", Config{}, fault, false},
		{"etcd, 1x2, a pause", Config{Backend: Etcd}, prover.ExhaustScope{Clients: 1, Ops: 2, MaxFaults: 1, Faults: []string{"pause"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.slow && testing.Short() {
				t.Skip("a slow scope")
			}
			search := func(mutant string) (*prover.ExhaustOutcome, map[string]bool) {
				s := tc.scope
				s.Mutant = mutant
				f := exhausttest.Record(tc.c)
				o, err := prover.Exhaust{Config: prover.Config{Subject: f}, Scope: s, Reduce: true, MaxSchedules: 1e7}.Run()
				if err != nil {
					t.Fatal(err)
				}
				return o, f.Seen
			}
			ref, refSeen := search("")
			mut, mutSeen := search(name)
			if ref.Found != nil {
				t.Fatalf("the reference fails %s on this scope", ref.Found.Property)
			}
			if mut.Found != nil {
				t.Fatalf("the mutant fails %s: a property can tell it apart after all", mut.Found.Property)
			}
			only := 0
			for h := range mutSeen {
				if !refSeen[h] {
					only++
				}
			}
			if only == 0 {
				t.Fatalf("the mutant reached no history the reference does not (%d histories): the defect never struck", len(mutSeen))
			}
			t.Logf("reference %d schedules, %d histories; mutant %d schedules, %d histories, %d of them the reference's never, every property holding on each", ref.Schedules, len(refSeen), mut.Schedules, len(mutSeen), only)
		})
	}
}
