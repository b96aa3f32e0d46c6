package amqprun

import (
	"context"
	"fmt"
	"slices"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/statehash"
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
	if err := c.exhaustible(s); err != nil {
		return nil, "", err
	}
	// A mutex has no admin for an admin-crash to strike.
	faults := s.PlanFaults(c.Faults, func(f string) bool { return c.Kind != histories.Mutex || f != AdminCrash })
	base := Plan{Version: PlanVersion, Kind: c.Kind, Lock: "lp", Options: c.Options, Mutant: s.PlanMutant(c.Mutant)}
	if c.Kind == histories.Semaphore {
		base.Slots = exhaustSlots
	}
	clientOps, adminOps := exhaustClientOps, exhaustAdminOps
	if s.SleepMs > 0 {
		sleep := Step{Op: Sleep, Ms: s.SleepMs}
		clientOps, adminOps = append(slices.Clone(clientOps), sleep), append(slices.Clone(adminOps), sleep)
	}
	adminSets, n := c.adminScripts(s, adminOps)
	if err := tooMany(s, n, clientOps); err != nil {
		return nil, "", err
	}
	clientSets, err := prover.ClientScripts(clientOps, s, 1)
	if err != nil {
		return nil, "", err
	}
	out, err := prover.EveryPlan(clientSets, adminSets, func(cs, as [][]Step) ([]prover.Plan, error) {
		p := base
		p.Clients, p.Admins = prover.Staggered(cs, s.StaggerMs, func(ms int) Step { return Step{Op: Sleep, Ms: ms} }), as
		places, err := c.faultPlaces(&p, faults, s.HealMs)
		if err != nil {
			return nil, err
		}
		return prover.WithFaults(places, s.MaxFaults, p.withNemesis), nil
	}, c.Size)
	if err != nil {
		return nil, "", err
	}
	return out, c.scopeWords(s, faults, base.Mutant, len(out)), nil
}

// exhaustible says what is wrong with s as a scope of c's, naming the
// flag: ttls of the clients' own, no client or no operation, admins of a
// mutex, a count of operations for other than each admin.
func (c Config) exhaustible(s prover.ExhaustScope) error {
	if err := s.NoTTLs(c.Kind); err != nil {
		return err
	}
	switch {
	case s.Clients < 1:
		return fmt.Errorf("--clients: an exhaustive search needs at least one client, got %d", s.Clients)
	case s.Ops < 1 && s.EachOps == nil:
		return fmt.Errorf("--ops: an exhaustive search needs at least one operation per client, got %d", s.Ops)
	case c.Kind == histories.Mutex && s.AdminOps > 0:
		return fmt.Errorf("--admin-ops: a mutex has no admins (give --admin-ops 0, or --kind semaphore)")
	case c.Kind == histories.Mutex && s.Admins > 0:
		return fmt.Errorf("--admins: a mutex has no admins (or --kind semaphore)")
	case s.EachAdminOps != nil && len(s.EachAdminOps) != max(1, s.Admins):
		return fmt.Errorf("--admin-ops %s: give one count per admin (--admins %d), or one for all", s.AdminOpsWords(), max(1, s.Admins))
	}
	return nil
}

// adminScripts is every choice of the admins' scripts of s (each with
// every script of 0 to its most operations of alphabet, the first
// admin's varying slowest), one choice of none for a mutex, and how many
// choices there are; none at all if they are more than maxSkeletons.
func (c Config) adminScripts(s prover.ExhaustScope, alphabet []Step) ([][][]Step, float64) {
	if c.Kind != histories.Semaphore {
		return [][][]Step{nil}, 1
	}
	n := 1.0
	each := make([][][]Step, max(1, s.Admins))
	for i := range each {
		most := s.AdminOps
		if s.EachAdminOps != nil {
			most = s.EachAdminOps[i]
		}
		each[i] = scripts(alphabet, 0, most)
		n *= float64(len(each[i]))
	}
	if n > maxSkeletons {
		return nil, n
	}
	return prover.Choices(each), n
}

// tooMany refuses a scope of more than maxSkeletons plans before any
// fault, before they are listed (the faults multiply them): admins
// choices of the admins' scripts, times each client's every script of 1
// to its most steps of clientOps.
func tooMany(s prover.ExhaustScope, admins float64, clientOps []Step) error {
	n := admins
	for i := range s.Clients {
		most := s.Ops
		if s.EachOps != nil && i < len(s.EachOps) {
			most = s.EachOps[i]
		}
		n *= float64(len(scripts(clientOps, 1, most)))
	}
	if n > maxSkeletons {
		return fmt.Errorf("--clients %d, --ops %s, --admin-ops %s: %.3g plans before any fault, more than an exhaustive search can run (at most %d): narrow the scope", s.Clients, s.OpsWords(), s.AdminOpsWords(), n, maxSkeletons)
	}
	return nil
}

// withNemesis is a copy of p (one of Skeletons') that holds faults
// nemesis.
func (p Plan) withNemesis(nemesis []Fault) prover.Plan {
	p.Nemesis = nemesis
	return &p
}

// scopeWords says s in words, its plans (of faults, of mutant) counted:
// the search's last line.
func (c Config) scopeWords(s prover.ExhaustScope, faults []string, mutant string, plans int) string {
	sleep := ""
	if s.SleepMs > 0 {
		sleep = fmt.Sprintf(", sleep %d ms", s.SleepMs)
	}
	what := fmt.Sprintf("%s, %s, each with every script of %s operations of acquire, verify, release%s", c.Kind, plural(s.Clients, "client"), s.Steps(), sleep)
	if s.StaggerMs > 0 {
		what += fmt.Sprintf(", every client but the first starting after a sleep of %d ms", s.StaggerMs)
	}
	admins := max(1, s.Admins)
	switch {
	case c.Kind != histories.Semaphore:
	case admins == 1 && s.AdminOps == 0 && s.EachAdminOps == nil:
		what += fmt.Sprintf("; one admin that creates %d slot and does nothing more", exhaustSlots)
	case admins == 1:
		what += fmt.Sprintf("; one admin that creates %d slot, then every script of 0 to %d operations of change +1, change -1, count, wait for slot 1, destroy%s", exhaustSlots, s.AdminOps, sleep)
	default:
		what += fmt.Sprintf("; %d admins, the first creating %d slot, each with every script of %s operations of change +1, change -1, count, wait for slot 1, destroy%s", admins, exhaustSlots, s.AdminSteps(), sleep)
	}
	lasting := "lasting to the end"
	if s.HealMs > 0 {
		lasting = fmt.Sprintf("lasting to the end, or healing %d ms after it struck", s.HealMs)
	}
	return what + s.EndWords(faults, "right after any method its target sends (a pause or partition "+lasting+")", mutant, plans)
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
	methods, err := c.methodCounts(p)
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
// first choice at each point, and counts each process's methods: for an
// implementation in processes, on the simulator served on the wire to them
// (c.Target's), the search's way, each point's first choice the one its
// run without a bound takes first.
func (c Config) methodCounts(p *Plan) (map[string]int, error) {
	q := *p
	q.Nemesis, q.Schedule, q.ScheduleSeed = nil, nil, 0
	var w *rabbitmqsim.World
	if sim, ok := c.Target.(Simulator); ok && sim.Wire != nil {
		q.Decisions = q.Decisions.Choosing(nil, firstChoice{})
		var err error
		if _, w, err = sim.run(context.Background(), &q, c.Impl); err != nil {
			return nil, fmt.Errorf("the plan's run without faults, to count its methods: %w", err)
		}
	} else {
		w = rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Script(nil, nil)})
		if q.Options.NoHeartbeat() {
			w = rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Script(nil, nil), ServerHeartbeat: -1})
		}
		r := newRunner(&q, implFor(p, c.Impl), simPlace{w: w}, q.Lock)
		r.begin()
		if err := w.Run(); err != nil {
			return nil, err
		}
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

// firstChoice takes the first choice at every point, as an exhaustive
// search's first run without a bound does.
type firstChoice struct{}

func (firstChoice) Choose(int, int, func() statehash.Sum) int { return 0 }
func (firstChoice) Made(int)                                  {}

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
