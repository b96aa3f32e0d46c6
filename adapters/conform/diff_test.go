package conform

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// diffSequences is the test's budget: LOCKPROVER_CONFORM_SEQUENCES
// overrides it.
func diffSequences(t *testing.T) int {
	n := 150
	if testing.Short() {
		n = 30
	}
	if s := os.Getenv("LOCKPROVER_CONFORM_SEQUENCES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LOCKPROVER_CONFORM_SEQUENCES=%q: %v", s, err)
		}
		n = v
	}
	return n
}

// The simulator and RabbitMQ observe the same thing for drawn sequences.
func TestDifferential(t *testing.T) {
	t.Parallel()
	tg := openServer(t, Options{})
	if !tg.FastCtl() {
		t.Skip("the rabbitmqctl eval session does not start")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LOCKPROVER_CONFORM_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Attr("seed", strconv.FormatUint(seed, 10))
	out, err := tg.Differential(context.Background(), DiffOptions{Sequences: diffSequences(t), Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d sequences, %d steps, %v", seed, out.Sequences, out.Steps, out.Elapsed.Round(time.Millisecond))
	if out.Found != nil {
		t.Fatalf("divergence (seed %d):\n%s", seed, out.Found)
	}
}

// A wrong simulator is caught, and the divergence shrinks to the few steps
// that show it: here a simulator that miscounts a purge of one message.
func TestDifferentialCatchesAWrongSimulator(t *testing.T) {
	t.Parallel()
	tg := openServer(t, Options{})
	if !tg.FastCtl() {
		t.Skip("the rabbitmqctl eval session does not start")
	}
	miscount := func(ops []Op, obs []string) {
		for i, o := range ops {
			if o.Kind == "purge" && i < len(obs) && obs[i] == "ok n=1" {
				obs[i] = "ok n=7"
			}
		}
	}
	out, err := tg.Differential(context.Background(), DiffOptions{Sequences: 3000, Seed: 1, Shrink: 10 * time.Second, simMutant: miscount})
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil {
		t.Fatalf("no divergence in %d sequences", out.Sequences)
	}
	t.Logf("after %d sequences, %v:\n%s", out.Sequences, out.Elapsed.Round(time.Millisecond), out.Found)
	d := out.Found
	if got := d.Ops[d.First]; got.Kind != "purge" || d.Real[d.First] != "ok n=1" || d.Sim[d.First] != "ok n=7" {
		t.Errorf("diverging step %d: %v, rabbitmq %q, simulator %q", d.First+1, got, d.Real[d.First], d.Sim[d.First])
	}
	// declare, publish, purge: nothing else is needed.
	if len(d.Ops) > 3 || d.First != len(d.Ops)-1 {
		t.Errorf("not minimal: %d steps, diverging at %d", len(d.Ops), d.First+1)
	}
	if d.Reproduced != d.Replays {
		t.Errorf("reproduced in %d of %d replays", d.Reproduced, d.Replays)
	}
}

// A divergence is kept up to its first diverging step, the smallest
// first: fewer steps win, and of as many the one diverging no later.
func TestKeepCutsAfterTheFirstDivergence(t *testing.T) {
	ops := func(n int) []Op {
		var o []Op
		for i := range n {
			o = append(o, Op{On: "A", Kind: "declare", Queue: fmt.Sprintf("Q%d", i+1)})
		}
		return o
	}
	obs := func(n int) []string { return make([]string, n) }
	r := &diffRun{}
	r.keep(&Divergence{Ops: ops(6), Real: obs(6), Sim: obs(6), First: 3})
	if f := r.found; len(f.Ops) != 4 || len(f.Real) != 4 || len(f.Sim) != 4 || f.First != 3 {
		t.Fatalf("kept %d steps (%d and %d observations), first %d; want 4, diverging at 3", len(f.Ops), len(f.Real), len(f.Sim), f.First)
	}
	r.keep(&Divergence{Ops: ops(5), Real: obs(5), Sim: obs(5), First: 4})
	if len(r.found.Ops) != 4 {
		t.Errorf("a divergence of 5 steps replaced one of 4")
	}
	r.keep(&Divergence{Ops: ops(8), Real: obs(8), Sim: obs(8), First: 1})
	if len(r.found.Ops) != 2 || r.found.First != 1 {
		t.Errorf("kept %d steps diverging at %d; want 2 at 1", len(r.found.Ops), r.found.First)
	}
}
