package pgadvisoryrun

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/exhausttest"
)

// readPlan is ReadPlan as a family's plan, for exhausttest.Replays.
func readPlan(path string) (prover.Plan, error) { return ReadPlan(path) }

// TestExhaust: every schedule of small scopes holds for the reference
// under the default faults; the mutants' shortest counterexamples are
// found by the scopes docs/exhaustive.md names, and run again from their
// written plans to the same violation.
func TestExhaust(t *testing.T) {
	o := exhausttest.Search(t, Config{}, prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1})
	if o.Found != nil || o.Plans != 30 || o.Schedules != 2210 || !strings.Contains(o.Scope, "faults of kill, pause, partition") {
		t.Fatalf("the reference, 1x1, a fault: %+v", o)
	}
	o = exhausttest.Search(t, Config{}, prover.ExhaustScope{Clients: 1, Ops: 2})
	if o.Found != nil || o.Plans != 30 || o.Schedules != 2450 {
		t.Fatalf("the reference, 1x2: %+v", o)
	}
	three := prover.ExhaustScope{Clients: 1, Ops: 3}
	for _, tc := range []struct {
		mutant   string
		s        prover.ExhaustScope
		property string
	}{
		// Acquire, sleep past the idle session's life, refresh: it says
		// ok, asking nothing.
		{"no-check", three, "no-revival"},
		// Acquire, sleep, release: it says ok, on a fresh session; its
		// own acquire-exact needs two clients (below).
		{"unlock-elsewhere", three, "no-revival"},
		// c1 acquires; c2 sleeps 3/4 of a ttl, past c1's session's
		// idle timeout of half a ttl, and takes the lock c1's lease
		// still counts on.
		{"short-idle", prover.ExhaustScope{Clients: 2, EachOps: []int{2, 1}, Ops: 2}, "lease-exclusive"},
	} {
		if testing.Short() && tc.s.Clients > 1 {
			continue
		}
		c := Config{Scope: prover.Scope{Mutant: tc.mutant}}
		o := exhausttest.Search(t, c, tc.s)
		if o.Found == nil || o.Found.Property != tc.property {
			t.Fatalf("%s: %+v", tc.mutant, o)
		}
		exhausttest.Replays(t, c, readPlan, o.Found)
	}
}

// TestExhaustScopeRefused: a scope that means nothing for the family, or
// a real server, is refused naming its flag.
func TestExhaustScopeRefused(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		s    prover.ExhaustScope
		flag string
	}{
		{Config{}, prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 1}, "--admin-ops:"},
		{Config{}, prover.ExhaustScope{Clients: 1, Ops: 1, Admins: 2}, "--admins:"},
		{Config{}, prover.ExhaustScope{Clients: 0, Ops: 1}, "--clients:"},
		{Config{}, prover.ExhaustScope{Clients: 1, Ops: 0}, "--ops:"},
		{Config{Server: &postgres.Server{}}, prover.ExhaustScope{Clients: 1, Ops: 1}, "--exhaustive:"},
	} {
		if _, _, err := tc.c.Skeletons(tc.s); err == nil || !strings.HasPrefix(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.s, err, tc.flag)
		}
	}
}
