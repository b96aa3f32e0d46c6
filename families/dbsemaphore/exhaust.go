package dbsemaphore

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/families/lease/leaseplan"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/prover"
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
// unset), s.Clients clients each with every script of 1 to s.Ops steps
// (acquire, refresh, release, a sleep of two ttls: exhaustOps), and 0 to
// s.MaxFaults faults of
// those that strike a client, each right after one of its first six
// statements (a pause or partition lasting to the end of the run). Clock
// faults and restarts, which need a time or an offset, are left out.
func (c Config) Skeletons(s prover.ExhaustScope) ([]prover.Plan, string, error) {
	c = c.withDefaults()
	switch {
	case s.Clients < 1:
		return nil, "", fmt.Errorf("--clients: an exhaustive search needs at least one client, got %d", s.Clients)
	case s.Ops < 1:
		return nil, "", fmt.Errorf("--ops: an exhaustive search needs at least one operation per client, got %d", s.Ops)
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
			if !histories.IsClockFault(f) && f != histories.RestartBroker {
				faults = append(faults, f)
			}
		}
	}
	ttl := c.TTLMs
	if ttl == 0 {
		ttl = 1000
	}
	var scripts [][]Step
	level := [][]Step{nil}
	for n := 1; n <= s.Ops; n++ {
		var next [][]Step
		for _, sc := range level {
			for _, a := range exhaustOps(ttl) {
				next = append(next, append(slices.Clone(sc), a))
			}
		}
		scripts, level = append(scripts, next...), next
	}
	if n := math.Pow(float64(len(scripts)), float64(s.Clients)); n > 100000 {
		return nil, "", fmt.Errorf("--clients %d, --ops %d: %.3g plans before any fault, more than an exhaustive search can run (at most 100000): narrow the scope", s.Clients, s.Ops, n)
	}
	mutant := c.Mutant
	if s.Mutant != "" {
		mutant = s.Mutant
	}
	base := Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Max: 1, TTLMs: ttl, Options: c.Options, Mutant: mutant}
	clients := [][][]Step{nil}
	for range s.Clients {
		var next [][][]Step
		for _, prefix := range clients {
			for _, sc := range scripts {
				next = append(next, append(slices.Clone(prefix), sc))
			}
		}
		clients = next
	}
	var places []Fault
	for _, f := range faults {
		for i := range s.Clients {
			for k := 1; k <= exhaustCalls; k++ {
				places = append(places, Fault{Fault: f, Target: fmt.Sprintf("c%d", i+1), AfterStatements: k})
			}
		}
	}
	var out []prover.Plan
	for _, cs := range clients {
		for _, nem := range prover.Subsets(places, s.MaxFaults) {
			p := base
			p.Clients, p.Nemesis = cs, nem
			out = append(out, &p)
		}
	}
	slices.SortStableFunc(out, func(a, b prover.Plan) int { return c.Size(a) - c.Size(b) })
	what := fmt.Sprintf("db-semaphore of 1 slot, ttl %d ms, %s, each with every script of 1 to %d steps of acquire, refresh, release, sleep %d ms", ttl, leaseplan.Clients(s.Clients), s.Ops, 2*ttl)
	if len(faults) == 0 {
		what += "; no faults"
	} else {
		what += fmt.Sprintf("; 0 to %d faults of %s, each right after one of its target's first %d statements (a pause or partition lasting to the end)", s.MaxFaults, strings.Join(faults, ", "), exhaustCalls)
	}
	if mutant != "" {
		what += "; mutant " + mutant
	}
	what += fmt.Sprintf(" (%d plans), under every schedule of the simulator", len(out))
	return out, what, nil
}

// Size is p's operations and faults (prover.Exhaustive).
func (c Config) Size(p prover.Plan) int {
	q := p.(*Plan)
	return leaseplan.Size(q.Clients, q.Nemesis)
}

// Scheduled returns a copy of p that takes its choices from ch, or from
// schedule (prover.Exhaustive).
func (c Config) Scheduled(p prover.Plan, schedule []int, ch prover.Chooser) prover.Plan {
	q := *p.(*Plan)
	q.Decisions = q.Decisions.Choosing(schedule, ch)
	return &q
}

var _ prover.Exhaustive = Config{}
