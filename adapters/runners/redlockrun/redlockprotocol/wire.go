package redlockprotocol

import (
	"context"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// Wire serves each run's simulated servers on the wire (package
// redisserve): redlockrun.Simulator's Wire, for an implementation in
// processes. A plan that logged its steps (Decisions.Wire) is replayed in
// their order.
func Wire(w *redissim.World, p *redlockrun.Plan) redlockrun.Wire {
	return served{redisserve.New(w, redisserve.Options{Script: p.Wire})}
}

// PacedWire is Wire with the served World's clock at most speedup times
// faster than the processes' where it jumps (redisserve.Options.Speedup):
// for an implementation that compares its own clock with the plan's
// schedule (npm redis-semaphore's Semaphore scores its holders by the
// client's Date.now()). 0 is Wire: no bound.
func PacedWire(speedup float64) func(w *redissim.World, p *redlockrun.Plan) redlockrun.Wire {
	return func(w *redissim.World, p *redlockrun.Plan) redlockrun.Wire {
		return served{redisserve.New(w, redisserve.Options{Script: p.Wire, Speedup: speedup})}
	}
}

type served struct{ s *redisserve.Broker }

func (s served) Name() string { return s.s.Name() }

func (s served) Process(ctx context.Context, p *redissim.Process) ([]string, context.Context, error) {
	sp, err := s.s.Process(p)
	if err != nil {
		return nil, ctx, err
	}
	return sp.Addrs(), process.WithWaiter(ctx, sp), nil
}

func (s served) End() (map[string][]string, []string, []string, error) {
	s.s.Close()
	return s.s.Ended("the implementation sent %s, which the simulated servers do not serve (answered as Redis answers a command it does not know): this run says nothing of the implementation; run it on real redis-servers (--target redis)")
}
