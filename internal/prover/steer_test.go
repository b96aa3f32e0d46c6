package prover_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// steerFamily is a toy family that only steering reaches: its plans are a
// number and the goal they were drawn toward, and a plan shows its goal's
// interleaving only if drawn toward it. A plan drawn toward the last goal
// whose number is a multiple of every violates (two holders at once); a
// number that is a multiple of skip is no plan.
type steerFamily struct{ every, skip int }

// steerGoals are steerFamily's goals, the most wanted first.
var steerGoals = []prover.Interleaving{
	{X: take, Y: drop, How: prover.After, Who: "client/client"},
	{X: take, Y: drop, How: prover.After, Who: "admin/client"},
	{X: take, Y: drop, How: prover.AfterOwn, Who: "client/client"},
	{X: take, Y: drop, How: prover.After, Who: "admin/admin"},
}

type steerPlan struct {
	N     int      `json:"n"`
	Goal  int      `json:"goal"` // 1 + the goal's index; 0 none
	Model string   `json:"model,omitempty"`
	Props []string `json:"properties,omitempty"`
}

func (p *steerPlan) Write(w io.Writer) error         { return json.NewEncoder(w).Encode(p) }
func (p *steerPlan) Brief() string                   { return fmt.Sprint("n = ", p.N, ", goal ", p.Goal) }
func (p *steerPlan) Judged(m string, props []string) { p.Model, p.Props = m, props }

func (f steerFamily) Draw(t *rapid.T) prover.Plan {
	n := rapid.IntRange(1, 1<<20).Draw(t, "n")
	if f.skip > 0 && n%f.skip == 0 {
		t.Skip("not a plan")
	}
	return &steerPlan{N: n}
}

func (f steerFamily) Goals() []prover.Interleaving { return steerGoals }

func (f steerFamily) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	p := f.Draw(t).(*steerPlan)
	for i, h := range steerGoals {
		if h == g {
			p.Goal = i + 1
		}
	}
	return p
}

func (f steerFamily) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	pl := p.(*steerPlan)
	var now int64
	rec := histories.NewRecorder(func() int64 { now += 1000; return now })
	op := func(proc, f string) {
		rec.Add(histories.Event{Process: proc, Type: histories.Invoke, F: f, Lock: "toy", Kind: toyKind})
		rec.Add(histories.Event{Process: proc, Type: histories.Ok, F: f, Lock: "toy", Kind: toyKind})
	}
	op("c1", take)
	if pl.Goal == len(steerGoals) && pl.N%f.every == 0 {
		op("c2", take) // while c1 holds
		op("c2", drop)
	}
	op("c1", drop)
	switch pl.Goal {
	case 1:
		op("c2", take)
		op("c2", drop)
	case 2:
		op("admin", take)
		op("admin", drop)
	case 3:
		op("c1", take)
		op("c1", drop)
	case 4:
		op("admin2", take)
		op("admin2", drop)
		op("admin", take)
		op("admin", drop)
	}
	return &prover.Result{History: rec.Events(), Evidence: model.Evidence{Lock: "toy"}}, nil
}

func (steerFamily) Deterministic() bool { return true }
func (steerFamily) String() string      { return "the steered toy" }

// unsteered is steerFamily without its goals: a family that cannot be
// steered.
type unsteered struct{ steerFamily }

func (unsteered) Goals() {}

// A search draws every other plan toward the goal reached least so far
// (then the least aimed at, then the first in the family's order): the
// goals no free draw reaches are each reached, and the outcome says which
// goals there are, how many plans were steered, and toward which.
func TestSteeringReachesWhatDrawsDoNot(t *testing.T) {
	out, err := prover.Search{Config: prover.Config{Subject: steerFamily{every: 1 << 30}}, Seed: 1, Plans: 100}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Goals, steerGoals) || out.Steered != 50 {
		t.Fatalf("goals %v, %d plans steered; want the family's, and 50", out.Goals, out.Steered)
	}
	// Each goal is reached when aimed at; the second also by plans aimed at
	// the fourth (an admin takes after a client's drop there too), so that
	// after the first round it is never the least reached, and the others
	// share the plans in turn.
	want := map[prover.Interleaving]int{steerGoals[0]: 17, steerGoals[1]: 1, steerGoals[2]: 16, steerGoals[3]: 16}
	if !reflect.DeepEqual(out.Aimed, want) {
		t.Errorf("plans aimed at the goals: %v, want %v", out.Aimed, want)
	}
	for _, g := range steerGoals {
		if reached := out.Aimed[g] + map[bool]int{true: out.Aimed[steerGoals[3]]}[g == steerGoals[1]]; out.Interleavings[g] != reached {
			t.Errorf("%s: reached by %d plans, want %d", g, out.Interleavings[g], reached)
		}
	}
	free, err := prover.Search{Config: prover.Config{Subject: unsteered{steerFamily{every: 1 << 30}}}, Seed: 1, Plans: 100}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if free.Goals != nil || free.Steered != 0 {
		t.Errorf("a family with no goals: goals %v, %d steered", free.Goals, free.Steered)
	}
	for _, g := range steerGoals {
		if free.Interleavings[g] != 0 {
			t.Errorf("%s reached without steering", g)
		}
	}
}

// Steering keeps the simulator's promise: however many workers run a
// search, and whichever shard runs a batch, it draws the same plans
// (digests), aims them at the same goals, and stops at the same first
// violation, which shrinks toward the goal it was drawn toward; also
// when rapid rejects draws and its own loop runs the batches.
func TestSteeringIsDeterministic(t *testing.T) {
	type result struct {
		plans, batch, index int
		digests             []string
		aimed, reached      map[prover.Interleaving]int
		found               string
	}
	run := func(f steerFamily, plans, workers, shard, shards int) result {
		out, err := prover.Search{Config: prover.Config{Subject: f}, Seed: 5, Plans: plans, Parallel: workers, Shard: shard, Shards: shards}.Run()
		if err != nil {
			t.Fatal(err)
		}
		r := result{plans: out.Plans, batch: out.FoundBatch, index: out.FoundIndex, aimed: out.Aimed, reached: out.Interleavings}
		for _, b := range out.Batches {
			r.digests = append(r.digests, fmt.Sprintf("%d:%d:%s", b.Number, b.Plans, b.Digest))
		}
		if out.Found != nil {
			r.found = out.Found.Plan.Brief()
		}
		return r
	}
	for _, c := range []struct {
		name string
		f    steerFamily
	}{
		{"no violation", steerFamily{every: 1 << 30}},
		{"a violation", steerFamily{every: 211}},
		{"rejected draws", steerFamily{every: 1 << 30, skip: 300}},
	} {
		t.Run(c.name, func(t *testing.T) {
			one := run(c.f, 2000, 1, 0, 1)
			if c.f.every < 1<<30 && (one.found == "" || one.found[len(one.found)-6:] != fmt.Sprint("goal ", len(steerGoals))) {
				t.Fatalf("found %q: want a violation shrunk toward goal %d", one.found, len(steerGoals))
			}
			for _, w := range []int{2, 8} {
				if got := run(c.f, 2000, w, 0, 1); !reflect.DeepEqual(got, one) {
					t.Errorf("%d workers:\n%+v\none worker:\n%+v", w, got, one)
				}
			}
			if one.found != "" {
				return
			}
			// Two shards run the whole search's batches, steered alike.
			a, b := run(c.f, 2000, 2, 0, 2), run(c.f, 2000, 2, 1, 2)
			got := map[string]bool{}
			for _, d := range append(a.digests, b.digests...) {
				got[d] = true
			}
			for _, d := range one.digests {
				if !got[d] {
					t.Errorf("batch %s of the whole search ran in neither shard", d)
				}
			}
		})
	}
}
