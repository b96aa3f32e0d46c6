package consulsemrun

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/exhausttest"
)

// readPlan is ReadPlan as a family's plan, for exhausttest.Replays.
func readPlan(path string) (prover.Plan, error) { return ReadPlan(path) }

// TestExhaust: every schedule of a small scope holds for the reference,
// on Consul and on etcd with every fault; mutants' shortest
// counterexamples are found by the scopes docs/exhaustive.md names, and
// run again from their written plans to the same violation.
func TestExhaust(t *testing.T) {
	one := prover.ExhaustScope{Clients: 1, Ops: 1}
	o := exhausttest.Search(t, Config{}, one)
	if o.Found != nil || o.Plans != 5 || o.Schedules != 285 {
		t.Fatalf("the reference on Consul, 1x1: %+v", o)
	}
	o = exhausttest.Search(t, Config{Backend: Etcd}, prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1})
	if o.Found != nil || o.Plans != 77 || o.Schedules != 3067 || !strings.Contains(o.Scope, "restart-broker") {
		t.Fatalf("the reference on etcd, 1x1, a fault: %+v", o)
	}
	for _, tc := range []struct {
		c        Config
		s        prover.ExhaustScope
		property string
	}{
		{Config{Scope: prover.Scope{Mutant: "consul-plain-contender"}}, one, "available"},
		{Config{Scope: prover.Scope{Mutant: "consul-delete-fence"}, Backend: Etcd}, prover.ExhaustScope{Clients: 1, Ops: 2}, "fencing"},
		// Acquire, sleep past the session's life, release: ok.
		{Config{Scope: prover.Scope{Mutant: "consul-release-ok"}, Backend: Etcd}, prover.ExhaustScope{Clients: 1, Ops: 3}, "no-revival"},
	} {
		if testing.Short() && tc.s.Ops > 2 {
			continue
		}
		o := exhausttest.Search(t, tc.c, tc.s)
		if o.Found == nil || o.Found.Property != tc.property {
			t.Fatalf("%s: %+v", tc.c, o)
		}
		exhausttest.Replays(t, tc.c, readPlan, o.Found)
	}
}

// TestExhaustScopeRefused: a scope that means nothing for the family is
// refused naming its flag.
func TestExhaustScopeRefused(t *testing.T) {
	for _, tc := range []struct {
		s    prover.ExhaustScope
		flag string
	}{
		{prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 1}, "--admin-ops:"},
		{prover.ExhaustScope{Clients: 1, Ops: 1, Admins: 2}, "--admins:"},
		{prover.ExhaustScope{Clients: 0, Ops: 1}, "--clients:"},
		{prover.ExhaustScope{Clients: 4, Ops: 4}, "--clients 4, --ops 4:"},
	} {
		if _, _, err := (Config{}).Skeletons(tc.s); err == nil || !strings.HasPrefix(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.s, err, tc.flag)
		}
	}
}
