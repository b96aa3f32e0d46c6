package dbsemrun

import (
	"fmt"
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// exhaustOps is a client's step alphabet in an exhaustive search of
// leases of ttl ms: its operations, and one sleep, of 2 ttls (past a
// lease's life), so that a lease can expire under a holder that goes on
// after it; other lengths of sleep are no finite choice.
func exhaustOps(ttl int) []Step {
	return []Step{{Op: histories.Acquire}, {Op: histories.Refresh}, {Op: histories.Release}, {Op: Sleep, Ms: 2 * ttl}}
}

// exhaustCalls is how many of its target's first statements a fault of
// an exhaustive search may follow.
const exhaustCalls = 6

// Skeletons returns every plan of s (prover.Exhaustive), fewest steps
// and faults first: a semaphore of one slot with c's ttl (1000 ms if
// unset), s.Clients clients each with every script of 1 to s.Ops steps (or its own of s.EachOps)
// (acquire, refresh, release, a sleep of two ttls: exhaustOps), and 0 to
// s.MaxFaults faults of
// those that strike a client, each right after one of its first six
// statements (a pause or partition lasting to the end of the run; a
// clock fault moving the client's clock two ttls ahead, past any lease's
// life, to the end). With two clients or more, every choice of each
// client's own limit, 1 or 2 (all equal: the plan's max). Restarts and
// the server's clock, which need a time, are left out.
func (c Config) Skeletons(s prover.ExhaustScope) ([]prover.Plan, string, error) {
	c = c.withDefaults()
	if err := s.NoSleepOrHeal(Kind); err != nil {
		return nil, "", err
	}
	switch {
	case s.Clients < 1:
		return nil, "", fmt.Errorf("--clients: an exhaustive search needs at least one client, got %d", s.Clients)
	case s.AdminOps > 0:
		return nil, "", fmt.Errorf("--admin-ops: a db-semaphore has no admins (give --admin-ops 0)")
	}
	faults := s.PlanFaults(c.Faults, func(f string) bool { return f != histories.RestartBroker })
	ttl := c.TTLMs
	if ttl == 0 {
		ttl = 1000
	}
	limits := leaserun.Limits(s.Clients)
	clientScripts, err := prover.ClientScripts(exhaustOps(ttl), s, len(limits))
	if err != nil {
		return nil, "", err
	}
	base := Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Max: 1, TTLMs: ttl, Options: c.Options, Mutant: s.PlanMutant(c.Mutant)}
	places := faultPlaces(s.Clients, faults, ttl)
	out, err := prover.EveryPlan(clientScripts, limits, func(cs [][]Step, ls []int) ([]prover.Plan, error) {
		p := base
		p.setClients(cs, ls)
		return prover.WithFaults(places, s.MaxFaults, exhaustible.WithNemesis(p)), nil
	}, c.Size)
	if err != nil {
		return nil, "", err
	}
	what := fmt.Sprintf("db-semaphore, ttl %d ms, %s, each with every script of %s steps of acquire, refresh, release, sleep %d ms", ttl, leaserun.Clients(s.Clients), s.Steps(), 2*ttl)
	if s.Clients > 1 {
		what += ", each with a limit of 1 or 2 of its own"
	} else {
		what += ", limit 1"
	}
	where := fmt.Sprintf("right after one of its target's first %d statements (a pause or partition lasting to the end, a clock fault of +%d ms)", exhaustCalls, 2*ttl)
	return out, what + s.EndWords(faults, where, base.Mutant, len(out)), nil
}

// faultPlaces are the faults of a scope of clients clients and leases of
// ttl ms: each of faults at each client, right after each of its first
// exhaustCalls statements; a clock fault moving its clock two ttls ahead.
func faultPlaces(clients int, faults []string, ttl int) []Fault {
	var out []Fault
	for _, f := range faults {
		for i := range clients {
			for k := 1; k <= exhaustCalls; k++ {
				place := Fault{Fault: f, Target: fmt.Sprintf("c%d", i+1), AfterStatements: k}
				if histories.IsClockFault(f) {
					place.OffsetMs = 2 * ttl
				}
				out = append(out, place)
			}
		}
	}
	return out
}

// setClients gives p the clients' scripts cs, of limits ls, one each
// (leaserun.Limits): the plan's max where they agree, passed on each
// client's acquires where they do not; nil leaves the plan's.
func (p *Plan) setClients(cs [][]Step, ls []int) {
	p.Clients = cs
	switch {
	case ls == nil:
	case slices.ContainsFunc(ls, func(l int) bool { return l != ls[0] }):
		p.Clients = withLimits(cs, ls)
	default:
		p.Max = ls[0]
	}
}

// withLimits is scripts with each client's acquires passing its own
// limit, limits[i] for client i.
func withLimits(scripts [][]Step, limits []int) [][]Step {
	out := make([][]Step, len(scripts))
	for i, sc := range scripts {
		out[i] = slices.Clone(sc)
		for j := range out[i] {
			if out[i][j].Op == histories.Acquire {
				out[i][j].Max = limits[i]
			}
		}
	}
	return out
}

// exhaustible is what the exhaustive search needs of a plan.
var exhaustible = leaserun.Exhaustible[Plan, Step, Fault]{
	Faulted:  func(p *Plan) *leaserun.Faulted[Fault] { return &p.Faulted },
	Clients:  func(p *Plan) [][]Step { return p.Clients },
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
