package diffrun

import (
	"context"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

type verdict struct {
	k     int
	steps int
	div   bool
	slow  bool
}

func (v verdict) Diverged() bool     { return v.div }
func (v verdict) Inconclusive() bool { return v.slow }
func (v verdict) Steps() int         { return v.steps }

func draw(t *rapid.T) int { return rapid.IntRange(1, 9).Draw(t, "steps") }

// config judges n sequences on three workers: those in diverge diverge,
// every fourth is inconclusive, and fail (if not -1) fails.
func config(n int, diverge map[int]bool, fail int) Config[int, verdict] {
	return Config[int, verdict]{N: n, Batch: 7, Seed: 3, Draw: draw, Workers: 3,
		Judge: func(_ context.Context, _, k, steps int) (verdict, error) {
			if k == fail {
				return verdict{}, errors.New("broken")
			}
			return verdict{k: k, steps: steps, div: diverge[k], slow: k%4 == 3}, nil
		}}
}

// Every sequence runs when none diverges, in the order drawn, and the
// same seed draws the same sequences.
func TestAllRun(t *testing.T) {
	var ticks []int
	c := config(30, nil, -1)
	c.Progress = func(ran, _, _ int) { ticks = append(ticks, ran) }
	vs, first, err := Run(context.Background(), c)
	if err != nil || first != nil {
		t.Fatalf("first %v, err %v", first, err)
	}
	again, _, _ := Run(context.Background(), config(30, nil, -1))
	steps, slow := 0, 0
	for k, v := range vs {
		if v == nil || v.k != k || *again[k] != *v {
			t.Fatalf("sequence %d: %v, again %v", k, v, again[k])
		}
		if v.slow {
			slow++
		} else {
			steps += v.steps
		}
	}
	if len(ticks) != 9 || ticks[0] != 3 || ticks[8] != 27 {
		t.Errorf("progress at %v, want every 3 below 30", ticks)
	}
	seqs, st, inc, reached := Tally(vs, first)
	if seqs != 30 || st != steps || inc != slow || inc != 7 || reached {
		t.Errorf("Tally: %d sequences, %d steps, %d inconclusive, reached %v; want 30, %d, %d, false", seqs, st, inc, reached, steps, slow)
	}
}

// The first divergence is the lowest-numbered one, whichever a worker
// judged first, and every sequence before it ran.
func TestFirstDivergence(t *testing.T) {
	vs, first, err := Run(context.Background(), config(50, map[int]bool{12: true, 13: true, 40: true}, -1))
	if err != nil || first == nil || first.k != 12 {
		t.Fatalf("first %v, err %v", first, err)
	}
	if seqs, _, _, reached := Tally(vs, first); seqs != 13 || !reached {
		t.Errorf("Tally: %d sequences, reached %v; want 13, true", seqs, reached)
	}
}

// A Judge's error stops the run and is returned.
func TestError(t *testing.T) {
	_, _, err := Run(context.Background(), config(50, nil, 5))
	if err == nil || err.Error() != "broken" {
		t.Fatalf("err %v", err)
	}
}
