package prover

import (
	"context"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/internal/rapidbatch"
)

// A Search proves c outside go test, as the CLI does: rapid draws plans in
// batches from Seed until Plans have run or Until passes, and shrinks the
// first violation for at most Shrink.
type Search struct {
	Config
	Seed  uint64    // the same seed draws the same plans
	Plans int       // how many plans at most; 0 means no limit (Until must be set)
	Until time.Time // draw no new batch after this; zero means no limit
	// Shard of Shards: this search runs the batches whose number is Shard
	// modulo Shards, so that machines can split a seed's plans.
	Shard, Shards int
	Shrink        time.Duration // time to minimise a failing plan; 0 means 30 s
	// Progress, if set, is called after every plan (not while shrinking).
	Progress func(plans, judged int)
	// Context, if set, interrupts the search: no new plan starts, and a
	// run on a real broker stops and cleans up.
	Context context.Context
}

// Outcome is what a Search found.
type Outcome struct {
	Plans   int // plans run up to and including the first violation, or in all
	Ops     int // operations those plans recorded
	Judged  int // property verdicts given on those plans
	Elapsed time.Duration
	Found   *Counterexample // the minimal counterexample, or nil
}

// batch is how many plans each rapid.Check draws.
const batch = 500

// Run runs the search.
func (s Search) Run() (*Outcome, error) {
	if s.Plans <= 0 && s.Until.IsZero() {
		return nil, fmt.Errorf("prover: a search needs a number of plans or a deadline")
	}
	if s.Shards <= 0 {
		s.Shard, s.Shards = 0, 1
	}
	if s.Shrink == 0 {
		s.Shrink = 30 * time.Second
	}
	end, err := rapidbatch.Begin(s.Shrink)
	if err != nil {
		return nil, fmt.Errorf("prover: %w", err)
	}
	defer end()
	out := &Outcome{}
	start := time.Now()
	var last *Counterexample
	s.Config.ctx = s.Context
	prop := s.Config.property(func(cx *Counterexample) {
		if out.Found != nil || last != nil {
			if cx.Property != "" {
				last = cx // a smaller failing plan, while shrinking
			}
			return
		}
		out.Plans++
		out.Ops += len(cx.Result.History) / 2
		out.Judged += len(cx.Report.Verdicts)
		if cx.Property != "" {
			last = cx
		}
		if s.Progress != nil {
			s.Progress(out.Plans, out.Judged)
		}
	})
	ctx := s.Context
	if ctx == nil {
		ctx = context.Background()
	}
	s.Config.ctx = ctx
	for b := s.Shard; last == nil && ctx.Err() == nil; b += s.Shards {
		if s.Plans > 0 && out.Plans >= s.Plans || !s.Until.IsZero() && time.Now().After(s.Until) {
			break
		}
		n := batch
		if s.Plans > 0 {
			n = min(batch, s.Plans-out.Plans)
		}
		before := out.Plans
		rapidbatch.Batch(s.Seed, b, n, prop)
		if out.Plans == before && last == nil {
			return nil, fmt.Errorf("prover: rapid drew no valid plan in a batch of %d", n)
		}
	}
	out.Found, out.Elapsed = last, time.Since(start)
	if err := ctx.Err(); err != nil && last == nil {
		return out, fmt.Errorf("interrupted after %d plans", out.Plans)
	}
	return out, nil
}
