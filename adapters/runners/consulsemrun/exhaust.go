package consulsemrun

import (
	"fmt"
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// exhaustOps is a client's step alphabet in an exhaustive search of
// leases of ttl ms: its operations, and one sleep, of 3 ttls (past any
// session's life: Consul ends one two ttls after its last renewal at
// most, etcd one and a half), so that a lease can expire under a holder
// that goes on after it; other lengths of sleep are no finite choice.
func exhaustOps(ttl int) []Step {
	return []Step{{Op: histories.Acquire}, {Op: histories.Refresh}, {Op: histories.Verify}, {Op: histories.Release}, {Op: Sleep, Ms: 3 * ttl}}
}

// Skeletons returns every plan of s (prover.Exhaustive), fewest steps and
// faults first: a semaphore of limit 1 on c's backend (the simulated
// Consul -dev agent, a persistent one, or etcd: --backend, --persistent)
// with c's ttl (1000 ms if unset) and variants (--options), s.Clients
// clients each with every script of 1 to s.Ops steps (or its own of s.EachOps) (acquire, refresh,
// verify, release, a sleep of three ttls: exhaustOps), and, with two
// clients or more, every choice of each client's own limit, 1 or 2 (all
// equal: the plan's limit); then 0 to s.MaxFaults faults, each at every
// whole millisecond in which a client has an operation in flight in the
// plan's run without faults, under the first choice at every point
// (leaserun.Exhaustible.InFlight). Every call of the simulator takes 1 ms, so these are all
// the places a fault can fall between two calls of that run, and the
// schedule then decides whether it strikes before or after the calls of
// its millisecond. A pause or a partition lasts either until the clients
// are done or three ttls (past any session's life), a restart of the
// server comes back at once; restarts of a -dev agent, which forgets
// every session, are offered only as plans draw them (Config.AnyRestart).
func (c Config) Skeletons(s prover.ExhaustScope) ([]prover.Plan, string, error) {
	c = c.withDefaults()
	if err := s.NoSleepOrHeal(Kind); err != nil {
		return nil, "", err
	}
	if err := leaserun.NoAdmins(Kind, s); err != nil {
		return nil, "", err
	}
	faults := s.PlanFaults(c.Faults, func(f string) bool { return f != histories.RestartBroker || c.AnyRestart || c.keeps() })
	ttl := c.TTLMs
	if ttl == 0 {
		ttl = 1000
	}
	limits := leaserun.Limits(s.Clients)
	clientScripts, err := prover.ClientScripts(exhaustOps(ttl), s, len(limits))
	if err != nil {
		return nil, "", err
	}
	base := Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: c.Backend, Persistent: c.Persistent && c.Backend == Consul,
		Limit: 1, TTLMs: ttl, Mutant: s.PlanMutant(c.Mutant), StaleReads: c.StaleReads, BehaviorRelease: c.BehaviorRelease, LockDelay: c.LockDelay}
	out, err := prover.EveryPlan(clientScripts, limits, func(cs [][]Step, ls []int) ([]prover.Plan, error) {
		p := base
		p.Clients = cs
		p.setLimits(ls)
		return exhaustible.WithFaults(p, faults, s.MaxFaults, faultPlaces)
	}, c.Size)
	if err != nil {
		return nil, "", err
	}
	return out, c.scopeWords(s, ttl, faults, base.Mutant, len(out)), nil
}

// setLimits gives p's clients limits ls, one each (leaserun.Limits): the
// plan's limit where they agree, each its own where they do not; nil
// leaves the plan's.
func (p *Plan) setLimits(ls []int) {
	switch {
	case ls == nil:
	case slices.ContainsFunc(ls, func(l int) bool { return l != ls[0] }):
		p.Limits = ls
	default:
		p.Limit = ls[0]
	}
}

// faultPlaces are the faults of p's scope: each of faults at every
// millisecond of times, at every client (a restart at the server), a
// pause or a partition lasting until the clients are done or three ttls.
func faultPlaces(p *Plan, faults []string, times []int) []Fault {
	return leaserun.Places(faults, len(p.Clients), times, 3*p.TTLMs, func(at int, f, target string, length int) Fault {
		return Fault{At: at, Fault: f, Target: target, For: length}
	})
}

// scopeWords says s in words, its plans (of sessions of ttl ms, of
// faults) counted: the search's last line.
func (c Config) scopeWords(s prover.ExhaustScope, ttl int, faults []string, mutant string, plans int) string {
	server := "a simulated Consul -dev agent"
	switch {
	case c.Backend == Etcd:
		server = "a simulated etcd"
	case c.Persistent:
		server = "a simulated persistent Consul agent"
	}
	what := fmt.Sprintf("consul-semaphore on %s, ttl %d ms, %s, each with every script of %s steps of acquire, refresh, verify, release, sleep %d ms", server, ttl, leaserun.Clients(s.Clients), s.Steps(), 3*ttl)
	if s.Clients > 1 {
		what += ", each with a limit of 1 or 2 of its own"
	} else {
		what += ", limit 1"
	}
	where := fmt.Sprintf("at every millisecond in which a client's operation is in flight in the run without faults (a pause or partition lasting until the clients are done or %d ms, a restart back at once)", 3*ttl)
	return what + s.EndWords(faults, where, mutant, plans)
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
