package redlockrun

import (
	"fmt"
	"slices"
	"strings"

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

// exhaustSteps is exhaustOps(ttl), and, sleep above 0, a sleep of sleep
// ms (--sleep): one shorter than a lease's life lets a client act while
// another's lease is still valid (a thief steal from a holder).
func exhaustSteps(ttl, sleep int) []Step {
	steps := exhaustOps(ttl)
	if sleep > 0 {
		steps = append(steps, Step{Op: Sleep, Ms: sleep})
	}
	return steps
}

// exhaustPriorities are the priorities a client of a priority Redlock's
// plan of n clients may have in an exhaustive search: 0 or 1 (equal, or
// one above the other) for two, and 0 to n-1 for more, so that three
// can form a ladder (a thief robbed in turn).
func exhaustPriorities(n int) []int64 {
	out := []int64{0, 1}
	for p := int64(2); p < int64(n); p++ {
		out = append(out, p)
	}
	return out
}

// exhaustTTL is the leases' ttl in an exhaustive search unless --ttl
// fixes it: the shortest plans draw, so that a server paused to the end
// lets its keys expire within the run.
const exhaustTTL = 100

// Skeletons returns every plan of s (prover.Exhaustive), fewest steps and
// faults first: a lock on c's servers (--servers; 1 if unset) of c's
// persistence ("always" if unset) and ttl (100 ms if unset), s.Clients
// clients each with every script of 1 to s.Ops steps (or its own of s.EachOps) (acquire, refresh,
// release, a sleep of two ttls, and one of s.SleepMs if above 0:
// exhaustSteps), every client but the first s.StaggerMs late, and, for
// the priority Redlock, every choice of each client's priority
// (exhaustPriorities) and the clients' own ttls of s.TTLsMs; then 0 to
// s.MaxFaults faults, each at every whole millisecond in which a client
// has an operation in flight in the plan's run without faults, under the
// first choice at every point (leaserun.Exhaustible.InFlight), at every client and server it
// can aim at. The schedule then decides whether it strikes before or
// after each step taken at that instant; a call to a simulated Redis
// takes 0.1 ms, so a fault falls between two calls of a client only where
// they are a whole millisecond apart (before an acquire's first call, say,
// but not between its calls to two servers). A pause or a partition
// lasts until the clients are done or two ttls (past a lease's life), or
// heals s.HealMs after it struck (pauseLengths), a
// restart keeps its server down c.MinDownMs, a clock jump moves its
// server's clock one ttl ahead; restarts only of servers that persist
// every write, unless c.AnyRestart (as plans draw them).
func (c Config) Skeletons(s prover.ExhaustScope) ([]prover.Plan, string, error) {
	c = c.withDefaults()
	if err := c.exhaustible(s); err != nil {
		return nil, "", err
	}
	base := c.exhaustBase(s)
	faults := drawable(s.PlanFaults(c.Faults, nil), base.Persistence, c.AnyRestart)
	priorities := c.priorityChoices(s.Clients)
	clientScripts, err := prover.ClientScripts(exhaustSteps(base.TTLMs, s.SleepMs), s, len(priorities))
	if err != nil {
		return nil, "", err
	}
	out, err := prover.EveryPlan(clientScripts, priorities, func(cs [][]Step, prio []int64) ([]prover.Plan, error) {
		p := base
		p.Clients = prover.Staggered(cs, s.StaggerMs, func(ms int) Step { return Step{Op: Sleep, Ms: ms} })
		if c.Priority {
			p.Priorities = slices.Clone(prio)
			p.TTLs = slices.Clone(s.TTLsMs)
		}
		return exhaustible.WithFaults(p, faults, s.MaxFaults, func(p *Plan, faults []string, times []int) []Fault {
			return faultPlaces(p, faults, times, c.MinDownMs, s.HealMs)
		})
	}, c.Size)
	if err != nil {
		return nil, "", err
	}
	return out, c.scopeWords(s, base, faults, len(out)), nil
}

// exhaustible says what is wrong with s as a scope of c's, naming the
// flag: no client, admins, ttls of the clients' own where they share
// one (or not one each), a limit above 1 (the reference is a mutex).
func (c Config) exhaustible(s prover.ExhaustScope) error {
	kind := c.kind()
	if err := leaserun.NoAdmins(kind, s); err != nil {
		return err
	}
	switch {
	case s.TTLsMs != nil && !c.Priority:
		return fmt.Errorf("--ttls: a %s's clients share one ttl (--ttl); clients of ttls of their own are the priority Redlock's", kind)
	case s.TTLsMs != nil && len(s.TTLsMs) != s.Clients:
		return fmt.Errorf("--ttls: give one ttl per client (--clients %d), got %d", s.Clients, len(s.TTLsMs))
	case c.Limit > 1:
		return fmt.Errorf("--limit %d: the reference is a mutex, and an exhaustive search runs it on the simulator only", c.Limit)
	}
	return nil
}

// kind is the kind c proves: the priority Redlock's, or Redlock's.
func (c Config) kind() string {
	if c.Priority {
		return PriorityKind
	}
	return Kind
}

// exhaustBase is the plan every plan of s starts from, no client yet: a
// lock on c's servers (1 if unset) of c's persistence ("always" if
// unset) and ttl (exhaustTTL if unset), of s's mutant.
func (c Config) exhaustBase(s prover.ExhaustScope) Plan {
	servers := c.Servers
	if servers == 0 {
		servers = 1
	}
	persistence := c.Persistence
	if persistence == "" {
		persistence = PersistAlways
	}
	ttl := c.TTLMs
	if ttl == 0 {
		ttl = exhaustTTL
	}
	return Plan{Version: PlanVersion, Kind: c.kind(), Key: "lp", Servers: servers, Persistence: persistence, TTLMs: ttl, Mutant: s.PlanMutant(c.Mutant)}
}

// priorityChoices are the choices of the clients' priorities in a scope
// of n clients: none for Redlock; for the priority Redlock, 0 for one
// client, and every choice of each's (exhaustPriorities) for more.
func (c Config) priorityChoices(n int) [][]int64 {
	switch {
	case !c.Priority:
		return [][]int64{nil}
	case n > 1:
		return prover.Product(exhaustPriorities(n), n)
	}
	return [][]int64{{0}}
}

// scopeWords says s in words, its plans (base's, of faults) counted: the
// search's last line.
func (c Config) scopeWords(s prover.ExhaustScope, base Plan, faults []string, plans int) string {
	ttl := base.TTLMs
	what := fmt.Sprintf("%s on %d simulated server(s) of persistence %s, ttl %d ms, %s, each with every script of %s steps of acquire, refresh, release, sleep %d ms", base.Kind, base.Servers, base.Persistence, ttl, leaserun.Clients(s.Clients), s.Steps(), 2*ttl)
	if s.SleepMs > 0 {
		what += fmt.Sprintf(", sleep %d ms", s.SleepMs)
	}
	if s.StaggerMs > 0 {
		what += fmt.Sprintf(", every client but the first starting after a sleep of %d ms", s.StaggerMs)
	}
	if s.TTLsMs != nil {
		what += fmt.Sprintf(", of ttls %s ms", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(s.TTLsMs)), ", "), "[]"))
	}
	switch {
	case c.Priority && s.Clients > 1:
		if top := len(exhaustPriorities(s.Clients)) - 1; top == 1 {
			what += ", each with a priority of 0 or 1"
		} else {
			what += fmt.Sprintf(", each with a priority of 0 to %d", top)
		}
	case c.Priority:
		what += ", of priority 0"
	}
	where := fmt.Sprintf("at every millisecond in which a client's operation is in flight in the run without faults, at every client and server it aims at (a pause or partition lasting until the clients are done%s ms, a restart down %d ms, a clock jump of +%d ms)", lengthWords(pauseLengths(ttl, s.HealMs)), c.MinDownMs, ttl)
	return what + s.EndWords(faults, where, base.Mutant, plans)
}

// pauseLengths are how long a pause or a partition of a scope of leases
// of ttl ms lasts, beside until the clients are done: two ttls (past a
// lease's life), and, heal above 0, heal ms (--heal: one shorter than an
// acquire's bound on a server's answer heals within the acquire, which
// then took that long).
func pauseLengths(ttl, heal int) []int {
	if heal > 0 && heal != 2*ttl {
		return []int{2 * ttl, heal}
	}
	return []int{2 * ttl}
}

// lengthWords says lengths in words, after "until the clients are
// done": " or 200", ", 200 or 49".
func lengthWords(lengths []int) string {
	w := make([]string, len(lengths))
	for i, n := range lengths {
		w[i] = fmt.Sprint(n)
	}
	if len(w) == 1 {
		return " or " + w[0]
	}
	return ", " + strings.Join(w[:len(w)-1], ", ") + " or " + w[len(w)-1]
}

// faultPlaces are the faults of p's scope: each of faults at every
// millisecond of times, at every client and server it aims at; a pause
// or a partition of every length of pauseLengths(p.TTLMs, heal).
func faultPlaces(p *Plan, faults []string, times []int, down, heal int) []Fault {
	var out []Fault
	for _, name := range faults {
		client, server := aims(name)
		targets, nums := []string{""}, []int{0}
		if client {
			targets = p.processes()
		}
		if server {
			nums = nil
			for i := 1; i <= p.Servers; i++ {
				nums = append(nums, i)
			}
		}
		lengths := []int{0}
		switch name {
		case histories.Pause, histories.Partition:
			lengths = append(lengths, pauseLengths(p.TTLMs, heal)...)
		case histories.RestartBroker:
			lengths = []int{down}
		}
		for _, t := range targets {
			for _, n := range nums {
				for _, length := range lengths {
					for _, at := range times {
						f := Fault{At: at, Fault: name, Target: t, Server: n, For: length}
						if name == histories.ClockJump {
							f.OffsetMs = p.TTLMs
						}
						out = append(out, f)
					}
				}
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
