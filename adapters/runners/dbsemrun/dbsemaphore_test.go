package dbsemrun

import (
	"bytes"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model/lease"
)

// The reference holds on the simulator, under every fault, in both
// designs, with and without fencing.
func TestReferenceHolds(t *testing.T) {
	for _, o := range []Options{{}, {Design: "row-per-slot"}, {Fencing: true}, {Design: "row-per-slot", Fencing: true}} {
		t.Run(o.Design+map[bool]string{true: ",fencing"}[o.Fencing], func(t *testing.T) {
			out, err := prover.Search{Config: prover.Config{Subject: Config{Options: o}}, Seed: 1, Plans: 1000, Shrink: time.Second}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found != nil {
				t.Fatalf("%s", out.Found.Summary())
			}
			for _, p := range []string{"lease-exclusive", "no-revival", "acquire-exact", "recovers"} {
				if out.Verdicts[p][verdict.Pass] == 0 {
					t.Errorf("%s never passed on a plan: %v", p, out.Verdicts[p])
				}
			}
		})
	}
}

// Every mutant is caught on the simulator, by its property.
func TestMutantsAreCaught(t *testing.T) {
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
	out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: "count-without-lock"}}}, Seed: 3, Plans: 2000, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil {
		t.Skip("nothing found to replay")
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

// A mutant whose acquire retries after a lost COMMIT reply, when the
// retry cannot even get a connection (the server restarting), answers an
// error: it does not panic (it did, closing a nil connection, and the
// search stopped on "a plan could not run").
func TestAmbiguousRetryWithoutAConnection(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	c := prover.Config{Subject: Config{Scope: prover.Scope{Mutant: "ambiguous-commit-retry", Faults: []string{histories.DropReply, histories.RestartBroker}}},
		Properties: []string{lease.Available}}
	for seed := uint64(1); seed <= 3; seed++ {
		if _, err := (prover.Search{Config: c, Seed: seed, Plans: 3000, Shrink: time.Nanosecond}).Run(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}
