package amqprun

import (
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
)

// mutantBudget is how many plans each mutant gets to be caught in.
const mutantBudget = 3000

// Every mutant is caught, by the property that names its defect, within
// the budget.
func TestMutantsAreCaught(t *testing.T) {
	t.Parallel() // CPU of its own, beside the real-broker tests that mostly wait
	for _, m := range Mutants {
		t.Run(m.Name, func(t *testing.T) {
			out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: m.Name}}, Properties: []string{m.Property}}, Seed: 1, Plans: mutantBudget, Shrink: time.Second}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found == nil {
				t.Fatalf("not caught in %d plans", out.Plans)
			}
			if out.Found.Property != m.Property {
				t.Fatalf("caught by %s, want %s", out.Found.Property, m.Property)
			}
			t.Logf("caught after %d plans (%v): %s", out.Plans, out.Elapsed.Round(time.Millisecond), detail(out.Found))
		})
	}
}

func detail(cx *prover.Counterexample) string {
	for _, v := range cx.Report.Verdicts {
		if v.Property == cx.Property && v.Status == verdict.Fail {
			return v.Detail
		}
	}
	return ""
}
