package consulsemprotocol

import (
	"context"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/served/consulserve"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// Wire serves each run's simulated Consul agent on the wire (package
// consulserve): consulsemrun's Serve, for an implementation in processes.
// A plan that logged its steps (its Wire) is replayed in their order.
func Wire(w *consulsim.World, p *consulsemrun.Plan) (consulsemrun.Wire, error) {
	b, err := consulserve.New(w, consulserve.Options{Script: p.Wire})
	if err != nil {
		return nil, err
	}
	return served{b}, nil
}

type served struct{ b *consulserve.Broker }

func (s served) Name() string { return s.b.Name() }

func (s served) Process(ctx context.Context, p *consulsim.Process) (string, context.Context, error) {
	sp, err := s.b.Process(p)
	if err != nil {
		return "", ctx, err
	}
	return sp.Addr(), process.WithWaiter(ctx, sp), nil
}

func (s served) Flush() { s.b.Flush() }

func (s served) End() (map[string][]string, []string, []string, error) {
	s.b.Close()
	return s.b.Ended("the implementation asked for %s, which the simulated agent does not serve (answered as Consul answers a path it does not know): this run says nothing of the implementation; run it on a real agent (--target consul)")
}
