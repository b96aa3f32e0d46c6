package prover

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/internal/rapidbatch"
	"pgregory.net/rapid"
)

// A job is one batch of the seed's plans on the simulator, run by a
// worker: plan i is rapidbatch.Case i of the batch, which is what rapid
// would draw, so that the batch holds the same plans however many
// workers share the seed.
type job struct {
	number, size int
	tally        tally
	runErr       error // a plan could not run: the search ends there
	redo         bool  // rapid rejected a draw: run the batch with rapid
	halted       bool  // stopped before its last plan (interrupt, deadline, an earlier end)
	done         chan struct{}
}

// parallel runs the shard's batches on the simulator with Parallel
// workers, and counts their plans in the seed's order: a violation (or a
// plan that cannot run) ends the search where one worker would have met
// it, and the batches after it are dropped. The violation is then shrunk
// by rapid from the same case (rapidbatch.Shrink), so that the
// counterexample is the one a single worker finds.
func (r *searching) parallel(prop func(*rapid.T)) error {
	s := r.s
	r.out.BatchSize = batch
	workers := s.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	pool := r.startPool(workers)
	defer pool.stop()
	var pending []*job
	next := s.Shard
	for {
		for len(pending) < 2*workers && r.more(next) {
			j := &job{number: next, size: r.batchSize(next), done: make(chan struct{})}
			j.tally.digest = sha256.New()
			pending = append(pending, j)
			pool.queue <- j
			next += s.Shards
		}
		if len(pending) == 0 {
			return nil
		}
		j := pending[0]
		pending = pending[1:]
		<-j.done
		if j.redo {
			// rapid rejected a draw, so only rapid can say which plans
			// the batch holds: from here on, run batches as rapid does.
			// (rapid's settings are process-wide: no worker may draw.)
			pool.stop()
			return r.sequential(prop, j.number)
		}
		if r.count(j) {
			if r.last != nil {
				pool.stop()
				rapidbatch.Shrink(s.Seed, j.number, r.out.FoundIndex, prop)
			}
			return nil
		}
	}
}

// A pool is the workers of a parallel search.
type pool struct {
	queue chan *job
	end   *atomic.Int64 // the lowest batch that ended the search
	wg    sync.WaitGroup
	once  sync.Once
}

func (r *searching) startPool(workers int) *pool {
	cfg := r.s.Config.withDefaults()
	p := &pool{queue: make(chan *job, 2*workers), end: new(atomic.Int64)}
	p.end.Store(math.MaxInt64)
	for w := 0; w < workers; w++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.queue {
				r.runJob(cfg, j, p.end)
				close(j.done)
			}
		}()
	}
	return p
}

// stop stops the workers at their next plan and waits for them.
func (p *pool) stop() {
	p.once.Do(func() {
		p.end.Store(-1)
		close(p.queue)
		p.wg.Wait()
	})
}

// sequential runs the shard's batches from batch b on as one worker
// does, with rapid drawing the plans.
func (r *searching) sequential(prop func(*rapid.T), b int) error {
	out := r.out
	for ; r.more(b); b += r.s.Shards {
		out.Batches = append(out.Batches, BatchRun{Number: b})
		r.cur, r.digest = len(out.Batches)-1, sha256.New()
		rapidbatch.Batch(r.s.Seed, b, r.batchSize(b), prop)
		out.Batches[r.cur].Digest = hex.EncodeToString(r.digest.Sum(nil))
		r.cur = -1
	}
	return nil
}

// more says whether batch b is to run: the search is neither over nor
// interrupted, and b holds some of the seed's Plans.
func (r *searching) more(b int) bool {
	return r.last == nil && r.runErr == nil && !r.halt() && r.batchSize(b) > 0
}

// batchSize is how many of the seed's plans batch b holds.
func (r *searching) batchSize(b int) int {
	if r.s.Plans > 0 {
		return min(batch, r.s.Plans-b*batch)
	}
	return batch
}

// halt says whether no new plan should start: the search was interrupted
// or its deadline has passed. (Workers never shrink.)
func (r *searching) halt() bool {
	return r.ctx.Err() != nil || !r.s.Until.IsZero() && !time.Now().Before(r.s.Until)
}

// runJob runs a batch's plans until its last, a violation or a plan that
// cannot run (which ends the batches after it too), a halt, or an end of
// the search in an earlier batch.
func (r *searching) runJob(cfg Config, j *job, end *atomic.Int64) {
	for i := 0; i < j.size; i++ {
		if int64(j.number) > end.Load() || r.halt() {
			j.halted = true
			return
		}
		p, ok := rapidbatch.Case(r.s.Seed, j.number, i, cfg.Family.Draw)
		if !ok {
			j.redo = true
			return
		}
		cx, err := cfg.runRecovering(p)
		if err != nil {
			j.runErr = err
		} else {
			j.tally.add(cx)
		}
		if err != nil || cx.violated() {
			for b := end.Load(); int64(j.number) < b && !end.CompareAndSwap(b, int64(j.number)); b = end.Load() {
			}
			return
		}
	}
}

// count counts a finished batch after those before it, and says whether
// the search is over: the batch ended it (a violation, or a plan that
// could not run), or was halted.
func (r *searching) count(j *job) (over bool) {
	out := r.out
	out.Batches = append(out.Batches, BatchRun{Number: j.number})
	r.cur = len(out.Batches) - 1
	r.merge(&j.tally)
	out.Batches[r.cur].Digest = hex.EncodeToString(j.tally.digest.Sum(nil))
	r.cur = -1
	if j.runErr != nil && r.ctx.Err() == nil {
		r.runErr = j.runErr
	}
	return j.runErr != nil || r.last != nil || j.halted || r.halt()
}
