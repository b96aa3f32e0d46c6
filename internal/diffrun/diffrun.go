// Package diffrun runs the sequences of a simulator's differential (a
// simulator answering the same calls as a real server, sequence by
// sequence: sim/consulsim's and sim/redissim's Differential): drawn in
// order from a seed as rapid draws them (internal/rapidbatch), judged
// side by side by a few workers, until all have run, one diverges, or an
// error stops them. What a sequence is, and how it is judged, is the
// simulator's own.
package diffrun

import (
	"context"
	"sync"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/internal/rapidbatch"
)

// A Verdict is how one sequence came out.
type Verdict interface {
	// Diverged reports whether the simulator and the server answered the
	// sequence differently.
	Diverged() bool
	// Inconclusive reports whether the machine was too slow to judge the
	// sequence on every try.
	Inconclusive() bool
	// Steps is the number of steps (calls, commands) of the sequence.
	Steps() int
}

// Config is a differential's run: N sequences of type S drawn from Seed
// in batches of Batch with Draw, judged into verdicts of type V by
// Workers goroutines at once.
type Config[S any, V Verdict] struct {
	N, Batch int
	Seed     uint64
	Draw     func(*rapid.T) S
	Workers  int
	// Judge judges sequence number k (from 0), s, on the worker's
	// goroutine (worker is from 0 to Workers-1). An error stops the run.
	Judge func(ctx context.Context, worker, k int, s S) (V, error)
	// Progress, if set, is told how many sequences have been judged, the
	// steps of those judged and how many were inconclusive, every tenth
	// of N while no sequence has diverged and no error stopped the run.
	Progress func(ran, steps, inconclusive int)
}

type job[S any] struct {
	k int
	s S
}

type judged[V any] struct {
	k   int
	v   V
	err error
}

// Run runs c's sequences until all have run, one diverges, or an error
// (the first, a Judge's or the drawing's) stops them. It returns the
// verdicts by number (nil for those not run; all those before a
// divergence have run) and the first divergence (the lowest-numbered
// diverging sequence among those judged), nil if none.
func Run[S any, V Verdict](ctx context.Context, c Config[S, V]) (vs []*V, first *V, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	defer halt()
	jobs := make(chan job[S])
	var drawErr error
	go func() {
		defer close(jobs)
		k := 0
		_, _, _, drawErr = rapidbatch.Cases(c.Seed, c.N, c.Batch, c.Draw, func(s S) bool {
			select {
			case jobs <- job[S]{k, s}:
				k++
				return false
			case <-stop:
				return true
			}
		})
	}()
	vs = make([]*V, c.N)
	firstK, ran, steps, slow := -1, 0, 0, 0
	for r := range judgeAll(ctx, c, jobs) {
		switch {
		case r.err != nil:
			if err == nil {
				err = r.err
			}
			halt()
			cancel()
			continue
		case r.v.Diverged() && (first == nil || r.k < firstK):
			first, firstK = &r.v, r.k
			halt()
		}
		vs[r.k] = &r.v
		if ran++; r.v.Inconclusive() {
			slow++
		} else {
			steps += r.v.Steps()
		}
		if c.Progress != nil && ran%max(c.N/10, 1) == 0 && ran < c.N && first == nil && err == nil {
			c.Progress(ran, steps, slow)
		}
	}
	if err == nil {
		err = drawErr // read once jobs is closed, before the verdicts were
	}
	return vs, first, err
}

// judgeAll judges the sequences of jobs on c.Workers goroutines, and
// sends each verdict on the channel it returns, closed once jobs is
// closed and every sequence is judged.
func judgeAll[S any, V Verdict](ctx context.Context, c Config[S, V], jobs <-chan job[S]) <-chan judged[V] {
	done := make(chan judged[V])
	var wg sync.WaitGroup
	for worker := range c.Workers {
		wg.Go(func() {
			for j := range jobs {
				v, err := c.Judge(ctx, worker, j.k, j.s)
				done <- judged[V]{j.k, v, err}
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// Tally counts the verdicts of vs that ran, in order, up to and
// including first: the sequences, the steps of those judged, and those
// inconclusive. It reports whether it reached first (not if an error
// stopped the run before a sequence ahead of it ran).
func Tally[V Verdict](vs []*V, first *V) (sequences, steps, inconclusive int, reached bool) {
	for _, v := range vs {
		if v == nil {
			break
		}
		sequences++
		if (*v).Inconclusive() {
			inconclusive++
		} else {
			steps += (*v).Steps()
		}
		if v == first {
			return sequences, steps, inconclusive, true
		}
	}
	return sequences, steps, inconclusive, false
}
