// Package amqprun is the amqp-locks family: the persistent semaphore, the true
// mutex and the persistent mutex built from RabbitMQ queues. It says what a
// plan of the family is (admins and clients, faults, the simulator's
// schedule), how plans are drawn, and how they run: on the simulated broker
// (package sim), on a real broker (RabbitMQ), against the reference
// (package amqplocks), one of its mutants, or any implementation given as
// an Impl. Config is the family as package prover's core proves it.
package amqprun

import (
	"context"
	"fmt"
	"slices"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"pgregory.net/rapid"
)

// A Target runs plans: the simulator, or a real broker.
type Target interface {
	Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error)
}

// Config says what to prove and how hard to look: it is a prover.Subject.
// The zero value proves the reference on the simulator with every fault.
type Config struct {
	Target Target // nil: the simulator
	Impl   Impl   // nil: the reference (or Scope.Mutant of it)
	// Scope is the mutant, and how many clients, steps and faults plans
	// may have, and which faults.
	prover.Scope

	Kind    string  // histories.Semaphore (default) or histories.Mutex
	Admins  int     // at most this many admins; 0 means 2
	Options Options // the reference's options
}

func (c Config) withDefaults() Config {
	if c.Kind == "" {
		c.Kind = histories.Semaphore
	}
	c.Scope = c.Scope.Defaults(faultNames)
	if c.Admins == 0 {
		c.Admins = 2
	}
	if c.Target == nil {
		c.Target = Simulator{}
	}
	if c.Impl == nil {
		c.Impl = Reference
	}
	return c
}

// Draw draws a plan of c with rapid.
func (c Config) Draw(t *rapid.T) prover.Plan { return Draw(t, c) }

// Run runs a plan of this family on c's target, against c's
// implementation (the reference, or the plan's mutant of it).
func (c Config) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	pl, ok := p.(*Plan)
	if !ok {
		return nil, fmt.Errorf("amqp: a plan of another family (%T)", p)
	}
	c = c.withDefaults()
	if err := run.Refuse(targetName(c.Target, pl), faultNames, "nemesis", len(pl.Nemesis), func(i int) string { return pl.Nemesis[i].Fault }); err != nil {
		return nil, err
	}
	return c.Target.Run(ctx, pl, implFor(pl, c.Impl))
}

// Alone says whether a plan must run with no other beside it on a real
// target (prover.Alone): it restarts the server every plan uses, or runs
// on a cluster, whose nodes and links its faults strike for every plan.
func (c Config) Alone(p prover.Plan) bool {
	pl, ok := p.(*Plan)
	return ok && (len(pl.Cluster) > 0 || slices.ContainsFunc(pl.Nemesis, func(f Fault) bool { return f.Fault == histories.RestartBroker }))
}

// Strict is amqp-locks' strict judging model (--model strict): it judges
// acquire-exact at every acquire, with the whole semaphore's model.
const Strict = "strict"

// Judging gives the amqp-locks checker's options for the model a plan is
// judged by: Strict, or "" for the standard one.
func (c Config) Judging(model string) any { return amqpcheck.Options{Strict: model == Strict} }

// Deterministic says whether c runs on the simulator.
func (c Config) Deterministic() bool {
	_, ok := c.withDefaults().Target.(Simulator)
	return ok
}

// InTest says whether c's implementation runs in the test's process (a
// lock written in Go: amqpgo), whose counterexamples only its test can
// replay.
func (c Config) InTest() bool {
	it, ok := c.Impl.(interface{ InTest() bool })
	return ok && it.InTest()
}

// String says what c proves: an implementation that describes itself
// (fmt.Stringer), a mutant of the reference, or the reference.
func (c Config) String() string {
	if s, ok := c.Impl.(fmt.Stringer); ok {
		return s.String()
	}
	if c.Mutant != "" {
		return "mutant " + c.Mutant
	}
	return "the reference"
}

// Preflight checks, before the first plan, that c's target can run plans
// (a reachable broker); a target that cannot tell passes.
func (c Config) Preflight(ctx context.Context) error {
	if pf, ok := c.withDefaults().Target.(prover.Preflighter); ok {
		return pf.Preflight(ctx)
	}
	return nil
}

// Brief says the plan in one line.
func (p *Plan) Brief() string {
	return fmt.Sprintf("%s %q, %d slots, %d clients, %d admins, %d faults, %d scheduling decisions",
		p.Kind, p.Lock, p.Slots, len(p.Clients), len(p.Admins), len(p.Nemesis), len(p.Schedule))
}
