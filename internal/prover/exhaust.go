package prover

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/statehash"
)

// A Chooser answers a simulator's scheduling choices (pick one of n,
// n >= 2) in an exhaustive search. keep is the choice that keeps the
// process that moved last moving, where the choice is which process
// moves and that one can (any other is a preemption); -1 if none does.
// state fingerprints the simulation as it stands at the choice (every
// process's place, the server, the timers, the history so far),
// computed only when asked for; nil where the family's simulator gives
// none (then nothing is pruned).
type Chooser interface {
	Choose(n, keep int, state func() statehash.Sum) int
	// Made hears every choice the simulator made, as a plan's schedule
	// says it (which of all it could choose): those the family left out
	// of Choose (Exhaust.Everything) too.
	Made(pick int)
}

// An ExhaustScope bounds the plans an exhaustive search enumerates.
type ExhaustScope struct {
	Clients int // this many clients
	Ops     int // at most this many operations per client
	// EachOps, if not nil, is each client's own most operations, in
	// place of Ops (one per client; a lease family's only).
	EachOps  []int
	AdminOps int // at most this many operations per admin
	// EachAdminOps, if not nil, is each admin's own most operations, in
	// place of AdminOps (one per admin).
	EachAdminOps []int
	Admins       int      // this many admins, for a kind that has them; 0 means 1
	MaxFaults    int      // at most this many faults per plan
	Faults       []string // the faults plans may hold; nil means the family's default
	Mutant       string   // a mutant of the reference to prove instead
	// SleepMs, if above 0, adds a sleep of that many milliseconds to the
	// step alphabet of every client (and admin): a step of their scripts
	// like any other (--sleep).
	SleepMs int
	// HealMs, if above 0, lets every pause and partition of the scope
	// also end that many milliseconds after it struck, beside the lengths
	// the family gives them (--heal).
	HealMs int
	// StaggerMs, if above 0, starts every client but the first
	// StaggerMs milliseconds late, a sleep before its script that is no
	// step of it (--stagger): the first then meets the others only as far
	// as that lets it.
	StaggerMs int
	// TTLsMs, if not nil, are the clients' own ttls in milliseconds, one
	// each (--ttls; the priority Redlock's only).
	TTLsMs []int
	// Bounded bounds each schedule's preemptions by Preemptions: every
	// schedule within the bound runs (CHESS's preemption bounding), in
	// which a process that can go on moving is switched away from at
	// most Preemptions times; a switch from a process that cannot move,
	// and every choice that is not which process moves, is free.
	Bounded     bool
	Preemptions int
	// Delays makes the bound count delays instead (--delays): a delay is
	// any choice other than the one the search takes first at its point,
	// the process that moved last where it can go on, else the first of
	// the choices (delay bounding, Emmi, Qadeer and Rakamaric, POPL
	// 2011). Every preemption is a delay; a free choice that is not the
	// first is one too, so that a bound on them cuts the schedules of a
	// simulator whose processes mostly wait on each other.
	Delays bool
}

// NoSleepOrHeal is an error naming --sleep, --heal, --stagger or --ttls
// if s gives one, for a family (kind) whose scopes offer none of them;
// nil if s gives none.
func (s ExhaustScope) NoSleepOrHeal(kind string) error {
	if err := s.NoStagger(kind); err != nil {
		return err
	}
	if err := s.NoTTLs(kind); err != nil {
		return err
	}
	switch {
	case s.SleepMs > 0:
		return fmt.Errorf("--sleep: a %s scope has no sleep of another length (amqp-locks and Redlock scopes do)", kind)
	case s.HealMs > 0:
		return fmt.Errorf("--heal: a %s scope has no pause or partition that heals at another time (amqp-locks and Redlock scopes do)", kind)
	}
	return nil
}

// NoTTLs is an error naming --ttls if s gives it, for a family (kind)
// whose clients have no ttls of their own.
func (s ExhaustScope) NoTTLs(kind string) error {
	if s.TTLsMs != nil {
		return fmt.Errorf("--ttls: a %s's clients have no ttls of their own (the priority Redlock's have)", kind)
	}
	return nil
}

// NoStagger is an error naming --stagger if s gives it, for a family
// (kind) whose scopes offer none.
func (s ExhaustScope) NoStagger(kind string) error {
	if s.StaggerMs > 0 {
		return fmt.Errorf("--stagger: a %s scope starts every client at once (amqp-locks and Redlock scopes can stagger them)", kind)
	}
	return nil
}

// bound is s's bound on preemptions, -1 for none.
func (s ExhaustScope) bound() int {
	if !s.Bounded {
		return -1
	}
	return s.Preemptions
}

// Exhaustive is a family that can enumerate the plans of a scope, for
// Exhaust: every script of its operation alphabet, every fault at every
// place a plan can name, the scheduling left to a Chooser.
type Exhaustive interface {
	Subject
	// Skeletons returns every plan of s, fewest operations and faults
	// first, their scheduling left open; or an error that names the flag
	// of s that means nothing for the family. What it says is the scope
	// in words, as the search's last line spells it out.
	Skeletons(s ExhaustScope) (plans []Plan, what string, err error)
	// Scheduled returns a copy of p whose simulator takes its choices
	// from ch, or, ch nil, from schedule (a replayable plan).
	Scheduled(p Plan, schedule []int, ch Chooser) Plan
	// Size is one of Skeletons' plans' operations and faults: the
	// shortest counterexample has the fewest.
	Size(p Plan) int
}

// Exhaust is an exhaustive search of a scope: every plan of the scope,
// and for each every schedule the simulator can produce (which process
// moves at each point where several can, and every other choice the
// simulator leaves open), visited once up to equal states (Reduce).
type Exhaust struct {
	Config Config
	Scope  ExhaustScope
	// Reduce prunes a schedule at a state the search has already
	// explored from: what follows is what followed then. False runs
	// every schedule.
	Reduce bool
	// Everything makes the family offer every choice, leaving out none it
	// argues changes no verdict (amqp-locks: the nemesis moves last).
	// docs/exhaustive.md argues why both reductions are sound.
	Everything bool
	// MaxSchedules refuses, before it starts, a search estimated to run
	// more schedules, unless Until bounds it; 0 means 1,000,000.
	MaxSchedules float64
	// Until, if set, stops the search then, reporting what it covered.
	Until time.Time
	// Context interrupts the search (it reports what it covered).
	Context context.Context
	// Progress, if set, hears how far the search is, about every second.
	Progress func(ExhaustOutcome)
}

// ExhaustOutcome is what an exhaustive search covered and found.
type ExhaustOutcome struct {
	Scope      string  // the scope in words
	Plans      int     // the scope's plans (skeletons)
	PlansDone  int     // those whose every schedule was explored
	Estimate   float64 // schedules without pruning at states seen before, estimated before the start
	Schedules  int64   // schedules run (each a whole run, judged)
	States     int64   // distinct states met at choice points (Reduce), or choice points run
	Pruned     int64   // schedules cut short at a state seen before
	Elapsed    time.Duration
	Stopped    string // "" if complete; else why not ("interrupted", "--time ran out")
	Found      *Counterexample
	FoundSteps int // the counterexample's scheduling decisions (its plan's schedule)
	// Undecided counts the schedules (among Schedules) that said nothing
	// either way, their branches not searched: a run the family could not
	// judge (UndecidedError), or one whose replayed prefix met another
	// number of choices than when it was first run. FirstUndecided says
	// why the first was. A search with any has not searched its scope
	// whole.
	Undecided      int64
	FirstUndecided string
	// Outcomes counts the schedules by their verdicts: each key lists
	// every property with its status ("available=pass slot-exclusive=fail
	// ..."); two searches of a scope that reach the same keys reach the
	// same verdicts.
	Outcomes map[string]int
}

// ErrScopeTooLarge is the error of a search Exhaust refuses before it
// starts: its estimate is above MaxSchedules and no Until bounds it.
var ErrScopeTooLarge = errors.New("scope too large")

// Run runs the search.
func (e Exhaust) Run() (*ExhaustOutcome, error) {
	fam, c, err := e.subject()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	plans, what, err := fam.Skeletons(e.Scope)
	if err != nil {
		return nil, err
	}
	bound, delays := e.Scope.bound(), e.Scope.Delays
	o := &ExhaustOutcome{Scope: what + boundWords(bound, delays), Plans: len(plans), Outcomes: map[string]int{}}
	if len(plans) == 0 {
		return nil, fmt.Errorf("the scope holds no plan: %s", o.Scope)
	}
	if o.Estimate, err = estimate(c, fam, plans, e.Everything, bound, delays); err != nil {
		return nil, err
	}
	if err := e.tooLarge(o); err != nil {
		return o, err
	}
	s := &search{e: e, c: c, fam: fam, o: o, bound: bound, delays: delays, start: start, last: time.Now(), foundSize: -1}
	for i, p := range plans {
		size := fam.Size(p)
		if s.foundSize >= 0 && size > s.foundSize {
			break // the shortest counterexample has the fewest operations and faults
		}
		if err := s.plan(i, p, size); err != nil {
			return nil, err
		}
		if o.Stopped != "" {
			break
		}
		o.PlansDone++
	}
	o.Elapsed = time.Since(start)
	return o, nil
}

// subject is the family e searches, and e's Config ready to run its
// plans; or why e cannot search it.
func (e Exhaust) subject() (Exhaustive, Config, error) {
	fam, ok := e.Config.Subject.(Exhaustive)
	if !ok {
		return nil, Config{}, fmt.Errorf("%s cannot be searched exhaustively (its family enumerates no scope)", e.Config.Subject)
	}
	if !fam.Deterministic() {
		return nil, Config{}, errors.New("an exhaustive search runs on the simulator only (--target sim)")
	}
	c := e.Config.withDefaults()
	c.ctx = e.Context
	if c.ctx == nil {
		c.ctx = context.Background()
	}
	return fam, c, nil
}

// boundWords says a bound on preemptions (or delays) in words, after the
// scope's; "" for none (bound -1).
func boundWords(bound int, delays bool) string {
	switch {
	case bound >= 0 && delays:
		return fmt.Sprintf(" with at most %s (a choice other than the first: a switch away from a process that could go on, or, where none can, any but the first process)", plural(bound, "delay"))
	case bound >= 0:
		return fmt.Sprintf(" with at most %s (a switch away from a process that could go on)", plural(bound, "preemption"))
	}
	return ""
}

// tooLarge refuses a search whose estimate (o's) is above MaxSchedules,
// unless Until bounds it: ErrScopeTooLarge, saying how to narrow it.
func (e Exhaust) tooLarge(o *ExhaustOutcome) error {
	limit := e.MaxSchedules
	if limit == 0 {
		limit = 1e6
	}
	if o.Estimate > limit && e.Until.IsZero() {
		return fmt.Errorf("%w: about %.3g schedules to run (%d plans; estimated without pruning at states seen before), above --max-schedules %.0f: narrow the scope, bound the search's time with --time (it then reports what it covered), or raise --max-schedules", ErrScopeTooLarge, o.Estimate, o.Plans, limit)
	}
	return nil
}

// search is one Run under way: what every schedule needs, and what the
// search has covered and found so far (o).
type search struct {
	e         Exhaust
	c         Config
	fam       Exhaustive
	o         *ExhaustOutcome
	bound     int // at most this many preemptions (or delays); -1 no bound
	delays    bool
	start     time.Time
	last      time.Time // when Progress last heard
	foundSize int       // the size of the counterexample found (Exhaustive.Size); -1 none yet
}

// plan runs every schedule of p, the scope's plan i, depth first, each
// schedule a prefix of choices to replay; it ends early, o.Stopped saying
// why, when the search is interrupted or out of time.
func (s *search) plan(i int, p Plan, size int) error {
	visited := map[visit]int{}
	stack := []branch{{}}
	for len(stack) > 0 {
		if s.stopped() {
			return nil
		}
		prefix := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		next, err := s.schedule(p, size, prefix, visited)
		if err != nil {
			return fmt.Errorf("plan %d of the scope, schedule %v: %w", i+1, prefix.picks, err)
		}
		stack = append(stack, next...)
		s.progress()
	}
	return nil
}

// stopped says whether the search must end now (interrupted, or out of
// time), noting why in o.Stopped.
func (s *search) stopped() bool {
	switch {
	case s.c.ctx.Err() != nil:
		s.o.Stopped = "interrupted"
	case !s.e.Until.IsZero() && time.Now().After(s.e.Until):
		s.o.Stopped = "--time ran out"
	}
	return s.o.Stopped != ""
}

// schedule runs one schedule of p (of size size): prefix replayed, then
// the first choice at every point (dfs), pruned at a state seen before
// (visited) if e.Reduce. It counts the schedule and its verdicts, keeps
// it if it is the shortest counterexample yet, and returns the
// schedules that branch off it, to run next.
func (s *search) schedule(p Plan, size int, prefix branch, visited map[visit]int) ([]branch, error) {
	o := s.o
	d := &dfs{prefix: prefix.picks, prefixNs: prefix.ns, states: &o.States, pruned: -1, all: s.e.Everything, bound: s.bound, delays: s.delays}
	if s.e.Reduce {
		d.visited = visited
	}
	ran := s.fam.Scheduled(p, nil, d)
	cx, err := s.c.runRecovering(ran)
	var undecided *UndecidedError
	switch {
	case errors.As(err, &undecided):
		s.undecided(undecided.Why, prefix)
		return nil, nil
	case err != nil:
		return nil, err
	case d.diverged != "":
		s.undecided(d.diverged, prefix)
		return nil, nil
	}
	o.Schedules++
	o.Outcomes[outcomeKey(cx.Report)]++
	end := len(d.picks)
	if d.pruned >= 0 {
		o.Pruned++
		end = d.pruned
	}
	if !s.e.Reduce {
		o.States += int64(end - len(prefix.picks))
	}
	if cx.violated() && (o.Found == nil || len(d.made) < o.FoundSteps) {
		cx.Plan = s.fam.Scheduled(ran, d.made, nil) // what ran logged (a served run's steps) kept
		cx.Plan.Judged(s.c.Model, s.c.Properties)
		o.Found, o.FoundSteps, s.foundSize = cx, len(d.made), size
	}
	return d.branches(len(prefix.picks), end), nil
}

// undecided counts a schedule that said nothing either way (why), whose
// branches are not searched.
func (s *search) undecided(why string, prefix branch) {
	s.o.Schedules++
	s.o.Undecided++
	if s.o.FirstUndecided == "" {
		s.o.FirstUndecided = fmt.Sprintf("%s (the schedule %v)", why, prefix.picks)
	}
}

// progress tells Progress how far the search is, about every second.
func (s *search) progress() {
	if s.e.Progress != nil && time.Since(s.last) >= time.Second {
		s.last = time.Now()
		s.o.Elapsed = time.Since(s.start)
		s.e.Progress(*s.o)
	}
}

// outcomeKey says a report's verdicts, property by property.
func outcomeKey(r *verdict.Report) string {
	var parts []string
	for _, v := range r.Verdicts {
		parts = append(parts, v.Property+"="+v.Status.String())
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	return strings.Join(parts, " ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// dfs is one schedule of the search: the prefix it replays, then the
// first choice at every point (with a bound on preemptions, the one that
// keeps the last process moving), noting each point's number of choices;
// with visited, the first state met again cuts it short (pruned: what
// follows is explored from where the state was first met).
type dfs struct {
	prefix   []int
	prefixNs []int  // how many choices each of prefix's points had when first met (nil: not known)
	diverged string // where a choice point of the prefix had another number of choices
	picks    []int
	ns       []int
	keeps    []int // each point's keep (Chooser.Choose)
	used     []int // the preemptions before each point
	made     []int // the simulator's choices, as a schedule says them
	visited  map[visit]int
	pruned   int // the choice at which the run met a state seen before; -1 none
	states   *int64
	all      bool
	bound    int // at most this many preemptions (or delays); -1 no bound
	delays   bool
}

// A branch is a schedule the search has still to run: the choices of its
// prefix, and how many there were at each point when the search met it
// (a run that meets another number has left the tree it searches).
type branch struct{ picks, ns []int }

// A visit is a state the search met, and, under a bound on preemptions,
// which choice kept the last process moving there (what a preemption is
// from then on); the search notes the fewest preemptions it met it with,
// and prunes a meeting with as many or more: what a schedule can do from
// there with fewer left was explored from the first.
type visit struct {
	state statehash.Sum
	keep  int
}

// cost is the preemptions that pick at point j takes: 1 if it switches
// away from a process that could go on; with delays, the delays: 1 if it
// is not the first choice taken there.
func (d *dfs) cost(j, pick int) int {
	return bounded(d.keeps[j], pick, d.delays)
}

// bounded is what choosing pick where keep keeps the last process moving
// costs a bound: 1 for a preemption, or, delays, for any but the first
// choice (keep, else 0).
func bounded(keep, pick int, delays bool) int {
	switch {
	case delays && pick != max(keep, 0):
		return 1
	case !delays && keep >= 0 && pick != keep:
		return 1
	}
	return 0
}

// branches are the schedules that branch off d's at its points from
// from to end (past the prefix it replayed, and short of where it was
// pruned): at each, every other choice there that the bound allows,
// each as the prefix of choices that leads to it, in the order the
// search stacks them.
func (d *dfs) branches(from, end int) []branch {
	var out []branch
	for j := end - 1; j >= from; j-- {
		for a := d.ns[j] - 1; a >= 1; a-- {
			pick := (d.picks[j] + a) % d.ns[j]
			if d.bound >= 0 && d.used[j]+d.cost(j, pick) > d.bound {
				continue
			}
			out = append(out, branch{append(slices.Clone(d.picks[:j]), pick), slices.Clone(d.ns[:j+1])})
		}
	}
	return out
}

func (d *dfs) Made(pick int) { d.made = append(d.made, pick) }

// Everything says whether the family must offer every choice, leaving
// out none it argues away (Exhaust.Everything).
func (d *dfs) Everything() bool { return d.all }

func (d *dfs) Choose(n, keep int, state func() statehash.Sum) int {
	i := len(d.picks)
	used := 0
	if i > 0 {
		used = d.used[i-1] + d.cost(i-1, d.picks[i-1])
	}
	if d.bound < 0 {
		keep = -1 // every choice is free; the first is taken first
	}
	d.keeps = append(d.keeps, keep)
	d.used = append(d.used, used)
	pick := max(keep, 0)
	if i < len(d.prefix) {
		if i < len(d.prefixNs) && d.prefixNs[i] != n && d.diverged == "" {
			d.diverged = fmt.Sprintf("replayed, the schedule's choice %d was among %d where it had been among %d: the run took another course on the same choices (an implementation whose steps depend on more than them)", i+1, n, d.prefixNs[i])
		}
		pick = d.prefix[i] % n
	} else if d.visited != nil && d.pruned < 0 && state != nil {
		v := visit{state(), keep}
		if least, ok := d.visited[v]; ok && least <= used {
			d.pruned = i
		} else {
			if !ok {
				*d.states++
			}
			d.visited[v] = used
		}
	}
	d.picks = append(d.picks, pick)
	d.ns = append(d.ns, n)
	return pick
}

// estimate is the number of schedules a plain enumeration of plans runs,
// by Knuth's estimator of a tree's size: along a schedule drawn at
// random, the product of the number of choices at each point, averaged
// over a few schedules of a sample of the plans.
func estimate(c Config, fam Exhaustive, plans []Plan, all bool, bound int, delays bool) (float64, error) {
	const sample, probes = 24, 4
	step := max(1, len(plans)/sample)
	total, n := 0.0, 0
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(plans); i += step {
		for range probes {
			r := &probe{rng: rng, product: 1, all: all, bound: bound, delays: delays}
			// An undecided run still made the choices it counted.
			var undecided *UndecidedError
			if _, err := c.Subject.Run(c.ctx, fam.Scheduled(plans[i], nil, r)); err != nil && !errors.As(err, &undecided) {
				return 0, fmt.Errorf("plan %d of the scope: %w", i+1, err)
			}
			total += math.Min(r.product, 1e300)
			n++
		}
	}
	return total / float64(n) * float64(len(plans)), nil
}

// probe is one random schedule of estimate's: under a bound on
// preemptions, once it has used them all, only the choice that keeps the
// last process moving is one.
type probe struct {
	rng     *rand.Rand
	product float64
	all     bool
	bound   int // -1 none
	delays  bool
	used    int
}

func (p *probe) Everything() bool { return p.all }
func (p *probe) Made(int)         {}

func (p *probe) Choose(n, keep int, _ func() statehash.Sum) int {
	if p.bound < 0 || (keep < 0 && !p.delays) {
		p.product *= float64(n)
		return p.rng.IntN(n)
	}
	if p.used >= p.bound {
		return max(keep, 0)
	}
	p.product *= float64(n)
	pick := p.rng.IntN(n)
	p.used += bounded(keep, pick, p.delays)
	return pick
}

// Subsets is every subset of at most k of places, in their order, the
// empty one first: the placements of at most k faults a family's
// Skeletons enumerate.
func Subsets[T any](places []T, k int) [][]T {
	out := [][]T{nil}
	var grow func(from int, cur []T)
	grow = func(from int, cur []T) {
		if len(cur) == k {
			return
		}
		for i := from; i < len(places); i++ {
			next := append(slices.Clone(cur), places[i])
			out = append(out, next)
			grow(i+1, next)
		}
	}
	grow(0, nil)
	return out
}

// maxSkeletonPlans is the most plans, before any fault, a lease family's
// scope may have.
const maxSkeletonPlans = 100000

// ClientScripts returns every choice of s's clients' scripts, the first
// client's varying slowest: client i with every script of 1 to its most
// steps (s.Ops, or s.EachOps[i]) of alphabet, shortest first. Times is
// how many plans each choice makes (each client's limit, say); a scope
// of more than 100000 plans before any fault is refused, naming --ops.
func ClientScripts[T any](alphabet []T, s ExhaustScope, times int) ([][][]T, error) {
	if s.EachOps != nil && len(s.EachOps) != s.Clients {
		return nil, fmt.Errorf("--ops %s: give one count per client (--clients %d), or one for all", s.OpsWords(), s.Clients)
	}
	n := float64(times)
	each := make([][][]T, s.Clients)
	for i := range each {
		most := s.Ops
		if s.EachOps != nil {
			most = s.EachOps[i]
		}
		if most < 1 {
			return nil, fmt.Errorf("--ops: an exhaustive search needs at least one operation per client, got %d", most)
		}
		level := [][]T{nil}
		for range most {
			var next [][]T
			for _, sc := range level {
				for _, a := range alphabet {
					next = append(next, append(slices.Clone(sc), a))
				}
			}
			each[i], level = append(each[i], next...), next
		}
		n *= float64(len(each[i]))
	}
	if n > maxSkeletonPlans {
		return nil, fmt.Errorf("--clients %d, --ops %s: %.3g plans before any fault, more than an exhaustive search can run (at most %d): narrow the scope", s.Clients, s.OpsWords(), n, maxSkeletonPlans)
	}
	return Choices(each), nil
}

// Choices is every choice of one script from each of each's lists (a
// process's scripts each), the first list's varying slowest.
func Choices[T any](each [][][]T) [][][]T {
	out := [][][]T{nil}
	for _, scripts := range each {
		var next [][][]T
		for _, prefix := range out {
			for _, sc := range scripts {
				next = append(next, append(slices.Clone(prefix), sc))
			}
		}
		out = next
	}
	return out
}

// OpsWords is s's --ops as given: one count, or one per client.
func (s ExhaustScope) OpsWords() string { return countsWords(s.Ops, s.EachOps) }

// countsWords is a count flag as given: one, or each, comma-separated.
func countsWords(one int, each []int) string {
	if each == nil {
		return fmt.Sprint(one)
	}
	return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(each)), ","), "[]")
}

// AdminOpsWords is s's --admin-ops as given: one count, or one per admin.
func (s ExhaustScope) AdminOpsWords() string { return countsWords(s.AdminOps, s.EachAdminOps) }

// AdminSteps says how many operations s's admins' scripts have: "0 to
// N", or each admin's, as "0 to 2 (admin), 0 to 1 (admin2)".
func (s ExhaustScope) AdminSteps() string {
	if s.EachAdminOps == nil {
		return fmt.Sprintf("0 to %d", s.AdminOps)
	}
	var w []string
	for i, n := range s.EachAdminOps {
		name := "admin"
		if i > 0 {
			name = fmt.Sprintf("admin%d", i+1)
		}
		w = append(w, fmt.Sprintf("0 to %d (%s)", n, name))
	}
	return strings.Join(w, ", ")
}

// Steps says how many steps s's clients' scripts have: "1 to N", or
// each client's, as "1 to 3 (c1), 1 to 1 (c2)".
func (s ExhaustScope) Steps() string {
	if s.EachOps == nil {
		return fmt.Sprintf("1 to %d", s.Ops)
	}
	var w []string
	for i, n := range s.EachOps {
		w = append(w, fmt.Sprintf("1 to %d (c%d)", n, i+1))
	}
	return strings.Join(w, ", ")
}

// Staggered is the clients' scripts cs, every one's but the first's
// after a sleep of ms (sleep makes the step), if ms is above 0
// (ExhaustScope.StaggerMs).
func Staggered[T any](cs [][]T, ms int, sleep func(ms int) T) [][]T {
	if ms <= 0 {
		return cs
	}
	out := make([][]T, len(cs))
	for i, sc := range cs {
		out[i] = sc
		if i > 0 {
			out[i] = append([]T{sleep(ms)}, sc...)
		}
	}
	return out
}

// Product is every sequence of n items of set, the first item varying
// slowest: the scripts (or the clients' scripts) of a scope.
func Product[T any](set []T, n int) [][]T {
	out := [][]T{nil}
	for range n {
		var next [][]T
		for _, prefix := range out {
			for _, x := range set {
				next = append(next, append(slices.Clone(prefix), x))
			}
		}
		out = next
	}
	return out
}

// FirstChoice is a Chooser that takes the first choice wherever the
// simulator has several: a plan's one run without the search (where its
// operations fall, for placing faults).
var FirstChoice Chooser = firstChoice{}

type firstChoice struct{}

func (firstChoice) Choose(int, int, func() statehash.Sum) int { return 0 }
func (firstChoice) Made(int)                                  {}
