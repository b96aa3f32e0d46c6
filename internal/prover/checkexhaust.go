package prover

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// CheckExhaust proves c.Subject in t under every plan of scope and every
// schedule of each (Exhaust, with its reductions), as `lockprover prove
// --exhaustive` does: t fails with the shortest counterexample, written
// where Check writes one; with the scope refused (too large, or meaning
// nothing for the family); or with schedules undecided, the scope then
// not searched whole. What the search covered is logged.
func CheckExhaust(t *testing.T, c Config, scope ExhaustScope) {
	t.Helper()
	ready(t, c)
	o, err := Exhaust{Config: c, Scope: scope, Reduce: true, Context: t.Context()}.Run()
	switch {
	case errors.Is(err, ErrScopeTooLarge):
		t.Fatalf("%v; the scope: %s", err, o.Scope)
	case err != nil:
		t.Fatalf("%v", err)
	}
	t.Logf("%d plans, %d schedules, %d undecided, %v: %s", o.PlansDone, o.Schedules, o.Undecided, o.Elapsed.Round(1e6), o.Scope)
	switch {
	case o.Found != nil:
		t.Errorf("the shortest counterexample: %s %s\n%s", o.Found.Property, o.Found.verb(), o.Found.Plan.Brief())
		dir := c.Out
		if dir == "" {
			dir = t.ArtifactDir()
		}
		if err := o.Found.Write(dir); err != nil {
			t.Errorf("writing the counterexample: %v", err)
			return
		}
		replay := "go run github.com/lockprover/lockprover/cmd/lockprover replay " + filepath.Join(dir, "plan.json")
		if it, ok := c.Subject.(InTest); ok && it.InTest() {
			replay = fmt.Sprintf("go test -run '^%s$' (the search is deterministic: it finds the same counterexample again)", t.Name())
		}
		t.Logf("plan and history in %s\nreplay: %s", dir, replay)
	case o.Undecided > 0:
		t.Errorf("nothing violated, but %d of %d schedules undecided (the first: %s): the scope was not searched whole", o.Undecided, o.Schedules, o.FirstUndecided)
	}
}
