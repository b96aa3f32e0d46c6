package pgadvisoryrun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
)

// exhaustOps is a client's step alphabet in an exhaustive search of
// leases of ttl ms: its operations, and two sleeps: 2 ttls (past a
// lease's life, and its idle session's), so that the server can end a
// holder's session under it; and 3/4 of a ttl, past half a lease and
// within it, where the reference replaces an idle session before it
// acquires and a session whose idle timeout is short of the lease (the
// short-idle mutant) has ended while the lease runs. Other lengths of
// sleep are no finite choice.
func exhaustOps(ttl int) []lease.Step {
	return []lease.Step{{Op: histories.Acquire}, {Op: histories.Refresh}, {Op: histories.Release},
		{Op: lease.Sleep, Ms: 2 * ttl}, {Op: lease.Sleep, Ms: ttl * 3 / 4}}
}

// exhaustTTL is the leases' ttl in an exhaustive search unless --ttl
// fixes it.
const exhaustTTL = 100

// Skeletons returns every plan of s (prover.Exhaustive), fewest steps and
// faults first: a lock of c's ttl (100 ms if unset), s.Clients clients
// each with every script of 1 to s.Ops steps (or its own of s.EachOps)
// (acquire, refresh, release, a sleep of two ttls or of 3/4 of one:
// exhaustOps); then 0 to
// s.MaxFaults faults of those asked (--faults; by default kill, pause and
// partition), each at every whole millisecond in which a client has an
// operation in flight in the plan's run without faults, under the first
// choice at every point (leaserun.Exhaustible.InFlight), at every client (a restart at the
// server). The schedule then decides whether it strikes before or after
// each step taken at that instant. A pause or a partition lasts until the
// clients are done or two ttls (past the idle session's life); a restart
// keeps the server down 200 ms.
func (c Config) Skeletons(s prover.ExhaustScope) ([]prover.Plan, string, error) {
	c = c.withDefaults()
	if err := leaserun.NoAdmins(Kind, s); err != nil {
		return nil, "", err
	}
	if c.Server != nil || c.Impl != nil {
		return nil, "", fmt.Errorf("--exhaustive: --kind %s runs its exhaustive search on the simulator only", Kind)
	}
	asked := s.Faults
	if asked == nil {
		asked = c.Faults // --faults, as the family's setup read it
	}
	var faults []string
	if s.MaxFaults > 0 {
		faults = asked
	}
	ttl := c.TTLMs
	if ttl == 0 {
		ttl = exhaustTTL
	}
	clientScripts, err := prover.ClientScripts(exhaustOps(ttl), s, 1)
	if err != nil {
		return nil, "", err
	}
	mutant := c.Mutant
	if s.Mutant != "" {
		mutant = s.Mutant
	}
	base := Plan{Version: PlanVersion, Kind: Kind, Key: "lp", TTLMs: ttl, Mutant: mutant}
	var out []prover.Plan
	for _, cs := range clientScripts {
		p := base
		p.Clients = cs
		plans, err := exhaustible.WithFaults(p, faults, s.MaxFaults, faultPlaces)
		if err != nil {
			return nil, "", err
		}
		out = append(out, plans...)
	}
	slices.SortStableFunc(out, func(a, b prover.Plan) int { return c.Size(a) - c.Size(b) })
	what := fmt.Sprintf("%s on the simulated PostgreSQL, ttl %d ms, %s, each with every script of %s steps of acquire, refresh, release, sleep %d ms, sleep %d ms", Kind, ttl, leaserun.Clients(s.Clients), s.Steps(), 2*ttl, ttl*3/4)
	if len(faults) == 0 {
		what += "; no faults"
	} else {
		what += fmt.Sprintf("; 0 to %d faults of %s, each at every millisecond in which a client's operation is in flight in the run without faults, at every client", s.MaxFaults, strings.Join(faults, ", "))
		var lasting []string
		if slices.ContainsFunc(faults, func(f string) bool { return histories.EndOf(f) != "" }) {
			lasting = append(lasting, fmt.Sprintf("a pause or partition lasting until the clients are done or %d ms", 2*ttl))
		}
		if slices.Contains(faults, histories.RestartBroker) {
			lasting = append(lasting, fmt.Sprintf("a restart down %d ms", restartDowntime.Milliseconds()))
		}
		if len(lasting) > 0 {
			what += " (" + strings.Join(lasting, ", ") + ")"
		}
	}
	if mutant != "" {
		what += "; mutant " + mutant
	}
	what += fmt.Sprintf(" (%d plans), under every schedule of the simulator", len(out))
	return out, what, nil
}

// faultPlaces are the faults of p's scope: each of faults at every
// millisecond of times, at every client (a restart at the server), a
// pause or a partition lasting to the end or two ttls.
func faultPlaces(p *Plan, faults []string, times []int) []Fault {
	return leaserun.Places(faults, len(p.Clients), times, 2*p.TTLMs, func(at int, f, target string, length int) Fault {
		return Fault{At: at, Fault: f, Target: target, For: length}
	})
}

// exhaustible is what the exhaustive search needs of a plan.
var exhaustible = leaserun.Exhaustible[Plan, lease.Step, Fault]{
	Faulted:  func(p *Plan) *leaserun.Faulted[Fault] { return &p.Faulted },
	Clients:  func(p *Plan) [][]lease.Step { return p.Clients },
	Simulate: func(p *Plan) (*prover.Result, error) { return Simulate(p, nil) },
}

// Size is p's operations and faults (prover.Exhaustive).
func (c Config) Size(p prover.Plan) int { return exhaustible.Size(p) }

// Scheduled returns a copy of p that takes its choices from ch, or from
// schedule (prover.Exhaustive).
func (c Config) Scheduled(p prover.Plan, schedule []int, ch prover.Chooser) prover.Plan {
	return exhaustible.Scheduled(p, schedule, ch)
}

var _ prover.Exhaustive = Config{}
