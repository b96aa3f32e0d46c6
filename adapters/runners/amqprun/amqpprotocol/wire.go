package amqpprotocol

import (
	"context"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// Wire serves each run's simulated broker on the wire (package
// amqpserve), as RabbitMQ version ("" is 3.10.8), its clock at most
// speedup times the processes' (amqpserve.Options.Speedup: 0 is 20, a
// negative value no bound): amqprun.Simulator's Wire, for an
// implementation in processes. A plan that logged its steps
// (Decisions.Wire) is replayed in their order.
//
// A run of an exhaustive search (the plan has a Chooser) settles: a
// process the protocol does not show waiting is waited for up to
// searchSettle, and one silent past it makes the run undecided
// (amqpserve.Options.Settle), so that the order of the steps is the
// schedule's alone.
func Wire(version string, speedup float64) func(w *rabbitmqsim.World, p *amqprun.Plan) amqprun.Wire {
	return func(w *rabbitmqsim.World, p *amqprun.Plan) amqprun.Wire {
		o := amqpserve.Options{Script: p.Wire, Version: version, Speedup: speedup}
		if p.Chooser != nil {
			o.Settle = searchSettle
		}
		return served{amqpserve.New(w, o)}
	}
}

// searchSettle is how long a search's run waits for a process that has
// something to send (amqpserve.Options.Settle): long enough for an
// interpreter starting, or a machine busy beside it.
var searchSettle = 10 * time.Second

type served struct{ s *amqpserve.Broker }

func (s served) Name() string        { return s.s.Name() }
func (s served) Pace(from, to int64) { s.s.Pace(from, to) }

func (s served) Process(name string, b broker.Broker) (broker.Broker, error) {
	return s.s.Process(name, b)
}

func (s served) End() (map[string][]string, []string, []string, error) {
	s.s.Close()
	log, refused, diverged, err := s.s.Ended("the implementation sent %s, which the simulated broker does not serve (it answered 503 COMMAND_INVALID, as RabbitMQ answers a method it has no handler for): this run says nothing of the implementation; run it on a real broker (--target rabbitmq)")
	if u := s.s.Undecided(); err == nil && len(u) > 0 {
		err = &prover.UndecidedError{Why: u[0]}
	}
	return log, refused, diverged, err
}

// ExploreImpls is explore's matrix for implementations (c.Impls, a row
// each) under explore's families of faults (the columns), each cell
// proven on the simulated broker served on the wire. Each counterexample
// is a plan to replay with that row's --impl.
func ExploreImpls(ctx context.Context, c explore.Config) (inconclusive bool, err error) {
	cols, faults := amqprun.ExploreColumns()
	pools := make([]*Processes, len(c.Impls))
	for i, cmd := range c.Impls {
		pools[i] = NewProcesses(cmd)
		defer pools[i].Stop()
		if err := pools[i].PreflightServed(ctx, histories.Semaphore); err != nil {
			return false, fmt.Errorf("--impl %q: %w", cmd, err)
		}
	}
	m := explore.Matrix{Title: "implementation", Rows: c.Impls, Cols: cols, Prove: func(r, col int) prover.Subject {
		return amqprun.Config{Scope: prover.Scope{Faults: faults[col]}, Target: amqprun.Simulator{Wire: Wire("", 0)}, Impl: pools[r]}
	}}
	return m.Run(ctx, c)
}
