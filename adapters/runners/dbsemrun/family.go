// Package dbsemrun is the database counting semaphore family (after
// zimingd/database-semaphore): at most max holders of a key, each holding a
// lease that expires unless refreshed, kept in SQL tables. It says what a
// plan of the family is (the semaphore, clients that acquire, refresh and
// release, faults including clock faults, the simulator's schedule), how
// plans are drawn, and how they run: the reference (package dbsem) or one of
// its mutants, on the simulated database (package sim/mariadbsim). Histories
// are of lock kind histories.Lease, judged by model/lease. Config is the
// family as package prover's core proves it.
package dbsemrun

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/lease"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"pgregory.net/rapid"
)

// Config says what to prove and how hard to look: it is a prover.Subject.
// The zero value proves the reference (master-row design, UUID tokens) on
// the simulator with every fault.
type Config struct {
	// Scope is the mutant, and how many clients, operations and faults
	// plans may have, and which faults.
	prover.Scope
	Options Options // the reference's options
	// TTLMs fixes the leases' ttl; 0 draws it (100, 300 or 1000 ms).
	TTLMs int
	// Drift is the drift bound plans are judged with (lease.Options.Drift);
	// 0 means model.DefaultDrift.
	Drift float64
	// Target runs the plans: nil (or Simulator{}) the simulated database,
	// MariaDB{...} a real server.
	Target Target
	// Impl is the implementation to prove, in processes of its own; nil
	// means the reference (or Mutant), in this process. It needs a real
	// database.
	Impl Impl
}

// A Target runs plans, against impl (nil: the reference or p's mutant, in
// this process): Simulator or MariaDB.
type Target interface {
	Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error)
}

// Simulator runs plans on the simulated database (package sim/mariadbsim):
// deterministic, in virtual time.
type Simulator struct{}

// Run runs p on a fresh simulated database (see Simulate).
func (Simulator) Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error) {
	if impl != nil {
		return nil, errors.New("an implementation in processes needs a real database (--target mariadb)")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Simulate(p, nil)
}

func (c Config) withDefaults() Config {
	faults := faultNames
	if t, ok := c.Target.(MariaDB); ok && t.Server == nil {
		// The shared server is never restarted.
		faults = slices.DeleteFunc(slices.Clone(faultNames), func(f string) bool { return f == histories.RestartBroker })
	}
	c.Scope = c.Scope.Defaults(faults)
	if c.Target == nil {
		c.Target = Simulator{}
	}
	if m := MutantNamed(c.Mutant); m != nil && m.options != nil {
		m.options(&c.Options)
	}
	return c
}

// Draw draws a plan of c with rapid.
func (c Config) Draw(t *rapid.T) prover.Plan { return draw(t, c.withDefaults()) }

// Run runs a plan of this family on c's target.
func (c Config) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	pl, ok := p.(*Plan)
	if !ok {
		return nil, fmt.Errorf("dbsemaphore: a plan of another family (%T)", p)
	}
	if c.Impl != nil && pl.Mutant != "" {
		return nil, fmt.Errorf("the plan names mutant %s, a variant of the reference: it cannot run against %s", pl.Mutant, c.Impl)
	}
	c = c.withDefaults()
	if err := run.Refuse(targetName(c.Target), faultNames, "nemesis", len(pl.Nemesis), func(i int) string { return pl.Nemesis[i].Fault }); err != nil {
		return nil, err
	}
	return c.Target.Run(ctx, pl, c.Impl)
}

// targetName is how a refusal names t (--target). Both targets strike
// every fault of faultNames; a real server restarts only when it is the
// run's own (MariaDB.Server).
func targetName(t Target) string {
	if _, ok := t.(MariaDB); ok {
		return "mariadb"
	}
	return "sim"
}

// Preflight checks, before the first plan, that c's target can run plans.
// With an Impl, one of its processes is started and ended once too.
func (c Config) Preflight(ctx context.Context) error {
	c = c.withDefaults()
	if pf, ok := c.Target.(prover.Preflighter); ok {
		if err := pf.Preflight(ctx); err != nil {
			return err
		}
	}
	if t, ok := c.Target.(MariaDB); ok && c.Impl != nil {
		return t.preflightImpl(ctx, c.Impl, c.Options)
	}
	return nil
}

// Judging says that only the database's clock times the semaphore's
// leases: a client's clock fault excuses nothing (the reference never reads
// a client's clock). It has no strict model.
func (c Config) Judging(string) any {
	return lease.Options{Clocks: lease.ClocksBackend, Drift: c.Drift}
}

// Alone says whether a plan must run with no other beside it on a real
// target: it restarts the server every plan uses (prover.Alone).
func (c Config) Alone(p prover.Plan) bool {
	pl, ok := p.(*Plan)
	return ok && slices.ContainsFunc(pl.Nemesis, func(f Fault) bool { return f.Fault == histories.RestartBroker })
}

// Deterministic says whether c runs on the simulator.
func (c Config) Deterministic() bool {
	_, ok := c.withDefaults().Target.(Simulator)
	return ok
}

// String says what c proves.
func (c Config) String() string {
	what := "the reference"
	switch {
	case c.Impl != nil:
		what = c.Impl.String()
	case c.Mutant != "":
		what = "mutant " + c.Mutant
	}
	if t, ok := c.Target.(MariaDB); ok {
		what += " on " + t.String()
	}
	return what
}
