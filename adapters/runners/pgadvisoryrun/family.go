// Package pgadvisoryrun is the PostgreSQL advisory-lock family: a mutex held
// by a PostgreSQL session (pg_try_advisory_lock, pg_advisory_unlock), as
// migration tools and job runners take one, used as a lease. It says what
// a plan of the family is, how plans are drawn, and how they run, on one
// runner over two places: the reference (Lock, its statements behind
// Server and Conn) or one of its mutants on the simulated PostgreSQL
// (sim/postgressim), deterministic; or the reference, a mutant or an
// implementation's processes, each client behind a fault proxy of its own
// (adapters/servers/postgres), on a private PostgreSQL server the run starts; and
// an exhaustive search of small scopes on the simulator. Histories are of lock kind histories.Lease, judged by
// model/lease with kills ending leases (lease.Options.KillEnds): a
// session's lock is freed when its connection closes. Config is the family
// as package prover's core proves it. docs/pg-advisory.md says why and
// how.
package pgadvisoryrun

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// Config says what to prove and how hard to look: it is a prover.Subject.
type Config struct {
	// Scope is the mutant, and how many clients, operations and faults
	// plans may have, and which faults (by default kill, pause and
	// partition: see promised).
	prover.Scope
	// TTLMs fixes the ttl the holders count on (and their sessions'
	// idle_session_timeout); 0 draws it (200 or 500 ms).
	TTLMs int
	// Drift is the drift bound plans are judged with (lease.Options.Drift);
	// 0 means model.DefaultDrift.
	Drift float64
	// Server is the private server plans run on (the descriptor starts
	// one for the run); nil runs them on the simulator (sim/postgressim).
	Server *postgres.Server
	// Impl is the implementation to prove, in processes of its own; nil
	// means the reference (or Mutant), in this process.
	Impl Impl
}

func (c Config) withDefaults() Config {
	c.Scope = c.Scope.Defaults(promised)
	return c
}

// Draw draws a plan of c with rapid.
func (c Config) Draw(t *rapid.T) prover.Plan { return draw(t, c.withDefaults()) }

// errNoServer is Run's and Preflight's error for an implementation
// without a server.
var errNoServer = errors.New("pgadvisory: an implementation in processes needs a real PostgreSQL (--target postgres)")

// Run runs a plan of this family on c's server, or on the simulator.
func (c Config) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	pl, ok := p.(*Plan)
	if !ok {
		return nil, fmt.Errorf("pgadvisory: a plan of another family (%T)", p)
	}
	target := "postgres" // both targets strike every fault of faultNames
	if c.Server == nil {
		target = "sim"
	}
	if err := run.Refuse(target, faultNames, "nemesis", len(pl.Nemesis), func(i int) string { return pl.Nemesis[i].Fault }); err != nil {
		return nil, err
	}
	if c.Impl != nil && pl.Mutant != "" {
		return nil, fmt.Errorf("the plan names mutant %s, a variant of the reference: it cannot run against %s", pl.Mutant, c.Impl)
	}
	if c.Server == nil {
		if c.Impl != nil {
			return nil, errNoServer
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return Simulate(pl, nil)
	}
	return runPlan(ctx, pl, c.Server, c.Impl)
}

// Preflight checks, before the first plan, that the server answers.
func (c Config) Preflight(ctx context.Context) error {
	if c.Server == nil {
		if c.Impl != nil {
			return errNoServer
		}
		return nil
	}
	_, err := c.Server.Sessions(ctx)
	return err
}

// Judging says how the family's histories are judged: kills end leases (a
// session's advisory lock is freed when its connection closes), and only
// the server's clock counts (no client's clock is read).
func (c Config) Judging(string) any {
	return lease.Options{KillEnds: true, Clocks: lease.ClocksBackend, Drift: c.Drift}
}

// Alone says whether a plan must run with no other beside it: one that
// restarts the server (prover.Alone).
func (c Config) Alone(p prover.Plan) bool {
	pl, ok := p.(*Plan)
	return ok && slices.ContainsFunc(pl.Nemesis, func(f Fault) bool { return f.Fault == histories.RestartBroker })
}

// Deterministic says whether c runs on the simulator.
func (c Config) Deterministic() bool { return c.Server == nil }

// String says what c proves.
func (c Config) String() string {
	what := "the reference"
	switch {
	case c.Impl != nil:
		what = c.Impl.String()
	case c.Mutant != "":
		what = "mutant " + c.Mutant
	}
	if c.Server == nil {
		return what
	}
	return what + " on a private PostgreSQL"
}
