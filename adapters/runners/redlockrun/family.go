// Package redlockrun is the Redlock family: a lease lock (a mutex) kept on N
// independent Redis servers, granted by a majority, each key expiring on
// its server's clock; an implementation's plans may make it a counting
// semaphore instead (Plan.Limit, prove --limit). It says what a plan of the family is (the servers
// and their persistence, clients that acquire, refresh and release, the
// faults of the Redlock debate: pauses, partitions, lost replies,
// restarts, clock jumps), how plans are drawn, and how they run: the
// reference (package redlock at the repository's root) or one of its
// mutants, on the simulated servers (package sim/redissim). Histories are
// of lock kind histories.Lease, judged by model/lease. Config is the
// family as package prover's core proves it.
//
// A restart of a server that keeps nothing loses the keys it held, and
// the fence counters: a configuration Redlock's author calls unsafe
// unless the restart is delayed beyond the longest ttl. Plans draw
// restarts only of servers that persist every write (persistence
// "always"); a plan that restarts a server that keeps nothing is judged as
// it comes, and its double holds are findings about the configuration.
package redlockrun

import (
	"context"
	"fmt"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// Config says what to prove and how hard to look: it is a prover.Subject.
// The zero value proves the reference on the simulator with every fault.
type Config struct {
	// Scope is the mutant, and how many clients, operations and faults
	// plans may have, and which faults.
	prover.Scope
	// Servers fixes N; 0 draws it from 1, 2 and 3 (from the mutant's own
	// choice where it has one).
	Servers int
	// Persistence fixes what the servers keep ("none" or "always"); ""
	// draws it.
	Persistence string
	// TTLMs fixes the leases' ttl; 0 draws it (100, 300 or 1000 ms).
	TTLMs int
	// AnyRestart lets plans restart servers that keep nothing too (a
	// configuration Redlock's author calls unsafe: explore shows it);
	// MinDownMs is the least time a restarted server stays down (a
	// restart delayed past the ttl, his answer).
	AnyRestart bool
	MinDownMs  int
	// Drift is the drift bound plans are judged with (lease.Options.Drift);
	// 0 means model.DefaultDrift.
	Drift float64
	// Target runs the plans: nil (or Simulator{}) the simulated servers,
	// Redis{} real redis-servers.
	Target Target
	// Priority proves the priority Redlock (PriorityKind) instead:
	// plans give each client a priority, and may give each a ttl.
	Priority bool
	// Limit, above 1, proves an implementation's counting semaphore of
	// Limit leases (Plan.Limit); the reference is a mutex.
	Limit int
}

func (c Config) withDefaults() Config {
	faults := faultNames
	if m := MutantNamed(c.Mutant); m != nil && m.faults != nil {
		faults = m.faults
	}
	c.Scope = c.Scope.Defaults(faults)
	if c.Target == nil {
		c.Target = Simulator{}
	}
	return c
}

// real says whether c runs on real servers.
func (c Config) real() bool {
	_, sim := c.withDefaults().Target.(Simulator)
	return !sim
}

// Draw draws a plan of c with rapid.
func (c Config) Draw(t *rapid.T) prover.Plan { return draw(t, c.withDefaults()) }

// Run runs a plan of this family on the simulated servers.
func (c Config) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	pl, ok := p.(*Plan)
	if !ok {
		return nil, fmt.Errorf("redlock: a plan of another family (%T)", p)
	}
	c = c.withDefaults()
	if err := run.Refuse(targetName(c.Target), faultNames, "nemesis", len(pl.Nemesis), func(i int) string { return pl.Nemesis[i].Fault }); err != nil {
		return nil, err
	}
	return c.Target.Run(ctx, pl)
}

// targetName is how a refusal names t (--target). Both targets strike
// every fault of faultNames; real Redis jumps a clock forward only.
func targetName(t Target) string {
	if _, ok := t.(Redis); ok {
		return "redis"
	}
	return "sim"
}

// Preflight checks, before the first plan, that c's target can run plans.
func (c Config) Preflight(ctx context.Context) error {
	if pf, ok := c.withDefaults().Target.(prover.Preflighter); ok {
		return pf.Preflight(ctx)
	}
	return nil
}

// Judging says that any clock may time the leases (the servers' expire
// keys, the clients' measure validity), within the drift bound, and that
// every grant says its validity (validity-sound). It has no strict model.
func (c Config) Judging(string) any {
	return lease.Options{Drift: c.Drift, Validity: true, Priority: c.Priority}
}

// Deterministic says whether c runs on the simulator.
func (c Config) Deterministic() bool { return !c.real() }

// String says what c proves.
func (c Config) String() string {
	what := "the reference"
	if c.Priority {
		what = "the priority reference"
	}
	if c.Mutant != "" {
		what = "mutant " + c.Mutant
	}
	switch t := c.Target.(type) {
	case Redis:
		if t.Impl != nil {
			what = t.Impl.String()
		}
		what += " on " + t.String()
	case Simulator:
		if t.Impl != nil {
			what = t.Impl.String() + " on the simulated servers, served on the wire"
		}
	}
	return what
}
