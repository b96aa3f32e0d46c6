package prover

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/internal/rapidbatch"
	"pgregory.net/rapid"
)

// A job is some of the seed's plans, run by one worker: on the simulator
// a whole batch, elsewhere one plan. Its plans are cases first, first+1,
// ... of rapid's batch (rapidbatch.Case): what rapid's own loop would
// draw, so that the seed's plans are the same however many workers share
// them, and the same on every target.
type job struct {
	number             int // its place in the seed's order: the batch's number, or the plan's
	batch, first, size int
	tally              tally
	plans              hash.Hash     // the plans' JSON, one after the other: the digest
	runErr             error         // a plan could not run: the search ends there
	redo, halted       bool          // rapid rejected a draw; stopped before its last plan
	goal               *Interleaving // on a real target, the goal its plan is drawn toward
	done               chan struct{}
}

// realPerCPU is how many plans run at once on a real target, per CPU, by
// default.
const realPerCPU = 4

// Alone is a family whose plans can disturb each other when they run at
// once on a real target: Alone says whether a plan must run with no other
// (it restarts a server the others use).
type Alone interface {
	Alone(Plan) bool
}

// run runs the shard's plans, Parallel at a time, and counts them in the
// seed's order: a violation (or a plan that cannot run) ends the search
// where one worker would have met it, the plans after it are dropped, and
// rapid shrinks it from the same case (rapidbatch.Shrink), so that the
// counterexample is the one a single worker finds.
func (r *searching) run(prop func(*rapid.T)) error {
	s := r.s
	workers := s.Parallel
	switch {
	case workers > 0:
	case r.simulated:
		workers = runtime.GOMAXPROCS(0)
	default:
		// A real target's plans mostly wait (on the network, on timers).
		workers = realPerCPU * runtime.GOMAXPROCS(0)
	}
	if r.simulated {
		r.out.BatchSize = batch
	}
	pool := r.startPool(workers)
	defer pool.stop()
	var pending []*job
	for n := 0; ; {
		for len(pending) < 2*workers && !r.stopped() {
			j := r.job(n)
			if j == nil {
				break
			}
			n++
			pending = append(pending, j)
			pool.queue <- j
		}
		if len(pending) == 0 {
			return nil
		}
		j := pending[0]
		pending = pending[1:]
		<-j.done
		if j.redo && r.simulated {
			// rapid rejected a draw, so only rapid can say which plans
			// the batch holds: from here on, run batches as rapid does.
			// (rapid's settings are process-wide: no worker may draw.)
			pool.stop()
			if err := r.rapid(); err != nil {
				return err
			}
			return r.sequential(prop, j.number)
		}
		if r.count(j) {
			if r.last != nil && s.Shrink > time.Millisecond {
				pool.stop()
				if err := r.rapid(); err != nil {
					return err
				}
				rapidbatch.Shrink(s.Seed, j.batch, j.first+j.tally.plans-1, prop)
			}
			return nil
		}
	}
}

// job returns the shard's n-th job, or nil when the plans asked for are
// used up: on the simulator batch Shard+n*Shards (its plans are the same
// whichever shard runs it); elsewhere plan Shard+n*Shards, one at a time,
// so that shards share the plans evenly.
func (r *searching) job(n int) *job {
	k := r.s.Shard + n*r.s.Shards
	if r.simulated {
		if size := r.batchSize(k); size > 0 {
			return &job{number: k, batch: k, size: size, done: make(chan struct{})}
		}
		return nil
	}
	if r.s.Plans > 0 && k >= r.s.Plans {
		return nil
	}
	// Steered from what the plans counted so far reached, and what the
	// plans drawn so far were aimed at.
	goal := aimFrom(r.goals, r.out.Interleavings, r.aiming, k)
	if goal != nil {
		if r.aiming == nil {
			r.aiming = map[Interleaving]int{}
		}
		r.aiming[*goal]++
	}
	return &job{number: k, batch: k / batch, first: k % batch, size: 1, goal: goal, done: make(chan struct{})}
}

// batchSize is how many of the seed's plans batch b holds.
func (r *searching) batchSize(b int) int {
	if r.s.Plans > 0 {
		return min(batch, r.s.Plans-b*batch)
	}
	return batch
}

// A pool is the workers of a search.
type pool struct {
	queue  chan *job
	end    atomic.Int64 // the lowest job that ended the search
	gate   sync.RWMutex // a plan that must run alone takes it for writing
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func (r *searching) startPool(workers int) *pool {
	cfg := r.s.Config.withDefaults()
	p := &pool{queue: make(chan *job, 2*workers)}
	cfg.ctx, p.cancel = context.WithCancel(r.ctx) // ends the plans still running once the search is over
	p.end.Store(math.MaxInt64)
	for w := 0; w < workers; w++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.queue {
				r.runJob(cfg, p, j)
				close(j.done)
			}
		}()
	}
	return p
}

// stop stops the workers (at their next plan; a plan on a real target at
// once) and waits for them.
func (p *pool) stop() {
	p.once.Do(func() {
		p.end.Store(-1)
		p.cancel()
		close(p.queue)
		p.wg.Wait()
	})
}

// sequential runs the shard's batches from batch b on as one worker
// does, with rapid drawing the plans.
func (r *searching) sequential(prop func(*rapid.T), b int) error {
	out := r.out
	for ; !r.stopped() && r.batchSize(b) > 0; b += r.s.Shards {
		out.Batches = append(out.Batches, BatchRun{Number: b})
		r.cur, r.digest = len(out.Batches)-1, sha256.New()
		r.batch = &tally{} // steers the batch's plans, as a worker's does
		r.batch.steerBy(r.steer)
		rapidbatch.Batch(r.s.Seed, b, r.batchSize(b), prop)
		r.batch = nil
		out.Batches[r.cur].Digest = hex.EncodeToString(r.digest.Sum(nil))
		r.cur = -1
	}
	return nil
}

// halt says whether no new plan should start: the search was interrupted
// or its deadline has passed. (Workers never shrink.)
func (r *searching) halt() bool {
	return r.ctx.Err() != nil || !r.s.Until.IsZero() && !time.Now().Before(r.s.Until)
}

// stopped says whether the search is over or halted.
func (r *searching) stopped() bool { return r.last != nil || r.runErr != nil || r.halt() }

// runJob runs a job's plans until its last, a violation or a plan that
// cannot run (which ends the jobs after it too), a halt, or an end of the
// search in an earlier job.
func (r *searching) runJob(cfg Config, p *pool, j *job) {
	j.plans = sha256.New()
	j.tally.digest = j.plans
	if r.simulated {
		j.tally.steerBy(r.steer)
	}
	alone, _ := cfg.Subject.(Alone)
	for i := j.first; i < j.first+j.size; i++ {
		if int64(j.number) > p.end.Load() || r.halt() {
			j.halted = true
			return
		}
		// On the simulator, a batch steers from its own plans, so that it
		// draws the same plans whichever worker or shard runs it.
		goal := j.goal
		if r.simulated {
			goal = j.tally.aim(i)
		}
		plan, ok := rapidbatch.Case(r.s.Seed, j.batch, i, func(t *rapid.T) Plan { return cfg.draw(t, goal) })
		if !ok {
			j.redo = true
			return
		}
		cx, err := r.runShared(cfg, p, plan, alone != nil && !r.simulated && alone.Alone(plan))
		if err != nil {
			j.runErr = err
		} else {
			cx.aimed = goal
			j.tally.add(cx)
		}
		if err != nil || cx.violated() {
			for e := p.end.Load(); int64(j.number) < e && !p.end.CompareAndSwap(e, int64(j.number)); e = p.end.Load() {
			}
			return
		}
	}
}

// runShared runs a plan beside the others, or (alone) with none.
func (r *searching) runShared(cfg Config, p *pool, plan Plan, alone bool) (*Counterexample, error) {
	if alone {
		p.gate.Lock()
		defer p.gate.Unlock()
	} else {
		p.gate.RLock()
		defer p.gate.RUnlock()
	}
	return cfg.runRecovering(plan)
}

// count counts a finished job after those before it, and says whether
// the search is over: the job ended it (a violation, or a plan that could
// not run), or was halted.
func (r *searching) count(j *job) (over bool) {
	out := r.out
	j.tally.digest = nil
	if j.tally.plans > 0 {
		out.Batches = append(out.Batches, BatchRun{Number: j.number})
		r.cur = len(out.Batches) - 1
		out.Batches[r.cur].Digest = hex.EncodeToString(j.plans.Sum(nil))
	}
	r.merge(&j.tally)
	r.cur = -1
	if j.runErr != nil && r.ctx.Err() == nil {
		r.runErr = j.runErr
	}
	// (A plan rapid rejected, on a real target, is no plan: the search
	// goes on.)
	return j.runErr != nil || r.last != nil || j.halted || r.halt()
}
