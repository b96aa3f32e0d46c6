package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/results"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// writeHistory writes h to path, unless path is "".
func writeHistory(path string, h []histories.Event) error {
	if path == "" {
		return nil
	}
	var b bytes.Buffer
	histories.Write(&b, h)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// summarizeReplay records a replay in its summary: its counts, its
// properties, and the first counted verdict as bad as the worst as its
// counterexample (annotated for CI logs).
func summarizeReplay(sum *results.Summary, stdout io.Writer, res *prover.Result, r *verdict.Report, worst verdict.Status, counted []string, path, history string) {
	sum.Plans, sum.Operations, sum.Verdicts = 1, len(res.History)/2, len(r.Verdicts)
	sum.Properties = reportProperties(r, "", counted)
	for _, v := range r.Verdicts {
		if (counted == nil || known(v.Property, counted)) && v.Status == worst && worst != verdict.Pass && sum.Counterexample == nil {
			sum.Counterexample = &results.Counterexample{Property: v.Property, Inconclusive: worst == verdict.Inconclusive, Explanation: v.Detail,
				Dir: filepath.Dir(path), Plan: path, History: history, Replay: "lockprover replay " + shellWord(path), Batch: -1, Index: -1}
			annotate(stdout, path, 0, fmt.Sprintf("%s %s (lock %s)", v.Property, v.Status, v.Lock), v.Detail)
		}
	}
}

// replayJudging is how a replay judges: the plan's model and counted
// properties unless the flags say otherwise; it also checks that --history
// names a file that does not exist yet.
func replayJudging(fs *flag.FlagSet, rp *replayRun, modelName, props, history string) (judged string, counted []string, err error) {
	judged = rp.header.Model
	if given(fs, "model") {
		judged = modelName
	}
	if judged, err = family.Of(rp.header.Kind).Model(judged); err != nil {
		return "", nil, err
	}
	counted = rp.header.Properties
	if given(fs, "properties") {
		if counted, err = parsePropertiesOf(props, rp.propertyNames); err != nil {
			return "", nil, err
		}
	}
	if history != "" {
		if _, err := os.Stat(history); err == nil {
			return "", nil, fmt.Errorf("--history: %s exists; not overwriting it", history)
		}
		if err := checkOut(filepath.Dir(history)); err != nil {
			return "", nil, fmt.Errorf("--history: %v", err)
		}
	}
	return judged, counted, nil
}

// A replayRun is a plan read back, ready to run again as its family runs
// it.
type replayRun struct {
	plan          prover.Plan
	header        family.Header // how the plan was judged
	propertyNames []string      // the family's properties
	setup         *family.Setup
}

// judgedWorst is the worst status among the counted properties of r,
// saying how the plan was judged when that is not the default, and what
// an inconclusive or quiet pass means.
func judgedWorst(stdout io.Writer, r *verdict.Report, counted []string, judged string, quiet bool) verdict.Status {
	worst := verdict.Pass
	for _, v := range r.Verdicts {
		if (counted == nil || known(v.Property, counted)) && (v.Status == verdict.Fail || v.Status == verdict.Inconclusive) {
			worst = max(worst, v.Status)
		}
	}
	if counted != nil || judged != "" {
		how := "the standard model"
		if judged != "" {
			how = "the " + judged + " model"
		}
		if counted != nil {
			how += ", counting " + strings.Join(counted, ", ")
		}
		fmt.Fprintf(stdout, "judged with %s: %s\n", how, worst)
	}
	if worst == verdict.Inconclusive {
		fmt.Fprintln(stdout, "inconclusive: a linearizability check ran out of time (raise --timeout); nothing was shown violated")
	}
	if quiet && worst == verdict.Pass {
		fmt.Fprintln(stdout, "every property held")
	}
	return worst
}

// replayUsage is replay's help beside its flags' usages; the targets
// and models are the registered families'.
func replayUsage() verbHelp {
	return verbHelp{verb: "replay", args: "PLAN", about: `Runs a saved plan again and checks its history. On the simulator the history
is the same, byte for byte. The plan is judged as it was when it was found:
its model and properties, unless --model or --properties say otherwise.
PLAN is a plan.json, as prove writes one with each counterexample; a
recorded history is judged by lockprover check instead.
Exit status: 0 every property held, 1 a violation, 2 usage or bad input,
3 inconclusive (a check ran out of time), 130 interrupted.`, sections: []section{
		{title: "Every run", flags: "[--mutant NAME|reference] [--model " + strings.Join(family.ModelNames(), "|") + "] [--properties P,...] [--timeout D] " +
			"[--impl COMMAND [--init-timeout D]] [--times N] [--history FILE] [--trace]"},
		{title: "Output", flags: "[--json FILE] [--junit FILE] [--quiet]"},
		{title: "Real servers (--target other than sim)", flags: "[--target TARGET]", servers: true},
	}}
}

// runReplay is `lockprover replay`: it runs a saved plan again, on the
// simulator or a real broker, and judges the history as the plan was judged
// when it was found.
func runReplay(args []string, stdout, stderr io.Writer) int {
	ra, code, ok := parseReplayFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	stdout = ra.outf.tee(stdout)
	rp, err := ra.open(stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	sum := &results.Summary{Target: rp.setup.Target, Timings: results.Timings{Started: time.Now()}}
	judged, counted, err := replayJudging(ra.fs, rp, ra.modelName, ra.props, ra.history)
	if err != nil {
		if rp.setup.Stop != nil {
			rp.setup.Stop()
		}
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	ctx, stop := interrupts(stderr, rp.setup.Interrupt)
	defer stop()
	if rp.setup.Stop != nil {
		// Before stop, which lists what an interrupted run left behind:
		// what Stop removes is not.
		defer rp.setup.Stop()
	}
	sum.Implementation, sum.Server = rp.setup.What, rp.setup.Server
	var res *prover.Result
	if rp.setup.Start != nil {
		err = rp.setup.Start(ctx)
	}
	var reproduced int
	var same sameness
	if err == nil {
		res, reproduced, same, err = ra.runTimes(ctx, rp, judged, counted)
	}
	if err == nil && ra.times > 1 {
		fmt.Fprintf(stdout, "failed in %d of %d runs; the report below is of the %s\n", reproduced, ra.times,
			map[bool]string{true: "first that failed", false: "last"}[reproduced > 0])
		fmt.Fprintf(stdout, "the first run's history, times and all, in %d of %d runs%s\n", same.all(), ra.times, same.says())
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "replay: interrupted")
		return ra.outf.write("replay", sum, exitInterrupted, stderr)
	}
	var ue *family.UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		sum.Result, sum.Error = results.Failed, err.Error()
		return ra.outf.write("replay", sum, exitUsage, stderr)
	}
	if err := writeHistory(ra.history, res.History); err != nil {
		fmt.Fprintf(stderr, "replay: --history: %v\n", err)
		return exitUsage
	}
	return ra.judge(rp, res, judged, counted, sum, stdout, stderr)
}

// replayArgs are replay's flags, checked, and its plan file.
type replayArgs struct {
	fs                                        *flag.FlagSet // to tell the flags given from defaults
	path                                      string        // the plan file
	history, mutant, modelName, props, target string
	impl                                      string
	times                                     int // --times
	trace                                     bool
	real                                      bool // the plan runs on a real backend (--target other than sim, or --impl)
	timeout                                   time.Duration
	fam                                       familyFlags
	outf                                      outputFlags
}

// parseReplayFlags reads replay's flags and checks them together, so that
// every flag that is wrong is named at once: ok false with the exit status
// when the replay must not start.
func parseReplayFlags(args []string, stdout, stderr io.Writer) (ra *replayArgs, code int, ok bool) {
	fs := newFlags(replayUsage(), stderr)
	ra = &replayArgs{fs: fs}
	fs.StringVar(&ra.history, "history", "", "also write the history to this file (it must not exist)")
	fs.BoolVar(&ra.trace, "trace", false, "print the event trace: the simulator's; on a real target, what the run's proxies passed between each process and each server\n, where the family keeps it (RabbitMQ, Redis)")
	fs.IntVar(&ra.times, "times", 1, "run the plan this many times and say in how many a counted property failed; the report is of the first run that failed\n (a real target's timing varies: a counterexample found there may not fail every time)")
	fs.StringVar(&ra.mutant, "mutant", "", "run this mutant instead of the plan's implementation (\"reference\" for the reference)")
	fs.StringVar(&ra.modelName, "model", "standard", "acquire-exact model: standard or strict; default the plan's")
	fs.StringVar(&ra.props, "properties", "", "comma-separated properties whose violation counts; default the plan's, else all")
	fs.DurationVar(&ra.timeout, "timeout", time.Minute, "time budget of each linearizability check")
	fs.StringVar(&ra.target, "target", "sim", "where the plan runs: sim (its kind's simulator) or a real server: "+targetList())
	fs.StringVar(&ra.impl, "impl", "", "run an implementation that speaks the process protocol instead: an amqp-locks or redlock plan on the simulator served on the wire, another on its real target\n (amqp-locks: or --target rabbitmq; redlock: or --target redis; the others: mariadb, postgres, redis; consul-semaphore: on the simulated Consul served on the wire, or --target consul or etcd)")
	ra.fam.register(fs, family.Replay)
	ra.outf.register(fs, true)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return nil, code, false
	}
	ra.real = ra.target != "sim" || ra.impl != ""
	var bad checks
	bad.oneOf("target", ra.target, family.TargetNames()...)
	bad.oneOf("model", ra.modelName, family.ModelNames()...)
	bad.duration("timeout", ra.timeout, false)
	bad.positive("times", ra.times)
	bad.add(given(fs, "impl") && strings.TrimSpace(ra.impl) == "", "--impl needs a command")
	bad.add(given(fs, "init-timeout") && ra.impl == "", "--init-timeout is for an implementation's processes: give --impl")
	ra.fam.check(&bad)
	bad.add(len(pos) != 1, "want exactly one plan file, got %d arguments", len(pos))
	ra.outf.check(&bad)
	if !bad.report("replay", stderr) {
		return nil, exitUsage, false
	}
	ra.path = pos[0]
	return ra, exitOK, true
}

// open reads the plan as the family its kind names reads it, with
// --mutant applied, ready to run on the target the flags name (--impl
// without --target runs on the family's real backend).
func (ra *replayArgs) open(stdout, stderr io.Writer) (*replayRun, error) {
	h := family.ReadHeader(ra.path)
	d := family.Of(h.Kind)
	if d == nil {
		d = family.Of(histories.Semaphore) // its reader says what is wrong
	}
	if err := ra.fam.otherFamilies(ra.fs, d, h.Kind); err != nil {
		return nil, err
	}
	if err := ra.implTarget(d); err != nil {
		return nil, err
	}
	p, err := d.ReadPlan(ra.path)
	if err != nil {
		if what := notAPlan(ra.path); what != "" {
			return nil, errors.New(what)
		}
		return nil, err
	}
	s := ra.fam.settings(ra.fs, h.Kind, ra.mutant)
	s.Impl, s.Stdout, s.Quiet, s.Stderr = ra.impl, stdout, ra.outf.quiet, stderr
	if given(ra.fs, "target") {
		s.Target = ra.target
	}
	if ra.trace {
		s.Trace = stdout
	}
	setup, err := d.Replay(p, s)
	if err != nil {
		return nil, err
	}
	return &replayRun{plan: p, header: h, propertyNames: d.Properties, setup: setup}, nil
}

// notAPlan says what path is when it is no plan replay can read but
// something a person may well give it: a directory (a counterexample's,
// holding its plan.json) or a recorded history, which check judges. It is
// "" for anything else, whose reader says what is wrong.
func notAPlan(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		plan := filepath.Join(path, "plan.json")
		if _, err := os.Stat(plan); err == nil {
			return fmt.Sprintf("%s is a directory: replay the plan in it, lockprover replay %s", path, shellWord(plan))
		}
		return fmt.Sprintf("%s is a directory, not a plan file (a plan.json, as prove writes with a counterexample)", path)
	}
	check := "replay runs a plan again; to judge a history, lockprover check " + shellWord(path)
	if h, _, err := histories.ReadAnyFile(path); err == nil && len(h) > 0 {
		return fmt.Sprintf("%s is a history (%d events), not a plan: %s", path, len(h), check)
	}
	if data, err := os.ReadFile(path); err == nil && histories.LooksLikeEDN(data) {
		return fmt.Sprintf("%s is EDN, as Jepsen writes histories, not a plan: %s", path, check)
	}
	return ""
}

// implTarget refuses --impl on a simulator of d's that does not serve
// its protocol on the wire.
func (ra *replayArgs) implTarget(d *family.Descriptor) error {
	if ra.impl == "" || !given(ra.fs, "target") {
		return nil
	}
	var takes []string
	for _, t := range d.Targets {
		if t.Real || t.Served {
			if t.Name == ra.target {
				return nil
			}
			takes = append(takes, t.Name)
		}
	}
	return &family.UsageError{Err: fmt.Errorf("--impl runs processes on a real server or a simulator served on the wire: for %s, --target %s", d.Name, strings.Join(takes, " or "))}
}

// worst is the worst status, among the counted properties, of a run's
// verdicts, judged as judge judges it.
func (ra *replayArgs) worst(rp *replayRun, res *prover.Result, judged string, counted []string) verdict.Status {
	w := verdict.Pass
	for _, v := range prover.Judge(res, ra.options(rp, judged)).Verdicts {
		if (counted == nil || known(v.Property, counted)) && (v.Status == verdict.Fail || v.Status == verdict.Inconclusive) {
			w = max(w, v.Status)
		}
	}
	return w
}

// runTimes runs the plan --times times and returns the first run that
// failed (what a real target reproduces only at times), else the last; in
// how many runs it failed; and in how many the history was the first
// run's, times and all.
func (ra *replayArgs) runTimes(ctx context.Context, rp *replayRun, judged string, counted []string) (res *prover.Result, reproduced int, same sameness, err error) {
	var first [3][]byte
	for run := 1; run <= ra.times; run++ {
		r, err := rp.setup.Prove.Run(ctx, rp.plan)
		if err != nil {
			return res, reproduced, same, err
		}
		h, _ := json.Marshal(r.History)
		forms := [3][]byte{h, normalized(h, false), normalized(h, true)}
		if first[0] == nil {
			first = forms
		}
		same.add(forms, first)
		bad := ra.worst(rp, r, judged, counted) != verdict.Pass
		if bad {
			reproduced++
		}
		if res == nil || bad && reproduced == 1 || reproduced == 0 {
			res = r
		}
	}
	return res, reproduced, same, nil
}

// sameness counts the runs whose history was the first run's: byte for
// byte (exact); once the leases' tokens are renamed in order of their
// first appearance (renamed, exact's among them); and once the validity
// an implementation claimed is set aside too (claims, renamed's among
// them).
type sameness struct{ exact, renamed, claims int }

// add counts a run's history, in its three forms (normalized), against
// the first run's.
func (s *sameness) add(forms, first [3][]byte) {
	switch {
	case bytes.Equal(forms[0], first[0]):
		s.exact++
	case bytes.Equal(forms[1], first[1]):
		s.renamed++
	case bytes.Equal(forms[2], first[2]):
		s.claims++
	default:
		return
	}
}

// all is how many runs had the first run's history, in any form.
func (s sameness) all() int { return s.exact + s.renamed + s.claims }

// says what the count must tell: how many runs needed which form (an
// implementation that draws its tokens at random, which no simulator
// chooses; one that measures its validity on its own clock, which the
// simulator does not move).
func (s sameness) says() string {
	var parts []string
	if s.renamed > 0 {
		parts = append(parts, fmt.Sprintf("%d of them with the tokens the implementation drew renamed, in order of appearance", s.renamed))
	}
	if s.claims > 0 {
		parts = append(parts, fmt.Sprintf("%d of them with its tokens renamed and the validity it claimed set aside (validity_ms, started_ms, replied_ms: read from its own clock)", s.claims))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// normalized is a history (as JSON) with every lease token, and every
// thief's, renamed t1, t2, ... in order of first appearance, and with
// claims, the times an implementation measured on its own clock
// (validity_ms, started_ms, replied_ms), left out: histories alike but
// for what an implementation drew at random, or read from its clock,
// come out the same.
func normalized(h []byte, claims bool) []byte {
	var events []map[string]any
	if json.Unmarshal(h, &events) != nil {
		return h
	}
	names := map[string]string{}
	for _, e := range events {
		v, _ := e["value"].(map[string]any)
		for _, field := range []string{"token", "thief"} {
			if t, ok := v[field].(string); ok {
				if names[t] == "" {
					names[t] = fmt.Sprintf("t%d", len(names)+1)
				}
				v[field] = names[t]
			}
		}
		if claims {
			delete(v, "validity_ms")
			delete(v, "started_ms")
			delete(v, "replied_ms")
		}
	}
	out, err := json.Marshal(events)
	if err != nil {
		return h
	}
	return out
}

// options are what a replay judges with, as the search judged it: the
// time budget, and the family's own options for the model judged by.
func (ra *replayArgs) options(rp *replayRun, judged string) model.Options {
	o := model.Options{Timeout: ra.timeout}
	if j, ok := rp.setup.Prove.(prover.Judging); ok {
		o.Family = append(o.Family, j.Judging(judged))
	}
	return o
}

// judge checks the replayed history, prints what it shows, records it in
// the summary and writes the summary out; it returns the exit status of
// the worst counted verdict.
func (ra *replayArgs) judge(rp *replayRun, res *prover.Result, judged string, counted []string, sum *results.Summary, stdout, stderr io.Writer) int {
	r := prover.Judge(res, ra.options(rp, judged))
	for _, pr := range res.Evidence.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", pr)
	}
	if rp.setup.Real {
		fmt.Fprintf(stdout, "ran on %s as lock %s\n", rp.setup.Where, res.Evidence.Lock)
		switch {
		case ra.trace && len(res.Evidence.Trace) == 0:
			fmt.Fprintf(stdout, "trace: none kept on this target\n")
		case ra.trace:
			fmt.Fprintf(stdout, "trace of the proxies (%d lines):\n", len(res.Evidence.Trace))
			for _, l := range res.Evidence.Trace {
				fmt.Fprintf(stdout, "  %s\n", l)
			}
		}
	}
	if !rp.setup.Real {
		for _, l := range res.Evidence.Trace {
			fmt.Fprintf(stdout, "served: %s\n", l) // a replay's divergence from its plan's log
		}
	}
	if !ra.outf.quiet || r.Status() != verdict.Pass {
		printReport(stdout, filepath.Base(ra.path), r)
	}
	worst := judgedWorst(stdout, r, counted, judged, ra.outf.quiet)
	summarizeReplay(sum, stdout, res, r, worst, counted, ra.path, ra.history)
	sum.Timings.ElapsedSeconds = time.Since(sum.Timings.Started).Seconds()
	return ra.outf.write("replay", sum, exitFor(worst), stderr)
}

func runMutants(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "mutants", sections: []section{
		{title: "Every run", flags: "[--kind KIND] [-v]"},
		{title: "Detection (--detect)", flags: "[--detect N] [--budget N] [--json FILE] [--junit FILE]"},
	}, about: `Lists the mutants of the reference: each one's name and the property that must
catch it (-v: what it gets wrong). With --detect N it proves every mutant from
seeds 1..N on the simulator and prints a Markdown table of how many seeds
caught it, and the median plans and time it took.
Exit status (--detect): 0 every seed caught every mutant, 1 a seed missed one,
3 a seed missed one only because a check ran out of time, 130 interrupted.`}, stderr)
	verbose := fs.Bool("v", false, "also say what each mutant gets wrong")
	detect := fs.Int("detect", 0, "prove each mutant from this many seeds and print a Markdown table of the plans and time it takes to catch")
	budget := fs.Int("budget", 20000, "with --detect, give up on a seed after this many plans")
	kind := fs.String("kind", histories.Semaphore, "the family whose mutants, by its kind: "+strings.Join(family.FamilyKinds(), " or "))
	var outf outputFlags
	outf.register(fs, false)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("mutants", pos, stderr) {
		return exitUsage
	}
	var bad checks
	bad.oneOf("kind", *kind, family.FamilyKinds()...)
	bad.nonNegative("detect", *detect)
	bad.positive("budget", *budget)
	bad.add(given(fs, "budget") && *detect == 0, "--budget goes with --detect")
	bad.add(*verbose && *detect > 0, "-v lists the mutants; --detect proves them: give one")
	bad.add((outf.json != "" || outf.junit != "") && *detect == 0, "--json and --junit go with --detect")
	outf.check(&bad)
	if !bad.report("mutants", stderr) {
		return exitUsage
	}
	if *detect > 0 {
		ctx, stop := interrupts(stderr, nil)
		defer stop()
		sum := &results.Summary{Target: "sim", Config: configOf(fs), Timings: results.Timings{Started: time.Now()}}
		code := detectMutants(ctx, *kind, *detect, *budget, outf.tee(stdout), stderr, sum)
		sum.Timings.ElapsedSeconds = time.Since(sum.Timings.Started).Seconds()
		return outf.write("mutants", sum, code, stderr)
	}
	width := 26 // the names' column, wider for longer names
	for _, m := range family.Of(*kind).Mutants {
		width = max(width, len(m.Name)+2)
	}
	for _, m := range family.Of(*kind).Mutants {
		fmt.Fprintf(stdout, "%-*s %s\n", width, m.Name, m.Property)
		if *verbose {
			fmt.Fprintf(stdout, "    %s\n", m.Defect)
		}
	}
	return exitOK
}

// detectMutants proves each mutant from seeds 1..n (prover.Detect),
// counting a seed as caught when the mutant's own property breaks, and
// prints the medians. A seed that misses only because checks ran out of
// time is inconclusive.
func detectMutants(ctx context.Context, kind string, n, budget int, stdout, stderr io.Writer, sum *results.Summary) int {
	fmt.Fprintf(stdout, "| mutant | property | caught | median plans | median seconds |\n|---|---|---|---|---|\n")
	code := exitOK
	for _, m := range family.Of(kind).Mutants {
		d, err := prover.Detect(ctx, m.Prove, m.Property, n, budget)
		switch {
		case errors.Is(err, prover.ErrInterrupted):
			fmt.Fprintf(stderr, "mutants: interrupted at %s, seed %d\n", m.Name, d.Ran+1)
			return exitInterrupted
		case err != nil:
			fmt.Fprintf(stderr, "mutants: %s: %v\n", m.Name, err)
			return exitUsage
		case d.Missed():
			code = exitViolation
		case d.Caught < n && code == exitOK:
			code = exitInconclusive
		}
		caught := fmt.Sprintf("%d/%d", d.Caught, n)
		if d.Inconclusive > 0 {
			caught += fmt.Sprintf(" (%d inconclusive)", d.Inconclusive)
		}
		row := results.Mutant{Name: m.Name, Property: m.Property, Seeds: n, Caught: d.Caught, Inconclusive: d.Inconclusive}
		plans, secs := "-", "-"
		if mp, ok := d.MedianPlans(); ok {
			ms, _ := d.MedianSeconds()
			row.MedianPlans, row.MedianSeconds = mp, ms
			plans, secs = fmt.Sprint(mp), fmt.Sprintf("%.2f", ms)
		}
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s |\n", m.Name, m.Property, caught, plans, secs)
		sum.Mutants = append(sum.Mutants, row)
		for _, p := range d.Plans {
			sum.Plans += p
		}
	}
	return code
}
