package redlockrun

import (
	"bytes"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
)

// The reference holds on the simulator, under every fault, on one, two
// and three servers, with and without persistence.
func TestReferenceHolds(t *testing.T) {
	t.Parallel()
	out, err := prover.Search{Config: prover.Config{Subject: Config{}}, Seed: 1, Plans: 2000, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	for _, p := range lease.WithValidity {
		if out.Verdicts[p][verdict.Pass] == 0 {
			t.Errorf("%s never passed on a plan: %v", p, out.Verdicts[p])
		}
	}
}

// Every mutant is caught on the simulator, by its property.
func TestMutantsAreCaught(t *testing.T) {
	t.Parallel()
	for _, m := range Mutants {
		t.Run(m.Name, func(t *testing.T) {
			out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: m.Name}}, Properties: []string{m.Property}},
				Seed: 1, Plans: 5000, Shrink: time.Second}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found == nil || out.Found.Property != m.Property {
				t.Fatalf("not caught by %s in %d plans", m.Property, out.Plans)
			}
			t.Logf("caught after %d plans: %s", out.Plans, out.Found.Summary())
		})
	}
}

// The same plan gives the same history, byte for byte.
func TestSameSeedSameHistory(t *testing.T) {
	t.Parallel()
	out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: "plain-del-release"}}}, Seed: 3, Plans: 3000, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil {
		t.Fatal("nothing found to replay")
	}
	p := out.Found.Plan.(*Plan)
	var a, b bytes.Buffer
	histories.Write(&a, out.Found.Result.History)
	for i := 0; i < 3; i++ {
		res, err := Simulate(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		b.Reset()
		histories.Write(&b, res.History)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("run %d differs", i)
		}
	}
}

// A library's start an implementation said is recorded in whole
// milliseconds after the invoke, rounded up (validity_ms is rounded down),
// but never after the grant's return as recorded: a start within the
// first millisecond of a grant that took less gives none.
func TestStartedMs(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		started, took time.Duration
		want          int
	}{{10 * us, 500 * us, 0}, {10 * us, 3 * time.Millisecond, 1}, {2300 * us, 10 * time.Millisecond, 3}, {5 * time.Millisecond, 4900 * us, 4}} {
		if got := startedMs(c.started, c.took); got != c.want {
			t.Errorf("startedMs(%v, %v) = %d, want %d", c.started, c.took, got, c.want)
		}
	}
}
