package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"

	"github.com/lockprover/lockprover/histories/results"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
)

// proveFlags are prove's flags that every family takes, and the
// families' own flags (their targets': --amqp-url, --dsn, ...).
type proveFlags struct {
	runs                   int
	dur                    time.Duration
	seed                   uint64
	clients, ops, maxFault int
	eachOps                []int // --ops given as a count per client (an exhaustive search's)
	faults, kind, props    string
	modelName              string
	timeout, shrink        time.Duration
	target, impl           string
	options                string
	fam                    familyFlags
	setup                  *family.Setup // made by search
}

func (f *proveFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.runs, "runs", 1000, "number of plans to draw (ignored with --time)")
	fs.DurationVar(&f.dur, "time", 0, "draw plans for this long instead of --runs")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the plans drawn; 0 picks one (and prints it)")
	fs.IntVar(&f.clients, "clients", 3, "at most this many clients per plan")
	f.ops = 8
	fs.Var(opsCounts{most: &f.ops, each: &f.eachOps, least: 1}, "ops", "at most this many steps per client; with --exhaustive, one count for all or one per client (3,1)")
	fs.IntVar(&f.maxFault, "max-faults", 3, "at most this many faults per plan")
	fs.StringVar(&f.faults, "faults", "all", "comma-separated faults plans may hold (docs/faults.md lists each kind's); all; or none\n; amqp-locks': kill, pause, partition, force-close, restart-broker, drop-reply, admin-crash")
	fs.StringVar(&f.kind, "kind", histories.Semaphore, "lock kind: "+family.KindList())
	fs.StringVar(&f.props, "properties", "", "comma-separated properties whose violation counts; empty for all")
	fs.StringVar(&f.modelName, "model", "standard", "the model plans are judged by: standard, or one the kind's family offers (amqp-locks: strict, acquire-exact at every acquire)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "time budget of each linearizability check")
	fs.DurationVar(&f.shrink, "shrink-time", 30*time.Second, "time to spend minimising a counterexample")
	fs.StringVar(&f.target, "target", "sim", "where plans run: sim (the kind's simulator) or a real server: "+targetList())
	fs.StringVar(&f.impl, "impl", "", "prove an implementation that runs as processes speaking the protocol (docs/protocol.md) instead of the reference: amqp-locks' and redlock's on the simulator served on the wire, the others' on their real target\n (docs/served.md; amqp-locks: --target rabbitmq for a real broker; redlock: --target redis for real servers; the others: mariadb, postgres, redis; consul-semaphore: on the simulated Consul served on the wire, or --target consul or etcd)")
	fs.StringVar(&f.options, "options", "", "the reference's options as in plans, comma-separated: lazy_connect, channels=per-purpose, reconnect, ...\n; also plain_failure, scan_start=random, delete_order=ascending, overshoot=N, ... (amqp-locks: docs/amqp-locks.md#options-the-spec-allows)")
	f.fam.register(fs, family.Prove)
}

// search turns prove's flags into the search to run, reporting on stderr
// every flag that is wrong.
func (f *proveFlags) search(fs *flag.FlagSet, mutant, shard, out string, outf *outputFlags, stdout, stderr io.Writer) (prover.Search, bool) {
	var bad checks
	f.check(fs, &bad)
	outf.check(&bad)
	if !bad.report("prove", stderr) {
		return prover.Search{}, false
	}
	d := family.Of(f.kind)
	settings := f.fam.settings(fs, f.kind, mutant)
	settings.Impl, settings.Options, settings.Faults = f.impl, f.options, f.faults
	settings.Clients, settings.Ops, settings.MaxFaults = f.clients, f.ops, f.maxFault
	settings.Stdout, settings.Quiet, settings.Stderr = stdout, outf.quiet, stderr
	if given(fs, "target") {
		settings.Target = f.target
	}
	c := prover.Config{Timeout: f.timeout}
	var setup *family.Setup
	var err error
	c.Model, err = d.Model(f.modelName)
	if err == nil {
		err = f.fam.otherFamilies(fs, d, f.kind)
	}
	if err == nil {
		setup, err = d.Setup(settings)
	}
	if err == nil && given(fs, "properties") {
		c.Properties, err = parsePropertiesOf(f.props, d.Properties)
	}
	if err != nil {
		fmt.Fprintf(stderr, "prove: %v\n", err)
		return prover.Search{}, false
	}
	f.setup, f.target, c.Subject = setup, setup.Target, setup.Prove
	s := prover.Search{Config: c, Seed: f.seed, Shrink: f.shrink}
	if f.shrink == 0 {
		s.Shrink = time.Nanosecond // no shrinking
	}
	if s.Shard, s.Shards, err = parseShard(shard); err != nil {
		fmt.Fprintf(stderr, "prove: --shard: %v\n", err)
		return s, false
	}
	if err := checkOut(out); err != nil {
		fmt.Fprintf(stderr, "prove: --out: %v\n", err)
		return s, false
	}
	return s, true
}

// check lists what is wrong with the flags' values each on its own, for
// every family, so that all of it is reported at once.
func (f *proveFlags) check(fs *flag.FlagSet, bad *checks) {
	bad.oneOf("kind", f.kind, family.Kinds()...)
	bad.oneOf("model", f.modelName, family.ModelNames()...)
	bad.positive("clients", f.clients)
	bad.positive("ops", f.ops)
	bad.nonNegative("max-faults", f.maxFault)
	bad.duration("time", f.dur, true)
	bad.add(f.dur == 0 && f.runs < 1, "--runs must be at least 1, not %d", f.runs)
	bad.add(f.dur > 0 && given(fs, "runs"), "--runs and --time exclude each other: give one")
	bad.duration("timeout", f.timeout, false)
	bad.duration("shrink-time", f.shrink, true)
	bad.oneOf("target", f.target, family.TargetNames()...)
	bad.add(given(fs, "impl") && strings.TrimSpace(f.impl) == "", "--impl needs a command")
	bad.add(given(fs, "init-timeout") && f.impl == "", "--init-timeout is for an implementation's processes: give --impl")
	f.fam.check(bad)
}

// describe says what is proven and where, as prove's first line says it.
func (f *proveFlags) describe(mutant string) (what, where string) {
	what = "the reference"
	switch {
	case mutant != "":
		what = "mutant " + mutant
	case f.impl != "":
		what = fmt.Sprintf("%q", f.impl)
	}
	if f.options != "" {
		what += " with options " + f.options
	}
	return what, f.setup.Where
}

// start starts what the run needs before its first plan (the setup's
// Start: a server and an implementation tried, a private server started):
// code is the exit status and err what the summary records when the run
// cannot start, code is -1 when it can. An implementation that fails to
// start with the kind defaulted (kindGiven false) is told so.
func (f *proveFlags) start(ctx context.Context, kindGiven bool, stderr io.Writer) (code int, err error) {
	if f.setup.Start == nil {
		return -1, nil
	}
	err = f.setup.Start(ctx)
	var ie *family.ImplError
	switch {
	case err == nil:
		return -1, nil
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "prove: interrupted before the first plan")
		return exitInterrupted, nil
	case errors.As(err, &ie):
		kind := ""
		if ie.Kind != "" {
			kind = "--kind " + ie.Kind + " "
		}
		fmt.Fprintf(stderr, "prove: %v\n", err)
		if !kindGiven {
			fmt.Fprintf(stderr, "prove: %s\n", defaultedKind("proved", f.kind))
		}
		fmt.Fprintf(stderr, "(lockprover validate-impl %s--impl %s says what to fix)\n", kind, family.Quote(ie.Command))
	default:
		fmt.Fprintf(stderr, "prove: %v\n", err)
	}
	return exitUsage, err
}

// summarize records a search's outcome in the run's summary.
func summarize(sum *results.Summary, o *prover.Outcome, names, props []string, rate float64) {
	sum.Plans, sum.Operations, sum.Verdicts, sum.InconclusivePlans = o.Plans, o.Ops, o.Judged, o.Inconclusive
	sum.BatchSize = o.BatchSize
	for _, b := range o.Batches {
		sum.Batches = append(sum.Batches, results.Batch{Number: b.Number, Plans: b.Plans, Digest: b.Digest})
	}
	sum.Timings.ElapsedSeconds, sum.Timings.PlansPerSecond = o.Elapsed.Seconds(), rate
	cxOf := o.Found
	if cxOf == nil {
		cxOf = o.FirstInconclusive
	}
	sum.Properties = tally(o.Verdicts, names, props, cxOf)
	for i := range sum.Properties {
		p := &sum.Properties[i]
		p.Excused, p.FirstExcuse = o.Excused[p.Name], o.FirstExcuse[p.Name]
	}
	goal := map[prover.Interleaving]bool{}
	for _, g := range o.Goals {
		goal[g] = true
		if o.Interleavings[g] == 0 { // never reached: listed, with 0 plans
			sum.Interleavings = append(sum.Interleavings, results.Interleaving{Order: g.String(), Goal: true, Aimed: o.Aimed[g]})
		}
	}
	for i, n := range o.Interleavings {
		sum.Interleavings = append(sum.Interleavings, results.Interleaving{Order: i.String(), Plans: n, Goal: goal[i], Aimed: o.Aimed[i]})
	}
	sum.SteeredPlans = o.Steered
	results.SortInterleavings(sum.Interleavings)
}

// replayFlags are the flags a replay of this run's counterexample needs:
// the family's (its target, implementation, server), the check's time
// budget, and --init-timeout and --properties where given.
func (f *proveFlags) replayFlags(fs *flag.FlagSet) []string {
	replay := slices.Clone(f.setup.Replay)
	if f.setup.Real {
		// Real time varies from run to run: the printed replay says in how
		// many of three runs the counterexample fails again.
		replay = append(replay, "--times", "3")
	}
	if given(fs, "timeout") {
		replay = append(replay, "--timeout", f.timeout.String())
	}
	// What the run was told of its processes and its properties, the
	// replay is told too (a replay on a loaded machine needs the same
	// patience; one judged by all the properties would count others).
	for _, name := range []string{"init-timeout", "properties"} {
		if given(fs, name) {
			replay = append(replay, "--"+name, fs.Lookup(name).Value.String()) // checked: names and a duration, nothing to quote
		}
	}
	return replay
}

// parsePropertiesOf reads --properties: comma-separated names, each one of
// known.
func parsePropertiesOf(s string, known []string) ([]string, error) {
	var props []string
	for _, name := range strings.Split(s, ",") {
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("--properties: unknown property %q (want some of %s)", name, strings.Join(known, ", "))
		}
		props = append(props, name)
	}
	return props, nil
}

func known(s string, list []string) bool { return slices.Contains(list, s) }

// proveUsage is prove's help beside its flags' usages; the kinds,
// targets and models are the registered families'.
func proveUsage() verbHelp {
	return verbHelp{verb: "prove", about: `Draws plans (admins, clients, faults, schedules) and proves the target on them;
by default the reference implementation on the simulator. On a violation it
shrinks the plan, writes the counterexample under --out and exits 1. A real
server is tried once before the first plan: one that cannot be used (refused,
a wrong password, not what it should be) is named at once, exit 2.
Exit status: 0 every property held, 1 a violation, 2 usage or bad input,
3 inconclusive (a check ran out of time), 130 interrupted.`, sections: []section{
		{title: "Every run", flags: "[--kind KIND] [--runs N | --time D] [--seed N] [--clients N] [--ops N[,N...]] [--max-faults N] " +
			"[--faults F,...|all|none] [--properties P,...] [--model " + strings.Join(family.ModelNames(), "|") + "] [--timeout D] [--shrink-time D] " +
			"[--options K=V,...] [--mutant NAME] [--impl COMMAND [--init-timeout D]] [--parallel N] [--shard i/n|auto]"},
		{title: "Output", flags: "[--out DIR] [--json FILE] [--junit FILE] [--quiet]"},
		{title: "Real servers (--target other than sim)", flags: "[--target TARGET]", servers: true},
		{title: "Exhaustive search (--exhaustive)", flags: "[--exhaustive] [--admins N] [--admin-ops N[,N...]] [--max-schedules N] [--no-reduction] " +
			"[--preemptions N | --delays N] [--sleep D] [--heal D] [--stagger D] [--ttls D[,D...]]"},
	}}
}

// runProve is `lockprover prove`: it draws plans, proves the target on
// them, and writes a counterexample (and the summaries CI asks for) when a
// property breaks.
func runProve(args []string, stdout, stderr io.Writer) int {
	p, code, ok := parseProveFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	term := stdout // progress on a terminal is rewritten in place
	stdout = p.outf.tee(stdout)
	p.sum = &results.Summary{Target: p.f.target, Config: configOf(p.fs), RequestedPlans: p.f.runs, Timings: results.Timings{Started: time.Now()}}
	if p.f.dur > 0 {
		p.sum.RequestedPlans = 0
	}
	if p.s.Shards > 1 || p.shard != "" {
		p.sum.Shard = &results.Shard{Index: p.s.Shard + 1, Count: p.s.Shards}
	}
	if p.s.Seed == 0 {
		p.s.Seed = rand.Uint64()
	}
	if _, ok := p.f.setup.Prove.(prover.Exhaustive); p.ex.on && !ok {
		// Refused before anything starts (a private server).
		err := fmt.Errorf("--exhaustive: --kind %s: its family enumerates no scope yet (docs/exhaustive.md)", p.f.kind)
		fmt.Fprintf(stderr, "prove: %v\n", err)
		return p.finish(exitUsage, err, stderr)
	}
	what, where := p.f.describe(p.mutant)
	p.sum.Implementation, p.sum.Seed = what, strconv.FormatUint(p.s.Seed, 10)
	p.sum.Server = p.f.setup.Server
	switch {
	case p.outf.quiet:
	case p.ex.on:
		fmt.Fprintf(stdout, "searching every schedule of %s on %s\n", what, where)
	default:
		fmt.Fprintf(stdout, "proving %s on %s, seed %d\n", what, where, p.s.Seed)
	}
	ctx, stop := interrupts(stderr, p.f.setup.Interrupt)
	defer stop()
	if p.f.setup.Stop != nil {
		// Before stop, which lists what an interrupted run left behind:
		// what Stop removes is not.
		defer p.f.setup.Stop()
	}
	if code, err := p.f.start(ctx, given(p.fs, "kind"), stderr); code >= 0 {
		return p.finish(code, err, stderr)
	}
	p.s.Config.Subject = p.f.setup.Prove // as Start left it
	if p.ex.on {
		return p.exhaust(ctx, term, stdout, stderr)
	}
	return p.prove(ctx, term, stdout, stderr)
}

// A proveRun is one run of prove: its flags, the search they make, and the
// summary the run fills in.
type proveRun struct {
	fs         *flag.FlagSet
	f          proveFlags
	out, shard string // --out and --shard
	parallel   int    // --parallel
	mutant     string // --mutant
	outf       outputFlags
	ex         exhaustFlags // --exhaustive and its own flags
	s          prover.Search
	sum        *results.Summary
}

// parseProveFlags reads prove's flags and turns them into the search to
// run: ok false with the exit status when the run must not start.
func parseProveFlags(args []string, stdout, stderr io.Writer) (p *proveRun, code int, ok bool) {
	fs := newFlags(proveUsage(), stderr)
	p = &proveRun{fs: fs}
	p.f.register(fs)
	mutant := fs.String("mutant", "", "prove this mutant of the reference instead (see lockprover mutants)")
	fs.StringVar(&p.out, "out", "lockprover-out", "directory for a counterexample")
	fs.IntVar(&p.parallel, "parallel", 0, "plans run at once, each on a lock of its own: 0 means one per CPU on the simulator, four per CPU on a real target (docs/ci.md#plans-on-every-core)\n; on the simulator, the same plans and the same first counterexample whatever the number; on a real target, each plan also with processes and proxies of its own, where concurrency slows each plan")
	fs.StringVar(&p.shard, "shard", "", "i/n: run the i-th of n shares of the seed's plans (i from 1; --runs counts them all); auto: the shard from the environment\n (LOCKPROVER_SHARD_INDEX and _COUNT, a Kubernetes Indexed Job's JOB_COMPLETION_INDEX with JOB_COMPLETIONS, GitLab's CI_NODE_INDEX and CI_NODE_TOTAL; docs/ci.md#shards-on-many-machines)")
	p.outf.register(fs, true)
	p.ex.register(fs)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return nil, code, false
	}
	if !noArgs("prove", pos, stderr) {
		return nil, exitUsage, false
	}
	p.mutant = *mutant
	if p.s, ok = p.f.search(fs, *mutant, p.shard, p.out, &p.outf, stdout, stderr); !ok {
		return nil, exitUsage, false
	}
	var bad checks
	bad.nonNegative("parallel", p.parallel)
	p.ex.check(fs, &p.f, &bad)
	if !bad.report("prove", stderr) {
		return nil, exitUsage, false
	}
	p.s.Parallel = p.parallel
	return p, exitOK, true
}

// finish records err, if any, as the run's failure, writes the summaries
// asked for and returns the exit status (2 if they could not be written).
func (p *proveRun) finish(code int, err error, stderr io.Writer) int {
	if err != nil {
		p.sum.Result, p.sum.Error = results.Failed, err.Error()
	}
	return p.outf.write("prove", p.sum, code, stderr)
}

// prove runs the search (for --time from now on, else for --runs plans),
// showing progress on term unless --quiet, and reports how it ended.
func (p *proveRun) prove(ctx context.Context, term, stdout, stderr io.Writer) int {
	s := p.s
	if p.f.dur > 0 {
		s.Until = time.Now().Add(p.f.dur) // drawing starts now
	} else {
		s.Plans = p.f.runs
	}
	status := newStatus(term)
	if !p.outf.quiet {
		s.Progress = status.update
	}
	s.Context = ctx
	o, err := s.Run()
	status.done()
	if err != nil {
		fmt.Fprintf(stderr, "prove: %v\n", err)
		return p.finish(exitUsage, err, stderr)
	}
	rate := 0.0
	if o.Elapsed > 0 {
		rate = float64(o.Plans) / o.Elapsed.Seconds()
	}
	fmt.Fprintf(stdout, "%d plans, %d verdicts, %.1fs (%s plans/s)\n", o.Plans, o.Judged, o.Elapsed.Seconds(), perSecond(rate))
	if !p.outf.quiet {
		printInterleavings(stdout, o)
	}
	summarize(p.sum, o, family.Of(p.f.kind).Properties, s.Config.Properties, rate)
	printExcused(stdout, p.sum.Properties, o.Plans, p.outf.quiet)
	replay := p.f.replayFlags(p.fs)
	return p.finish(p.f.conclude(o, p.out, replay, p.sum, stdout, stderr), nil, stderr)
}

// conclude reports how a search ended (a counterexample, an interrupt,
// inconclusive plans, or every property held) and returns the exit status.
func (f *proveFlags) conclude(o *prover.Outcome, out string, replay []string, sum *results.Summary, stdout, stderr io.Writer) int {
	switch {
	case o.Found != nil:
		code, cx := reportCounterexample(o.Found, out, replay, stdout, stderr)
		sum.Counterexample = cx
		cx.Batch, cx.Index = o.FoundBatch, o.FoundIndex
		if o.Interrupted {
			fmt.Fprintln(stderr, "prove: interrupted while shrinking: the counterexample may not be minimal")
			return exitInterrupted
		}
		return code
	case o.Interrupted:
		fmt.Fprintf(stderr, "prove: interrupted after %d plans; nothing violated so far\n", o.Plans)
		return exitInterrupted
	case o.Inconclusive > 0:
		fmt.Fprintf(stdout, "no violation, but %d of %d plans were inconclusive: a linearizability check ran out of time (raise --timeout)\n", o.Inconclusive, o.Plans)
		_, sum.Counterexample = reportCounterexample(o.FirstInconclusive, out, replay, stdout, stderr)
		return exitInconclusive
	}
	printHeld(stdout, sum.Properties)
	return exitOK
}

// printHeld says that every property held, naming those judged on no
// plan at all (each plan's verdict "not judged": a lock without fences
// has no fencing to judge): those did not hold, they were never tried.
func printHeld(w io.Writer, props []results.Property) {
	var none []string
	for _, p := range props {
		if p.NotJudged > 0 && p.Pass+p.Fail+p.Inconclusive == 0 {
			none = append(none, p.Name)
		}
	}
	if len(none) == 0 {
		fmt.Fprintln(w, "every property held")
		return
	}
	fmt.Fprintf(w, "every property held that was judged; not judged on any plan: %s (nothing in the plans to judge it by)\n", strings.Join(none, ", "))
}

// checkOut checks, before any plan runs, that a counterexample can be
// written under dir: it is a directory or can be made one.
func checkOut(dir string) error {
	if dir == "" {
		return errors.New("empty: name a directory")
	}
	p := dir
	for {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				if p == dir {
					return fmt.Errorf("%s is a file, not a directory", dir)
				}
				return fmt.Errorf("cannot make %s: %s is a file", dir, p)
			}
			f, err := os.CreateTemp(p, ".lockprover-write-test-*")
			if err != nil {
				return fmt.Errorf("cannot write in %s: %v", p, errors.Unwrap(err))
			}
			f.Close()
			os.Remove(f.Name())
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return fmt.Errorf("cannot make %s", dir)
		}
		p = parent
	}
}

func parseShard(s string) (int, int, error) {
	if s == "" {
		return 0, 1, nil
	}
	if s == "auto" {
		return shardFromEnv()
	}
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(i)
	b, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || b < 1 || a < 1 || a > b {
		return 0, 0, fmt.Errorf("want i/n with 1 <= i <= n, or auto, got %q", s)
	}
	return a - 1, b, nil
}

// reportCounterexample prints cx's summary and how to replay it, and
// writes it under dir; if writing fails, the plan is printed instead, so
// that it is never lost. The status is 1, or 3 if the property could not
// be decided; the summary's record of it says where it went (no paths if
// it could not be written). Under GitHub Actions the plan is annotated.
func reportCounterexample(cx *prover.Counterexample, dir string, replayFlags []string, stdout, stderr io.Writer) (int, *results.Counterexample) {
	code := exitViolation
	if cx.Inconclusive {
		code = exitInconclusive
	}
	rec := &results.Counterexample{Property: cx.Property, Inconclusive: cx.Inconclusive, Explanation: explanation(cx), Batch: -1, Index: -1}
	fmt.Fprintf(stdout, "\n%s", cx.Summary())
	for _, pr := range cx.Result.Evidence.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", pr)
	}
	dir, err := freshDir(dir)
	replay := strings.Join(append(append([]string{"lockprover replay"}, replayFlags...), shellWord(filepath.Join(dir, "plan.json"))), " ")
	if err == nil {
		cx.Replay = replay // index.html shows the command printed here
		err = cx.Write(dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "writing the counterexample: %v\n", err)
		fmt.Fprintln(stdout, "the plan (save it as plan.json to replay it):")
		cx.Plan.Write(stdout)
		return code, rec
	}
	what := "counterexample"
	if cx.Inconclusive {
		what = "inconclusive plan"
	}
	fmt.Fprintf(stdout, "%s: %s\nreplay: %s\n", what, dir, replay)
	rec.Dir, rec.Replay = dir, replay
	rec.Plan, rec.History = filepath.Join(dir, "plan.json"), filepath.Join(dir, "history.jsonl")
	rec.Report, rec.Summary = filepath.Join(dir, "index.html"), filepath.Join(dir, "summary.txt")
	annotate(stdout, rec.Plan, 0, fmt.Sprintf("%s %s", cx.Property, map[bool]string{false: "violated", true: "inconclusive"}[cx.Inconclusive]), rec.Explanation+"\nreplay: "+replay)
	return code, rec
}

// explanation is what the counterexample's failed (or undecided) verdicts
// say, one per line.
func explanation(cx *prover.Counterexample) string {
	var lines []string
	for _, v := range cx.Report.Verdicts {
		if v.Property == cx.Property && (v.Status == verdict.Fail || v.Status == verdict.Inconclusive) {
			lines = append(lines, v.Detail)
		}
	}
	return strings.Join(lines, "\n")
}

// shellWord quotes s for a shell only if it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return family.Quote(s)
}

// freshDir returns dir if it is missing or empty, else the first free
// dir/counterexample-N: a counterexample never overwrites files.
func freshDir(dir string) (string, error) {
	for n := 1; ; n++ {
		d := dir
		if n > 1 {
			d = filepath.Join(dir, fmt.Sprintf("counterexample-%d", n))
		}
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
			return d, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// status shows progress: a line rewritten in place on a terminal, a plain
// line every ten seconds otherwise.
type status struct {
	w        io.Writer
	tty      bool
	start    time.Time
	last     time.Time
	plans, n int
}

func newStatus(w io.Writer) *status {
	s := &status{w: w, start: time.Now(), last: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	return s
}

func (s *status) update(plans, judged int) {
	s.plans, s.n = plans, judged
	every := 10 * time.Second
	if s.tty {
		every = 200 * time.Millisecond
	}
	if time.Since(s.last) < every {
		return
	}
	s.last = time.Now()
	el := time.Since(s.start)
	line := fmt.Sprintf("plans %d  plans/s %s  verdicts %d  elapsed %s", plans, perSecond(float64(plans)/el.Seconds()), judged, el.Round(time.Second))
	if s.tty {
		fmt.Fprintf(s.w, "\r%s ", line)
	} else {
		fmt.Fprintln(s.w, line)
	}
}

func (s *status) done() {
	if s.tty && time.Since(s.start) > 200*time.Millisecond {
		fmt.Fprintln(s.w)
	}
}

// perSecond renders a rate with one decimal, or two significant digits
// under one a second (a cluster's plans take 20 s: "0.045", not "0.0").
func perSecond(r float64) string {
	if r > 0 && r < 1 {
		return strconv.FormatFloat(r, 'g', 2, 64)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}
