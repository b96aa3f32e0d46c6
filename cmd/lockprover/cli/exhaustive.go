package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
)

// exhaustFlags are prove's flags of an exhaustive search (--exhaustive).
type exhaustFlags struct {
	on           bool
	adminOps     int
	eachAdminOps []int // --admin-ops given as a count per admin
	admins       int
	maxSchedules float64
	noReduction  bool
	preemptions  int
	delays       int
	sleep        time.Duration
	heal         time.Duration
	stagger      time.Duration
	ttls         durations
}

func (e *exhaustFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&e.on, "exhaustive", false, "run every plan of the scope (--clients, --ops, --admin-ops, --max-faults, --faults) under every schedule the simulator can produce (docs/exhaustive.md)\n, instead of drawing plans, and report the shortest counterexample or that every property holds within the scope")
	fs.Var(opsCounts{most: &e.adminOps, each: &e.eachAdminOps, least: 0, who: "admin"}, "admin-ops", "at most this many operations for the admin (kinds with admins only); one count for all or one per admin (2,1)")
	fs.IntVar(&e.admins, "admins", 1, "this many admins (kinds with admins only), the first creating the semaphore")
	fs.Float64Var(&e.maxSchedules, "max-schedules", 1e6, "refuse, before it starts, a search estimated to run more schedules than this, unless --time bounds it")
	fs.IntVar(&e.preemptions, "preemptions", 0, "run every schedule with at most this many preemptions, instead of every schedule (docs/exhaustive.md)\n; a preemption is a switch away from a process that could go on moving")
	fs.IntVar(&e.delays, "delays", 0, "run every schedule with at most this many delays, instead of every schedule (docs/exhaustive.md)\n; a delay is a choice other than the first the search takes: a preemption, or, where the process that moved last cannot go on, any but the first process")
	fs.DurationVar(&e.sleep, "sleep", 0, "also a sleep of this long (whole milliseconds) as a step of every client's (and admin's) script, beside the family's own")
	fs.DurationVar(&e.heal, "heal", 0, "every pause and partition may also end this long (whole milliseconds) after it struck, beside the lengths the family gives")
	fs.DurationVar(&e.stagger, "stagger", 0, "amqp-locks and redlock kinds: start every client but the first this long (whole milliseconds) late\n, a sleep before its script that is no step of it (docs/exhaustive.md)")
	fs.Var(&e.ttls, "ttls", "priority-redlock: each client's own ttl, one per client, comma-separated (1s,100ms), whole milliseconds")
	fs.BoolVar(&e.noReduction, "no-reduction", false, "run every schedule, without pruning those that reach a state already explored, and with every choice of the nemesis's")
}

// check lists what is wrong with the exhaustive flags, given prove's.
func (e *exhaustFlags) check(fs *flag.FlagSet, f *proveFlags, bad *checks) {
	for _, name := range []string{"admin-ops", "admins", "max-schedules", "no-reduction", "preemptions", "delays", "sleep", "heal", "stagger", "ttls"} {
		bad.add(given(fs, name) && !e.on, "--%s is for an exhaustive search: give --exhaustive", name)
	}
	bad.add(f.eachOps != nil && !e.on, "--ops with a count per client is for an exhaustive search: give --exhaustive, or one count")
	if !e.on {
		return
	}
	bad.add(f.eachOps != nil && len(f.eachOps) != f.clients, "--ops %s: give one count per client (--clients %d), or one for all", opsCounts{most: &f.ops, each: &f.eachOps}, f.clients)
	bad.add(e.eachAdminOps != nil && len(e.eachAdminOps) != e.admins, "--admin-ops %s: give one count per admin (--admins %d), or one for all", opsCounts{most: &e.adminOps, each: &e.eachAdminOps}, e.admins)
	bad.positive("admins", e.admins)
	bad.nonNegative("preemptions", e.preemptions)
	bad.nonNegative("delays", e.delays)
	bad.add(given(fs, "preemptions") && given(fs, "delays"), "--preemptions and --delays are two bounds of one search: give one")
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"sleep", e.sleep}, {"heal", e.heal}, {"stagger", e.stagger}} {
		bad.add(given(fs, d.name) && (d.v < time.Millisecond || d.v%time.Millisecond != 0), "--%s %v: give a length of whole milliseconds, at least 1ms", d.name, d.v)
	}
	bad.add(e.maxSchedules < 1, "--max-schedules must be at least 1, not %g", e.maxSchedules)
	bad.add(given(fs, "runs"), "--runs draws plans: an exhaustive search runs every plan of its scope (bound its time with --time)")
	bad.add(given(fs, "seed"), "--seed draws plans: an exhaustive search draws none")
	bad.add(given(fs, "target") && f.target != "sim", "--exhaustive runs on the simulator only (--target sim, the default)")
	if fam := family.Of(f.kind); given(fs, "impl") && fam != nil && fam.Name != "amqp-locks" {
		bad.add(true, "--exhaustive --impl searches an amqp-locks implementation on the simulated broker served on the wire; a %s search is of the reference (or --mutant) only", fam.Name)
	}
}

// exhaust runs an exhaustive search and reports it: what it covered, and
// the shortest counterexample or that every property held in the scope.
func (p *proveRun) exhaust(ctx context.Context, term, stdout, stderr io.Writer) int {
	e := p.search(ctx, stderr)
	o, err := e.Run()
	if err != nil {
		fmt.Fprintf(stderr, "prove: %v\n", err)
		if errors.Is(err, prover.ErrScopeTooLarge) {
			fmt.Fprintf(stderr, "prove: the scope: %s\n", o.Scope)
		}
		return p.finish(exitUsage, err, stderr)
	}
	return p.reportSearch(e, o, stdout, stderr)
}

// search is the exhaustive search prove's flags ask for, its progress
// told on stderr unless quiet.
func (p *proveRun) search(ctx context.Context, stderr io.Writer) prover.Exhaust {
	// An implementation in processes has no state the search can see to
	// prune at (docs/exhaustive.md, "An implementation's search").
	e := prover.Exhaust{Config: p.s.Config, Reduce: !p.ex.noReduction && p.f.impl == "", Everything: p.ex.noReduction, MaxSchedules: p.ex.maxSchedules, Context: ctx,
		Scope: prover.ExhaustScope{Clients: p.f.clients, Ops: p.f.ops, AdminOps: p.ex.adminOps, MaxFaults: p.f.maxFault}}
	if given(p.fs, "admins") {
		e.Scope.Admins = p.ex.admins
	}
	if given(p.fs, "preemptions") {
		e.Scope.Bounded, e.Scope.Preemptions = true, p.ex.preemptions
	}
	if given(p.fs, "delays") {
		e.Scope.Bounded, e.Scope.Preemptions, e.Scope.Delays = true, p.ex.delays, true
	}
	if !given(p.fs, "max-faults") {
		e.Scope.MaxFaults = 0
	}
	if !given(p.fs, "clients") {
		e.Scope.Clients = 1
	}
	if !given(p.fs, "ops") {
		e.Scope.Ops = 1
	}
	e.Scope.EachOps, e.Scope.EachAdminOps = p.f.eachOps, p.ex.eachAdminOps
	for _, d := range p.ex.ttls {
		e.Scope.TTLsMs = append(e.Scope.TTLsMs, int(d/time.Millisecond))
	}
	e.Scope.SleepMs, e.Scope.HealMs, e.Scope.StaggerMs = int(p.ex.sleep/time.Millisecond), int(p.ex.heal/time.Millisecond), int(p.ex.stagger/time.Millisecond)
	if p.f.dur > 0 {
		e.Until = time.Now().Add(p.f.dur)
	}
	if !p.outf.quiet {
		e.Progress = func(o prover.ExhaustOutcome) {
			fmt.Fprintf(stderr, "schedules %d  plans %d/%d  states %d  pruned %d  elapsed %s\n", o.Schedules, o.PlansDone, o.Plans, o.States, o.Pruned, o.Elapsed.Round(time.Second))
		}
	}
	return e
}

// reportSearch says what search e covered (o), and the shortest
// counterexample, or that every property held within its scope, or why
// it cannot say so; it returns prove's exit code.
func (p *proveRun) reportSearch(e prover.Exhaust, o *prover.ExhaustOutcome, stdout, stderr io.Writer) int {
	states := "states"
	if !e.Reduce {
		states = "choice points"
	}
	fmt.Fprintf(stdout, "%d plans, %d schedules, %d %s, %d pruned, %.1fs (%.0f schedules/s, %.0f %s/s)\n", o.PlansDone, o.Schedules, o.States, states, o.Pruned,
		o.Elapsed.Seconds(), rate(o.Schedules, o.Elapsed), rate(o.States, o.Elapsed), states)
	// The summary (--json, --junit) has no fields of its own for a search:
	// its plans are those searched whole, and no seed drew them.
	p.sum.Plans, p.sum.Timings.ElapsedSeconds = o.PlansDone, o.Elapsed.Seconds()
	p.sum.Seed, p.sum.RequestedPlans = "", 0
	if o.Found != nil {
		shortest := "the shortest counterexample"
		if o.Stopped != "" {
			shortest = fmt.Sprintf("a counterexample (%s before the search ended: a shorter one may exist)", o.Stopped)
		}
		fmt.Fprintf(stdout, "%s: %s\n", shortest, o.Found.Plan.Brief())
		code, cx := reportCounterexample(o.Found, p.out, p.f.replayFlags(p.fs), stdout, stderr)
		p.sum.Counterexample = cx
		return p.finish(code, nil, stderr)
	}
	if o.Undecided > 0 {
		fmt.Fprintf(stderr, "prove: %d of the %d schedules undecided, nothing searched below them; the first: %s\n", o.Undecided, o.Schedules, o.FirstUndecided)
	}
	if o.Stopped != "" {
		fmt.Fprintf(stderr, "prove: %s after %d of %d plans (and part of the next): nothing violated so far within: %s\n", o.Stopped, o.PlansDone, o.Plans, o.Scope)
		if o.Stopped == "interrupted" {
			return p.finish(exitInterrupted, nil, stderr)
		}
		return p.finish(exitOK, nil, stderr)
	}
	if o.Undecided > 0 {
		fmt.Fprintf(stdout, "nothing violated, but the scope was not searched whole (%d schedules undecided): %s\n", o.Undecided, o.Scope)
		return p.finish(exitInconclusive, nil, stderr)
	}
	fmt.Fprintf(stdout, "every property holds for every schedule within: %s\n", o.Scope)
	return p.finish(exitOK, nil, stderr)
}

// opsCounts is --ops (or --admin-ops): one count for every client (or
// admin), or one each, comma-separated (an exhaustive search's); most is
// the largest. A count is at least least (--ops: 1), and who says whose
// counts they are in an error ("" for a client's).
type opsCounts struct {
	most  *int
	each  *[]int
	least int
	who   string
}

func (o opsCounts) String() string {
	if o.most == nil {
		return ""
	}
	if *o.each == nil {
		return strconv.Itoa(*o.most)
	}
	w := make([]string, len(*o.each))
	for i, n := range *o.each {
		w[i] = strconv.Itoa(n)
	}
	return strings.Join(w, ",")
}

func (o opsCounts) Set(s string) error {
	who := o.who
	if who == "" {
		who = "client"
	}
	var each []int
	for _, w := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < o.least {
			return fmt.Errorf("want a count of at least %d, or one per %s, comma-separated", o.least, who)
		}
		each = append(each, n)
	}
	*o.most, *o.each = slices.Max(each), nil
	if len(each) > 1 {
		*o.each = each
	}
	return nil
}

// durations is --ttls: lengths of whole milliseconds, at least 1ms each,
// comma-separated.
type durations []time.Duration

func (d *durations) String() string {
	w := make([]string, len(*d))
	for i, x := range *d {
		w[i] = x.String()
	}
	return strings.Join(w, ",")
}

func (d *durations) Set(s string) error {
	var out durations
	for _, w := range strings.Split(s, ",") {
		x, err := time.ParseDuration(strings.TrimSpace(w))
		if err != nil || x < time.Millisecond || x%time.Millisecond != 0 {
			return fmt.Errorf("want lengths of whole milliseconds, at least 1ms each, comma-separated")
		}
		out = append(out, x)
	}
	*d = out
	return nil
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
