package prover_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// rareFamily's plans are one number each; the lock it proves lets two
// clients take it at once when the number is a multiple of every: a
// violation now and then, deep into a seed's batches. A number that is a
// multiple of skip is no plan: rapid rejects it.
type rareFamily struct{ every, skip int }

type rarePlan struct {
	N     int      `json:"n"`
	Model string   `json:"model,omitempty"`
	Props []string `json:"properties,omitempty"`
}

func (p *rarePlan) Write(w io.Writer) error         { return json.NewEncoder(w).Encode(p) }
func (p *rarePlan) Brief() string                   { return fmt.Sprint("n = ", p.N) }
func (p *rarePlan) Judged(m string, props []string) { p.Model, p.Props = m, props }

func (f rareFamily) Draw(t *rapid.T) prover.Plan {
	n := rapid.IntRange(1, 1<<20).Draw(t, "n")
	if f.skip > 0 && n%f.skip == 0 {
		t.Skip("not a plan") // rapid draws another case instead
	}
	return &rarePlan{N: n}
}

func (f rareFamily) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	n := p.(*rarePlan).N
	var now int64
	rec := histories.NewRecorder(func() int64 { now += 1000; return now })
	ev := func(proc, f string, typ histories.Type) {
		rec.Add(histories.Event{Process: proc, Type: typ, F: f, Lock: "toy", Kind: toyKind})
	}
	ev("c1", take, histories.Invoke)
	ev("c1", take, histories.Ok)
	if n%f.every == 0 {
		ev("c2", take, histories.Invoke)
		ev("c2", take, histories.Ok)
	}
	ev("c1", drop, histories.Invoke)
	ev("c1", drop, histories.Ok)
	return &prover.Result{History: rec.Events(), Evidence: model.Evidence{Lock: "toy"}}, nil
}

func (rareFamily) Deterministic() bool { return true }
func (rareFamily) String() string      { return "the rare toy" }

// However many workers run a search on the simulator, it runs the same
// plans, counts the same outcomes, and stops at the same first violation
// (the earliest in the seed's order, though a later batch may fail first
// in time), shrunk from the same case.
func TestWorkersFindTheSame(t *testing.T) {
	type result struct {
		plans, ops, judged, batch, index int
		digests                          []string
		verdicts                         map[string]map[verdict.Status]int
		found                            string
	}
	run := func(f rareFamily, plans, workers int) result {
		var progress []int
		out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: 3, Plans: plans, Parallel: workers,
			Progress: func(p, _ int) { progress = append(progress, p) }}.Run()
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(progress); i++ {
			if progress[i] <= progress[i-1] {
				t.Errorf("%d workers: progress went from %d to %d", workers, progress[i-1], progress[i])
			}
		}
		r := result{plans: out.Plans, ops: out.Ops, judged: out.Judged, batch: out.FoundBatch, index: out.FoundIndex, verdicts: out.Verdicts}
		for _, b := range out.Batches {
			r.digests = append(r.digests, fmt.Sprintf("%d:%d:%s", b.Number, b.Plans, b.Digest))
		}
		if out.Found != nil {
			r.found = out.Found.Plan.Brief()
		}
		return r
	}
	for _, c := range []struct {
		name         string
		f            rareFamily
		plans        int
		wantViolated bool
	}{
		{"a violation in batch 4 or so", rareFamily{every: 2003}, 20000, true},
		{"none", rareFamily{every: 1 << 30}, 3100, false},
		{"rejected draws", rareFamily{every: 2003, skip: 400}, 20000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			one := run(c.f, c.plans, 1)
			if (one.found != "") != c.wantViolated || c.wantViolated && one.batch < 1 {
				t.Fatalf("one worker: found %q in batch %d: not the search this test needs", one.found, one.batch)
			}
			if c.wantViolated {
				// Where rapid, batch after batch, meets the first violation.
				b, i := firstRare(t, c.f, 3)
				if one.batch != b || one.index != i || one.plans != b*500+i+1 {
					t.Errorf("found at batch %d, plan %d, after %d plans; rapid meets it at batch %d, plan %d", one.batch, one.index, one.plans, b, i)
				}
			}
			for _, w := range []int{2, 3, 8} {
				if got := run(c.f, c.plans, w); !reflect.DeepEqual(got, one) {
					t.Errorf("%d workers:\n%+v\none worker:\n%+v", w, got, one)
				}
			}
		})
	}
}

// An interrupted search with workers stops, and says so.
func TestWorkersInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	out, err := prover.Search{Config: prover.Config{Subject: rareFamily{every: 1 << 30}}, Seed: 1, Plans: 1 << 30, Parallel: 4, Context: ctx,
		Progress: func(p, _ int) {
			if n++; n == 3 {
				cancel()
			}
		}}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if !out.Interrupted || out.Plans == 0 || out.Plans >= 1<<30 {
		t.Errorf("interrupted %v after %d plans", out.Interrupted, out.Plans)
	}
}

// firstRare is where rapid's check loop, batch after batch of 500, draws
// the first plan that violates.
func firstRare(t *testing.T, f rareFamily, seed uint64) (batch, index int) {
	end, err := rapidbatch.Begin(0)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	for b := 0; b < 100; b++ {
		i, found := 0, false
		rapidbatch.Batch(seed, b, 500, func(rt *rapid.T) {
			if found {
				return
			}
			if f.Draw(rt).(*rarePlan).N%f.every == 0 {
				found = true
				return
			}
			i++
		})
		if found {
			return b, i
		}
	}
	t.Fatal("no violation in 100 batches")
	return
}

// realRare is rareFamily on a "real target": plans take real time, run
// at once, and those whose number is a multiple of alone must run alone.
type realRare struct {
	rareFamily
	alone                int
	mu                   *sync.Mutex
	running, most, mixed *int
}

func (realRare) Deterministic() bool { return false }

func (f realRare) Alone(p prover.Plan) bool { return p.(*rarePlan).N%f.alone == 0 }

func (f realRare) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	f.mu.Lock()
	*f.running++
	*f.most = max(*f.most, *f.running)
	if *f.running > 1 && (f.Alone(p) || *f.mixed < 0) {
		*f.mixed = *f.running
	}
	if f.Alone(p) {
		*f.mixed = -1 - *f.mixed // an alone plan runs: none may start
	}
	f.mu.Unlock()
	time.Sleep(time.Millisecond)
	f.mu.Lock()
	*f.running--
	if f.Alone(p) {
		*f.mixed = -1 - *f.mixed
	}
	f.mu.Unlock()
	return f.rareFamily.Run(ctx, p)
}

// On a real target plans run Parallel at once, each counted in the seed's
// order (the first violation is the one a single worker meets), and a
// plan that must run alone runs with no other.
func TestParallelOnARealTarget(t *testing.T) {
	search := func(parallel int) (*prover.Outcome, int, int) {
		var mu sync.Mutex
		var running, most, mixed int
		f := realRare{rareFamily: rareFamily{every: 97}, alone: 7, mu: &mu, running: &running, most: &most, mixed: &mixed}
		out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: 5, Plans: 400, Parallel: parallel, Shrink: 1}.Run()
		if err != nil {
			t.Fatal(err)
		}
		return out, most, mixed
	}
	one, most1, _ := search(1)
	four, most4, mixed := search(4)
	if one.Found == nil || one.Plans < 20 {
		t.Fatalf("the violation was met after %d plans: not the search this test needs", one.Plans)
	}
	if four.Plans != one.Plans || four.FoundBatch != one.FoundBatch || four.Ops != one.Ops || !reflect.DeepEqual(four.Verdicts, one.Verdicts) {
		t.Errorf("4 at once: %d plans, found at %d; one at a time: %d plans, found at %d", four.Plans, four.FoundBatch, one.Plans, one.FoundBatch)
	}
	if one.BatchSize != 0 || len(one.Batches) != one.Plans || one.Batches[len(one.Batches)-1].Number != one.Plans-1 {
		t.Errorf("on a real target a batch is one plan, numbered by its place: BatchSize %d, %d batches for %d plans", one.BatchSize, len(one.Batches), one.Plans)
	}
	if most1 != 1 || most4 < 2 {
		t.Errorf("at most %d plans ran at once with Parallel 1, %d with Parallel 4", most1, most4)
	}
	if mixed != 0 {
		t.Errorf("a plan that must run alone ran beside %d others", mixed-1)
	}
}

// meeting is rareFamily on a "real target" whose plans wait for each
// other: a plan runs until every plan of the meeting has begun, or 10 s.
type meeting struct {
	rareFamily
	arrived *sync.WaitGroup
	all     chan struct{} // closed once every plan has begun
	alone   *atomic.Int32 // plans that waited 10 s in vain
}

func (meeting) Deterministic() bool { return false }

func (f meeting) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	f.arrived.Done()
	select {
	case <-f.all:
	case <-time.After(10 * time.Second):
		f.alone.Add(1)
	}
	return f.rareFamily.Run(ctx, p)
}

// Searches in one process (a test binary's) run their plans at once on a
// real target: they take turns only for what rapid's process-wide flags
// are needed for (shrinking), not while plans run.
func TestSearchesRunAtOnce(t *testing.T) {
	const searches = 3
	var arrived sync.WaitGroup
	arrived.Add(searches)
	f := meeting{rareFamily: rareFamily{every: 1 << 30}, arrived: &arrived, all: make(chan struct{}), alone: &atomic.Int32{}}
	go func() {
		arrived.Wait()
		close(f.all)
	}()
	var wg sync.WaitGroup
	for s := 0; s < searches; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: uint64(s + 1), Plans: 1, Parallel: 1}.Run()
			if err != nil || out.Plans != 1 || out.Found != nil {
				t.Errorf("search %d: %v, %+v", s, err, out)
			}
		}()
	}
	wg.Wait()
	if n := f.alone.Load(); n > 0 {
		t.Errorf("%d of %d searches ran their plan without the others", n, searches)
	}
}
