// Package exhausttest is what the families' tests of their exhaustive
// searches (prover.Exhaust) share, written once: a search of a scope run
// whole, a counterexample written as a plan, read back as replay reads
// it and run again to the same history and the same violation, and a
// family that notes which histories a search reached.
package exhausttest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// Search searches s of f whole (or up to the plans of its shortest
// counterexample), failing t if it could not.
func Search(t testing.TB, f prover.Subject, s prover.ExhaustScope) *prover.ExhaustOutcome {
	t.Helper()
	o, err := prover.Exhaust{Config: prover.Config{Subject: f}, Scope: s}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if o.Stopped != "" || o.PlansDone != o.Plans && o.Found == nil {
		t.Fatalf("%+v: stopped (%s) after %d of %d plans", s, o.Stopped, o.PlansDone, o.Plans)
	}
	return o
}

// Replays writes cx's plan, reads it back with read (the family's
// ReadPlan, as replay reads it) and runs it on f again: the same history,
// and the same property fails, judged as f judges (prover.Judging).
func Replays(t testing.TB, f prover.Subject, read func(path string) (prover.Plan, error), cx *prover.Counterexample) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cx.Plan.Write(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.History, cx.Result.History) {
		t.Errorf("the written plan runs to another history")
	}
	var o model.Options
	if j, ok := f.(prover.Judging); ok {
		o.Family = []any{j.Judging("")}
	}
	r := prover.Judge(res, o)
	failed := false
	for _, v := range r.Verdicts {
		failed = failed || v.Property == cx.Property && v.Status == verdict.Fail
	}
	if !failed {
		t.Errorf("the written plan: %s did not fail: %+v", cx.Property, r.Verdicts)
	}
}

// A Recording is a family whose runs note each history they give, by its
// JSON, in Seen: which histories a search reached.
type Recording struct {
	prover.Exhaustive
	Seen map[string]bool
}

// Record wraps f.
func Record(f prover.Exhaustive) Recording { return Recording{f, map[string]bool{}} }

func (r Recording) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	res, err := r.Exhaustive.Run(ctx, p)
	if err == nil {
		b, _ := json.Marshal(res.History)
		r.Seen[string(b)] = true
	}
	return res, err
}

// Judging is the wrapped family's.
func (r Recording) Judging(model string) any { return r.Exhaustive.(prover.Judging).Judging(model) }
