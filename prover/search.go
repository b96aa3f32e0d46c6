package prover

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
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

// rapid's settings are process-wide flags: one search at a time.
var searchMu sync.Mutex

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
	searchMu.Lock()
	defer searchMu.Unlock()
	restore, err := setRapidFlags(map[string]string{"rapid.nofailfile": "true", "rapid.shrinktime": s.Shrink.String(), "rapid.checks": "1", "rapid.seed": "1"})
	if err != nil {
		return nil, err
	}
	defer restore()
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
		if testing.Short() {
			n *= 5 // rapid runs a fifth of its checks under -short
		}
		flag.Set("rapid.checks", fmt.Sprint(n))
		flag.Set("rapid.seed", fmt.Sprint(mix(s.Seed, uint64(b))))
		before := out.Plans
		rapid.Check(&quietTB{}, prop)
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

// mix derives batch seeds from a base seed (splitmix64); never zero, which
// rapid would take for "random".
func mix(seed, b uint64) uint64 {
	z := seed + (b+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 {
		z = 1
	}
	return z
}

// setRapidFlags sets rapid's flags and returns a function that restores
// them.
func setRapidFlags(values map[string]string) (func(), error) {
	old := map[string]string{}
	for name, v := range values {
		f := flag.Lookup(name)
		if f == nil {
			return nil, fmt.Errorf("prover: rapid has no flag %s", name)
		}
		old[name] = f.Value.String()
		if err := flag.Set(name, v); err != nil {
			return nil, err
		}
	}
	return func() {
		for name, v := range old {
			flag.Set(name, v)
		}
	}, nil
}

// quietTB is the rapid.TB of a search: it keeps rapid's failure to itself
// (the counterexample says it all).
type quietTB struct{ failed bool }

func (*quietTB) Helper()                 {}
func (*quietTB) Name() string            { return "lockprover-search" }
func (*quietTB) Logf(string, ...any)     {}
func (*quietTB) Log(...any)              {}
func (*quietTB) Skipf(string, ...any)    {}
func (*quietTB) Skip(...any)             {}
func (*quietTB) SkipNow()                {}
func (t *quietTB) Errorf(string, ...any) { t.failed = true }
func (t *quietTB) Error(...any)          { t.failed = true }
func (t *quietTB) Fatalf(string, ...any) { t.failed = true }
func (t *quietTB) Fatal(...any)          { t.failed = true }
func (t *quietTB) FailNow()              { t.failed = true }
func (t *quietTB) Fail()                 { t.failed = true }
func (t *quietTB) Failed() bool          { return t.failed }
