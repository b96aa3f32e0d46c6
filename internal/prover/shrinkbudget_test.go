package prover_test

import (
	"context"
	"math/bits"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/internal/prover"
)

// wideToy is the toy with slow plans, each of which also draws a 64-bit
// seed, as real plans draw a schedule's: the toy's mutant runs when the
// seed has 16 bits set or more (as a schedule may matter), the toy
// otherwise.
type wideToy struct {
	toyFamily
	runs *atomic.Int64
}

type widePlan struct {
	prover.Plan
	Seed uint64
}

func (f wideToy) Draw(t *rapid.T) prover.Plan {
	seed := rapid.Uint64().Draw(t, "seed")
	return widePlan{f.toyFamily.Draw(t), seed}
}

func (f wideToy) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	f.runs.Add(1)
	time.Sleep(10 * time.Millisecond)
	wp := p.(widePlan)
	return toyFamily{broken: bits.OnesCount64(wp.Seed) >= 16}.Run(ctx, wp.Plan)
}

func (wideToy) Deterministic() bool { return false }

// A shrink keeps to its budget in plans run, even where rapid would not:
// rapid checks its deadline between the blocks it minimises, and one
// 64-bit block takes it some 130 plans (each bit unset, then a binary
// search), with no check between them: a --shrink-time of 30 s took 198 s
// on MariaDB (issue 27, problem 5). Here plans take at least 10 ms and
// the budget is 200 ms: at most 20 of them fit, and a few more may be
// under way when it ends.
func TestShrinkKeepsToItsBudget(t *testing.T) {
	runs := &atomic.Int64{}
	f := wideToy{toyFamily{}, runs}
	out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: 1, Plans: 300, Parallel: 1, Shrink: 200 * time.Millisecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil {
		t.Fatalf("the toy's mutant was not caught in %d plans", out.Plans)
	}
	shrinkRuns := runs.Load() - int64(out.Plans)
	t.Logf("%d plans to the violation, %d run while shrinking", out.Plans, shrinkRuns)
	if shrinkRuns > 25 {
		t.Errorf("%d plans run while shrinking with a budget of 200 ms and plans of 10 ms or more: want at most 25", shrinkRuns)
	}
}
