package dbsemaphore

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/prover"
)

// TestExhaust: every schedule of a small scope holds for the reference,
// with faults; a mutant's shortest counterexample runs again from its
// written plan to the same violation; admins are refused by their flag.
func TestExhaust(t *testing.T) {
	o, err := prover.Exhaust{Config: prover.Config{Family: Config{}}, Scope: prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{histories.Kill}}}.Run()
	if err != nil || o.Found != nil || o.Stopped != "" || o.PlansDone != o.Plans || o.Plans != 28 || o.Schedules < 28 {
		t.Fatalf("the reference: %v, %+v", err, o)
	}
	o, err = prover.Exhaust{Config: prover.Config{Family: Config{Scope: prover.Scope{Mutant: "fence-from-uuid"}}}, Scope: prover.ExhaustScope{Clients: 1, Ops: 2}}.Run()
	if err != nil || o.Found == nil || o.Found.Property != "fencing" {
		t.Fatalf("fence-from-uuid: %v, %+v", err, o)
	}
	res, err := Config{}.Run(t.Context(), o.Found.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.History, o.Found.Result.History) {
		t.Errorf("the written plan runs to another history")
	}
	if _, _, err := (Config{}).Skeletons(prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 1}); err == nil || !strings.HasPrefix(err.Error(), "--admin-ops:") {
		t.Errorf("admin operations: %v", err)
	}
}

// TestExhaustTwoClients: two clients are searched whole within one
// preemption: the reference holds, and a mutant whose defect is a race
// between two acquires breaks lease-exclusive, its plan running again
// to the same history.
func TestExhaustTwoClients(t *testing.T) {
	s := prover.ExhaustScope{Clients: 2, Ops: 1, Bounded: true, Preemptions: 1}
	o, err := prover.Exhaust{Config: prover.Config{Family: Config{}}, Scope: s}.Run()
	if err != nil || o.Found != nil || o.Stopped != "" || o.PlansDone != 16 || o.Schedules != 1258 {
		t.Fatalf("the reference: %v, %+v", err, o)
	}
	c := Config{Scope: prover.Scope{Mutant: "no-skip-locked"}}
	o, err = prover.Exhaust{Config: prover.Config{Family: c}, Scope: s}.Run()
	if err != nil || o.Found == nil || o.Found.Property != "lease-exclusive" {
		t.Fatalf("no-skip-locked: %v, %+v", err, o)
	}
	res, err := c.Run(t.Context(), o.Found.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.History, o.Found.Result.History) {
		t.Errorf("the written plan runs to another history")
	}
}

// TestExhaustSleep: the sleep past a lease's life lets a lease expire
// under its holder: acquire, sleep, refresh catches a refresh that
// revives it (no-revival), whose plan runs again to the same history.
func TestExhaustSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("84 plans, 18,439 schedules")
	}
	c := Config{Scope: prover.Scope{Mutant: "refresh-revives-expired"}}
	o, err := prover.Exhaust{Config: prover.Config{Family: c}, Scope: prover.ExhaustScope{Clients: 1, Ops: 3}}.Run()
	if err != nil || o.Found == nil || o.Found.Property != "no-revival" {
		t.Fatalf("refresh-revives-expired: %v, %+v", err, o)
	}
	res, err := c.Run(t.Context(), o.Found.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.History, o.Found.Result.History) {
		t.Errorf("the written plan runs to another history")
	}
}
