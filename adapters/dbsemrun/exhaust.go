package dbsemrun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/adapters/leaserun"
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
	var faults []string
	asked := s.Faults
	if asked == nil {
		asked = c.Faults // --faults, as the family's setup read it
	}
	if s.MaxFaults > 0 {
		for _, f := range asked {
			if f != histories.RestartBroker {
				faults = append(faults, f)
			}
		}
	}
	ttl := c.TTLMs
	if ttl == 0 {
		ttl = 1000
	}
	limits := leaserun.Limits(s.Clients)
	clientScripts, err := prover.ClientScripts(exhaustOps(ttl), s, len(limits))
	if err != nil {
		return nil, "", err
	}
	mutant := c.Mutant
	if s.Mutant != "" {
		mutant = s.Mutant
	}
	base := Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Max: 1, TTLMs: ttl, Options: c.Options, Mutant: mutant}
	var places []Fault
	for _, f := range faults {
		for i := range s.Clients {
			for k := 1; k <= exhaustCalls; k++ {
				place := Fault{Fault: f, Target: fmt.Sprintf("c%d", i+1), AfterStatements: k}
				if histories.IsClockFault(f) {
					place.OffsetMs = 2 * ttl
				}
				places = append(places, place)
			}
		}
	}
	var out []prover.Plan
	for _, cs := range clientScripts {
		for _, ls := range limits {
			p := base
			p.Clients = cs
			if ls != nil && slices.ContainsFunc(ls, func(l int) bool { return l != ls[0] }) {
				p.Clients = withLimits(cs, ls)
			} else if ls != nil {
				p.Max = ls[0]
			}
			for _, nem := range prover.Subsets(places, s.MaxFaults) {
				q := p
				q.Nemesis = nem
				out = append(out, &q)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b prover.Plan) int { return c.Size(a) - c.Size(b) })
	what := fmt.Sprintf("db-semaphore, ttl %d ms, %s, each with every script of %s steps of acquire, refresh, release, sleep %d ms", ttl, leaserun.Clients(s.Clients), s.Steps(), 2*ttl)
	if s.Clients > 1 {
		what += ", each with a limit of 1 or 2 of its own"
	} else {
		what += ", limit 1"
	}
	if len(faults) == 0 {
		what += "; no faults"
	} else {
		what += fmt.Sprintf("; 0 to %d faults of %s, each right after one of its target's first %d statements (a pause or partition lasting to the end, a clock fault of +%d ms)", s.MaxFaults, strings.Join(faults, ", "), exhaustCalls, 2*ttl)
	}
	if mutant != "" {
		what += "; mutant " + mutant
	}
	what += fmt.Sprintf(" (%d plans), under every schedule of the simulator", len(out))
	return out, what, nil
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

// Size is p's operations and faults (prover.Exhaustive).
func (c Config) Size(p prover.Plan) int {
	q := p.(*Plan)
	return leaserun.Size(q.Clients, q.Nemesis)
}

// Scheduled returns a copy of p that takes its choices from ch, or from
// schedule (prover.Exhaustive).
func (c Config) Scheduled(p prover.Plan, schedule []int, ch prover.Chooser) prover.Plan {
	q := *p.(*Plan)
	q.Decisions = q.Decisions.Choosing(schedule, ch)
	return &q
}

var _ prover.Exhaustive = Config{}
