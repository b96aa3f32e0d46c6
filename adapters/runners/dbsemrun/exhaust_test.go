package dbsemrun

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// TestExhaust: every schedule of a small scope holds for the reference,
// with faults; a mutant's shortest counterexample runs again from its
// written plan to the same violation; admins are refused by their flag.
func TestExhaust(t *testing.T) {
	o, err := prover.Exhaust{Config: prover.Config{Subject: Config{}}, Scope: prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{histories.Kill}}}.Run()
	if err != nil || o.Found != nil || o.Stopped != "" || o.PlansDone != o.Plans || o.Plans != 28 || o.Schedules < 28 {
		t.Fatalf("the reference: %v, %+v", err, o)
	}
	caught(t, Config{Scope: prover.Scope{Mutant: "fence-from-uuid"}}, prover.ExhaustScope{Clients: 1, Ops: 2}, "fencing")
	if _, _, err := (Config{}).Skeletons(prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 1}); err == nil || !strings.HasPrefix(err.Error(), "--admin-ops:") {
		t.Errorf("admin operations: %v", err)
	}
}

// TestExhaustTwoClients: two clients, each with a limit of 1 or 2 of its
// own, are searched whole within one preemption: the reference holds, a
// mutant whose defect is a race between two acquires breaks
// lease-exclusive, and so does one that trusts each acquire's own limit
// (clients that disagree on it), each plan running again to the same
// history.
func TestExhaustTwoClients(t *testing.T) {
	s := prover.ExhaustScope{Clients: 2, Ops: 1, Bounded: true, Preemptions: 1}
	o, err := prover.Exhaust{Config: prover.Config{Subject: Config{}}, Scope: s}.Run()
	if err != nil || o.Found != nil || o.Stopped != "" || o.PlansDone != 64 || o.Schedules != 8102 {
		t.Fatalf("the reference: %v, %+v", err, o)
	}
	for _, m := range []string{"no-skip-locked", "mixed-max"} {
		caught(t, Config{Scope: prover.Scope{Mutant: m}}, s, "lease-exclusive")
	}
}

// TestExhaustClockFault: a client's clock run two ttls ahead, right after
// one of its statements, is in the scope: the reference, which never reads
// a client's clock, holds; a mutant that judges expiry by it takes a
// lease another client holds (lease-exclusive), with two clients and no
// preemption.
func TestExhaustClockFault(t *testing.T) {
	s := prover.ExhaustScope{Clients: 2, Ops: 1, MaxFaults: 1, Faults: []string{histories.ClockJump}, Bounded: true}
	if !testing.Short() {
		o, err := prover.Exhaust{Config: prover.Config{Subject: Config{}}, Scope: s}.Run()
		if err != nil || o.Found != nil || o.Stopped != "" || o.PlansDone != 832 || o.Schedules != 6370 {
			t.Fatalf("the reference: %v, %+v", err, o)
		}
	}
	caught(t, Config{Scope: prover.Scope{Mutant: "client-clock-expiry"}}, s, "lease-exclusive")
}

// caught checks that c's mutant breaks property within scope s, and that
// the counterexample's written plan runs again to the same history.
func caught(t *testing.T, c Config, s prover.ExhaustScope, property string) {
	t.Helper()
	o, err := prover.Exhaust{Config: prover.Config{Subject: c}, Scope: s}.Run()
	if err != nil || o.Found == nil || o.Found.Property != property {
		t.Fatalf("%s: %v, %+v", c.Mutant, err, o)
	}
	res, err := c.Run(t.Context(), o.Found.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.History, o.Found.Result.History) {
		t.Errorf("%s: the written plan runs to another history", c.Mutant)
	}
}

// TestExhaustSleep: the sleep past a lease's life lets a lease expire
// under its holder: acquire, sleep, refresh catches a refresh that
// revives it (no-revival), whose plan runs again to the same history.
func TestExhaustSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("84 plans, 18,439 schedules")
	}
	caught(t, Config{Scope: prover.Scope{Mutant: "refresh-revives-expired"}}, prover.ExhaustScope{Clients: 1, Ops: 3}, "no-revival")
}
