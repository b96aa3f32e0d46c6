package amqprun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// The operation alphabets of an exhaustive search: a client's, and an
// admin's (the change of one slot either way, a count, a wait for slot 1,
// the destroy). Sleeps are left out: on the simulator time moves by what
// operations cost, and a sleep's length is a choice no scope can list.
var (
	exhaustClientOps = []Step{{Op: histories.Acquire}, {Op: histories.Verify}, {Op: histories.Release}}
	exhaustAdminOps  = []Step{{Op: histories.Change, Delta: 1}, {Op: histories.Change, Delta: -1},
		{Op: histories.Count}, {Op: histories.Wait, Slot: 1}, {Op: histories.Destroy}}
)

// maxSkeletons bounds the plans of a scope before faults: more is
// refused before they are listed.
const maxSkeletons = 100000

// exhaustSlots is the slots the admin creates in an exhaustive search's
// semaphore: one, the smallest that lets two clients contend.
const exhaustSlots = 1

// Skeletons returns every plan of s (prover.Exhaustive), fewest
// operations and faults first: c.Kind's lock, s.Clients clients each
// with every script of 1 to s.Ops operations (or its own of s.EachOps)
// (acquire, verify, release, and a sleep of s.SleepMs if above 0), every
// client but the first s.StaggerMs late; a semaphore's one admin, which
// creates it with one slot, with every script of 0 to s.AdminOps
// operations (or its own of s.EachAdminOps) (change +1 or -1, count, wait
// for slot 1, destroy, the sleep), and so on for s.Admins admins; and 0
// to s.MaxFaults faults of s.Faults, each at every place a plan names:
// right after each method its target sends in the plan's run without
// faults (after_calls), a pause or partition lasting to the end of the
// run, or healing s.HealMs after it struck.
func (c Config) Skeletons(s prover.ExhaustScope) ([]prover.Plan, string, error) {
	c = c.withDefaults()
	if err := s.NoTTLs(c.Kind); err != nil {
		return nil, "", err
	}
	if s.Clients < 1 {
		return nil, "", fmt.Errorf("--clients: an exhaustive search needs at least one client, got %d", s.Clients)
	}
	if s.Ops < 1 && s.EachOps == nil {
		return nil, "", fmt.Errorf("--ops: an exhaustive search needs at least one operation per client, got %d", s.Ops)
	}
	if c.Kind == histories.Mutex && s.AdminOps > 0 {
		return nil, "", fmt.Errorf("--admin-ops: a mutex has no admins (give --admin-ops 0, or --kind semaphore)")
	}
	if c.Kind == histories.Mutex && s.Admins > 0 {
		return nil, "", fmt.Errorf("--admins: a mutex has no admins (or --kind semaphore)")
	}
	admins := max(1, s.Admins)
	faults := s.Faults
	if faults == nil {
		faults = c.Faults // --faults, as the family's setup read it
	}
	if s.MaxFaults == 0 {
		faults = nil
	}
	if c.Kind == histories.Mutex {
		faults = slices.DeleteFunc(slices.Clone(faults), func(f string) bool { return f == AdminCrash })
	}
	mutant := s.Mutant
	if mutant == "" {
		mutant = c.Mutant
	}
	base := Plan{Version: PlanVersion, Kind: c.Kind, Lock: "lp", Options: c.Options, Mutant: mutant}
	clientOps, adminOps := exhaustClientOps, exhaustAdminOps
	if s.SleepMs > 0 {
		sleep := Step{Op: Sleep, Ms: s.SleepMs}
		clientOps, adminOps = append(slices.Clone(clientOps), sleep), append(slices.Clone(adminOps), sleep)
	}
	if s.EachAdminOps != nil && len(s.EachAdminOps) != admins {
		return nil, "", fmt.Errorf("--admin-ops %s: give one count per admin (--admins %d), or one for all", s.AdminOpsWords(), admins)
	}
	adminSets := [][][]Step{nil}
	n := 1.0
	if c.Kind == histories.Semaphore {
		base.Slots = exhaustSlots
		// Each admin's scripts, the first admin's varying slowest.
		adminSets = nil
		each := make([][][]Step, admins)
		for i := range each {
			most := s.AdminOps
			if s.EachAdminOps != nil {
				most = s.EachAdminOps[i]
			}
			each[i] = scripts(adminOps, 0, most)
			n *= float64(len(each[i]))
		}
		if n <= maxSkeletons {
			adminSets = prover.Choices(each)
		}
	}
	// Refuse at once what cannot even be listed: the faults multiply it.
	for i := range s.Clients {
		most := s.Ops
		if s.EachOps != nil && i < len(s.EachOps) {
			most = s.EachOps[i]
		}
		n *= float64(len(scripts(clientOps, 1, most)))
	}
	if n > maxSkeletons {
		return nil, "", fmt.Errorf("--clients %d, --ops %s, --admin-ops %s: %.3g plans before any fault, more than an exhaustive search can run (at most %d): narrow the scope", s.Clients, s.OpsWords(), s.AdminOpsWords(), n, maxSkeletons)
	}
	clientSets, err := prover.ClientScripts(clientOps, s, 1)
	if err != nil {
		return nil, "", err
	}
	var out []prover.Plan
	for _, cs := range clientSets {
		for _, as := range adminSets {
			p := base
			p.Clients, p.Admins = prover.Staggered(cs, s.StaggerMs, func(ms int) Step { return Step{Op: Sleep, Ms: ms} }), as
			places, err := c.faultPlaces(&p, faults, s.HealMs)
			if err != nil {
				return nil, "", err
			}
			for _, nem := range prover.Subsets(places, s.MaxFaults) {
				q := p
				q.Nemesis = nem
				out = append(out, &q)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b prover.Plan) int { return c.Size(a) - c.Size(b) })
	sleep := ""
	if s.SleepMs > 0 {
		sleep = fmt.Sprintf(", sleep %d ms", s.SleepMs)
	}
	what := fmt.Sprintf("%s, %s, each with every script of %s operations of acquire, verify, release%s", c.Kind, plural(s.Clients, "client"), s.Steps(), sleep)
	if s.StaggerMs > 0 {
		what += fmt.Sprintf(", every client but the first starting after a sleep of %d ms", s.StaggerMs)
	}
	switch {
	case c.Kind != histories.Semaphore:
	case admins == 1 && s.AdminOps == 0 && s.EachAdminOps == nil:
		what += fmt.Sprintf("; one admin that creates %d slot and does nothing more", exhaustSlots)
	case admins == 1:
		what += fmt.Sprintf("; one admin that creates %d slot, then every script of 0 to %d operations of change +1, change -1, count, wait for slot 1, destroy%s", exhaustSlots, s.AdminOps, sleep)
	default:
		what += fmt.Sprintf("; %d admins, the first creating %d slot, each with every script of %s operations of change +1, change -1, count, wait for slot 1, destroy%s", admins, exhaustSlots, s.AdminSteps(), sleep)
	}
	if len(faults) == 0 {
		what += "; no faults"
	} else {
		lasting := "lasting to the end"
		if s.HealMs > 0 {
			lasting = fmt.Sprintf("lasting to the end, or healing %d ms after it struck", s.HealMs)
		}
		what += fmt.Sprintf("; 0 to %d faults of %s, each right after any method its target sends (a pause or partition %s)", s.MaxFaults, strings.Join(faults, ", "), lasting)
	}
	if mutant != "" {
		what += "; mutant " + mutant
	}
	what += fmt.Sprintf(" (%d plans), under every schedule of the simulator", len(out))
	return out, what, nil
}

// faultPlaces are the faults of p's scope, each at every place: after
// each method its target sends in p's run without faults, on the
// simulator, taking the first choice at each point; a pause or a
// partition lasting to the end of the run, and, heal above 0, also
// ending heal ms after it struck.
func (c Config) faultPlaces(p *Plan, faults []string, heal int) ([]Fault, error) {
	if len(faults) == 0 {
		return nil, nil
	}
	methods, err := methodCounts(p, implFor(p, c.Impl))
	if err != nil {
		return nil, err
	}
	var out []Fault
	procs := p.processes()
	for _, f := range faults {
		for _, target := range procs {
			if f == AdminCrash && !changes(p, target) {
				continue
			}
			// An admin-crash strikes k methods into the admin's first
			// change or destroy, and, k past its end, into what follows
			// it: up to every method the admin sends, so that a crash
			// can fall in a later change or destroy too (within a
			// destroy after a change, say).
			n := methods[target]
			lengths := []int{0}
			if heal > 0 && (f == histories.Pause || f == histories.Partition) {
				lengths = append(lengths, heal)
			}
			for _, length := range lengths {
				for k := 1; k <= n; k++ {
					out = append(out, Fault{Fault: f, Target: target, AfterCalls: k, For: length})
				}
			}
		}
	}
	return out, nil
}

// changes says whether target is an admin of p with a change or a
// destroy (where an admin-crash strikes).
func changes(p *Plan, target string) bool {
	for i, script := range p.Admins {
		if adminName(i) == target {
			return slices.ContainsFunc(script, func(s Step) bool { return s.Op == histories.Change || s.Op == histories.Destroy })
		}
	}
	return false
}

// methodCounts runs p on the simulator, without faults and taking the
// first choice at each point, and counts each process's methods.
func methodCounts(p *Plan, impl Impl) (map[string]int, error) {
	q := *p
	q.Nemesis, q.Schedule, q.ScheduleSeed = nil, nil, 0
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Script(nil, nil)})
	if q.Options.NoHeartbeat() {
		w = rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Script(nil, nil), ServerHeartbeat: -1})
	}
	r := newRunner(&q, impl, simEngine{w}, q.Lock)
	r.begin()
	if err := w.Run(); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, name := range q.processes() {
		total := 0
		for _, n := range w.Cost(name).Methods {
			total += n
		}
		out[name] = total
	}
	return out, nil
}

// scripts is every sequence of min to max steps of alphabet.
func scripts(alphabet []Step, least, most int) [][]Step {
	var out [][]Step
	level := [][]Step{nil}
	for n := 0; n <= most; n++ {
		if n >= least {
			out = append(out, level...)
		}
		var next [][]Step
		for _, s := range level {
			for _, a := range alphabet {
				next = append(next, append(slices.Clone(s), a))
			}
		}
		level = next
	}
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Size is p's operations and faults (prover.Exhaustive).
func (c Config) Size(p prover.Plan) int {
	q := p.(*Plan)
	n := len(q.Nemesis)
	for _, s := range q.Clients {
		n += len(s)
	}
	for _, s := range q.Admins {
		n += len(s)
	}
	return n
}

// Scheduled returns a copy of p (one of Skeletons') that takes its
// choices from ch, or from schedule (prover.Exhaustive).
func (c Config) Scheduled(p prover.Plan, schedule []int, ch prover.Chooser) prover.Plan {
	q := *p.(*Plan)
	q.Decisions = q.Decisions.Choosing(schedule, ch)
	return &q
}

var _ prover.Exhaustive = Config{}
