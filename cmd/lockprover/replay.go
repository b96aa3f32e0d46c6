package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"github.com/lockprover/lockprover/families/lease"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/mysql"
	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
	"github.com/lockprover/lockprover/results"
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
func summarizeReplay(sum *results.Summary, stdout io.Writer, res *prover.Result, r *model.Report, worst model.Status, counted []string, path, history string) {
	sum.Plans, sum.Operations, sum.Verdicts = 1, len(res.History)/2, len(r.Verdicts)
	sum.Properties = reportProperties(r, "", counted)
	for _, v := range r.Verdicts {
		if (counted == nil || known(v.Property, counted)) && v.Status == worst && worst != model.Pass && sum.Counterexample == nil {
			sum.Counterexample = &results.Counterexample{Property: v.Property, Inconclusive: worst == model.Inconclusive, Explanation: v.Detail,
				Dir: filepath.Dir(path), Plan: path, History: history, Replay: "lockprover replay " + shellWord(path), Batch: -1, Index: -1}
			annotate(stdout, path, 0, fmt.Sprintf("%s %s (lock %s)", v.Property, v.Status, v.Lock), v.Detail)
		}
	}
}

// replayJudging is how a replay judges: the plan's model and counted
// properties unless the flags say otherwise; it also checks that --history
// names a file that does not exist yet.
func replayJudging(fs *flag.FlagSet, rp *replayRun, modelName, props, history string) (strict bool, counted []string, err error) {
	planModel, planProps := rp.model, rp.properties
	strict = planModel == "strict"
	if given(fs, "model") {
		strict = modelName == "strict"
	}
	counted = planProps
	if given(fs, "properties") {
		if counted, err = parsePropertiesOf(props, rp.propertyNames); err != nil {
			return false, nil, err
		}
	}
	if history != "" {
		if _, err := os.Stat(history); err == nil {
			return false, nil, fmt.Errorf("--history: %s exists; not overwriting it", history)
		}
		if err := checkOut(filepath.Dir(history)); err != nil {
			return false, nil, fmt.Errorf("--history: %v", err)
		}
	}
	return strict, counted, nil
}

// A replayRun is a plan read back, ready to run again as its family runs
// it.
type replayRun struct {
	model          string   // the plan's model
	properties     []string // the plan's counted properties
	propertyNames  []string // the family's properties
	implementation string   // what runs, in words
	run            func(ctx context.Context) (*prover.Result, error)
	onBroker       func(url string, allowRestart bool) // run it on a real broker instead
	stop           func()                              // ends the implementation's processes
	judging        func(model.Options) model.Options   // the family's model options (prover.Judging), or nil
	backend        string                              // the real backend's name, for "ran on ... as lock"
}

// planKind is the kind a plan file names ("" if it cannot be read: the
// family's reader then says what is wrong).
func planKind(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var p struct{ Kind string }
	json.Unmarshal(data, &p)
	return p.Kind
}

// replayAMQP reads an amqp-locks plan, with --mutant applied: on the
// simulator (its trace to stdout with --trace) against the reference, a
// mutant, or --impl.
func replayAMQP(path, mutant string, trace bool, impl string, stdout io.Writer) (*replayRun, error) {
	p, err := amqp.ReadPlan(path)
	if err != nil {
		return nil, err
	}
	if err := replayMutant(&p.Mutant, mutant, amqp.MutantNamed(mutant) != nil, "no mutant named %q (see lockprover mutants)"); err != nil {
		return nil, err
	}
	var t amqp.Target = amqp.Simulator{}
	if trace {
		t = amqp.Simulator{Trace: stdout}
	}
	implementation := amqp.ImplFor(p)
	rp := &replayRun{model: p.Model, properties: p.Properties, propertyNames: amqp.PropertyNames, stop: func() {}, backend: "RabbitMQ"}
	if impl != "" {
		pi := &process.Impl{Command: impl}
		implementation, rp.stop = pi, pi.Stop
	}
	rp.implementation = amqp.Config{Impl: implementation, Mutant: p.Mutant}.String()
	if impl != "" {
		rp.implementation = fmt.Sprintf("%q", impl)
	}
	rp.onBroker = func(url string, allowRestart bool) { t = amqp.RabbitMQ{URL: url, AllowRestart: allowRestart} }
	rp.run = func(ctx context.Context) (*prover.Result, error) { return t.Run(ctx, p, implementation) }
	return rp, nil
}

// replayMutant applies --mutant to a plan's mutant: none keeps it,
// "reference" clears it, a name the family knows (known) replaces it.
func replayMutant(planMutant *string, mutant string, known bool, unknown string) error {
	switch {
	case mutant == "":
	case mutant == "reference":
		*planMutant = ""
	case !known:
		return fmt.Errorf("--mutant: "+unknown, mutant)
	default:
		*planMutant = mutant
	}
	return nil
}

// replayDatabase reads a database semaphore plan, with --mutant applied,
// to run on the simulated database (its trace to stdout with --trace) or
// on a real MariaDB (--target mariadb, --dsn or --private-server), against
// the reference, a mutant, or --impl.
func replayDatabase(ra *replayArgs, stdout io.Writer) (*replayRun, error) {
	switch {
	case ra.target == "rabbitmq":
		return nil, fmt.Errorf("%s: a %s plan runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)", ra.path, dbsemaphore.Kind)
	case ra.target == "sim" && (given(ra.fs, "dsn") || ra.private):
		return nil, errors.New("--dsn and --private-server are for a real database: add --target mariadb")
	case ra.private && given(ra.fs, "dsn"):
		return nil, errors.New("--dsn and --private-server exclude each other: the private server has its own")
	case given(ra.fs, "amqp-url") || ra.allowRestart:
		return nil, fmt.Errorf("--amqp-url and --allow-restart are for amqp-locks, not a %s plan", dbsemaphore.Kind)
	}
	p, err := dbsemaphore.ReadPlan(ra.path)
	if err != nil {
		return nil, err
	}
	if err := replayMutant(&p.Mutant, ra.mutant, dbsemaphore.MutantNamed(ra.mutant) != nil, "no db-semaphore mutant named %q (see lockprover mutants --kind db-semaphore)"); err != nil {
		return nil, err
	}
	if ra.impl != "" && p.Mutant != "" {
		return nil, fmt.Errorf("the plan names mutant %s: add --mutant reference to run it against --impl", p.Mutant)
	}
	c := dbsemaphore.Config{Mutant: p.Mutant}
	rp := &replayRun{model: p.Model, properties: p.Properties, propertyNames: lease.Properties, stop: func() {},
		judging: c.Judging, backend: "MariaDB"}
	if ra.impl != "" {
		li := &process.LeaseImpl{Command: ra.impl}
		c.Impl, rp.stop = li, li.Stop
	}
	if ra.target == "sim" {
		var tr io.Writer
		if ra.trace {
			tr = stdout
		}
		rp.implementation = c.String()
		rp.run = func(context.Context) (*prover.Result, error) { return dbsemaphore.Simulate(p, tr) }
		return rp, nil
	}
	c.Target = dbsemaphore.MariaDB{DSN: mysqlDSN(ra.dsn)}
	rp.implementation = c.String()
	rp.run = func(ctx context.Context) (*prover.Result, error) {
		if ra.private {
			server, err := startPrivate(ctx, stdout, ra.outf.quiet)
			if err != nil {
				return nil, fmt.Errorf("--private-server: %w", err)
			}
			defer server.Stop()
			c.Target = dbsemaphore.MariaDB{Server: server.Server}
		}
		if err := c.Preflight(ctx); err != nil {
			return nil, err
		}
		return c.Run(ctx, p)
	}
	return rp, nil
}

// judgedWorst is the worst status among the counted properties of r,
// saying how the plan was judged when that is not the default, and what
// an inconclusive or quiet pass means.
func judgedWorst(stdout io.Writer, r *model.Report, counted []string, strict, quiet bool) model.Status {
	worst := model.Pass
	for _, v := range r.Verdicts {
		if (counted == nil || known(v.Property, counted)) && (v.Status == model.Fail || v.Status == model.Inconclusive) {
			worst = max(worst, v.Status)
		}
	}
	if counted != nil || strict {
		how := "the standard model"
		if strict {
			how = "the strict model"
		}
		if counted != nil {
			how += ", counting " + strings.Join(counted, ", ")
		}
		fmt.Fprintf(stdout, "judged with %s: %s\n", how, worst)
	}
	if worst == model.Inconclusive {
		fmt.Fprintln(stdout, "inconclusive: a linearizability check ran out of time (raise --timeout); nothing was shown violated")
	}
	if quiet && worst == model.Pass {
		fmt.Fprintln(stdout, "every property held")
	}
	return worst
}

const replaySynopsis = `replay [--target sim|rabbitmq|mariadb] [--amqp-url URL] [--allow-restart]
                   [--dsn DSN] [--private-server] [--impl COMMAND]
                   [--mutant NAME|reference] [--model standard|strict] [--properties P,...]
                   [--timeout D] [--history FILE] [--trace] [--json FILE] [--junit FILE]
                   [--quiet] PLAN`

// runReplay is `lockprover replay`: it runs a saved plan again, on the
// simulator or a real broker, and judges the history as the plan was judged
// when it was found.
func runReplay(args []string, stdout, stderr io.Writer) int {
	ra, code, ok := parseReplayFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	stdout = ra.outf.tee(stdout)
	rp, err := ra.open(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	sum := &results.Summary{Target: ra.target, Timings: results.Timings{Started: time.Now()}}
	defer rp.stop()
	strict, counted, err := replayJudging(ra.fs, rp, ra.modelName, ra.props, ra.history)
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	ctx, stop := interrupts(stderr, rp.stop)
	defer stop()
	if rp.onBroker != nil && ra.target == "rabbitmq" {
		if code := preflight(ctx, "replay", brokerURL(ra.amqpURL), stderr); code >= 0 {
			return code
		}
		rp.onBroker(brokerURL(ra.amqpURL), ra.allowRestart)
	}
	sum.Implementation = rp.implementation
	res, err := rp.run(ctx)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "replay: interrupted")
		return ra.outf.write("replay", sum, exitInterrupted, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		sum.Verdict, sum.Error = results.Failed, err.Error()
		return ra.outf.write("replay", sum, exitUsage, stderr)
	}
	if err := writeHistory(ra.history, res.History); err != nil {
		fmt.Fprintf(stderr, "replay: --history: %v\n", err)
		return exitUsage
	}
	return ra.judge(rp, res, strict, counted, sum, stdout, stderr)
}

// replayArgs are replay's flags, checked, and its plan file.
type replayArgs struct {
	fs                                        *flag.FlagSet // to tell the flags given from defaults
	path                                      string        // the plan file
	history, mutant, modelName, props, target string
	amqpURL, impl, dsn                        string
	trace, allowRestart, private              bool
	real                                      bool // the plan runs on a real backend (--target rabbitmq or mariadb, or --impl)
	timeout                                   time.Duration
	outf                                      outputFlags
}

// parseReplayFlags reads replay's flags and checks them together, so that
// every flag that is wrong is named at once: ok false with the exit status
// when the replay must not start.
func parseReplayFlags(args []string, stdout, stderr io.Writer) (ra *replayArgs, code int, ok bool) {
	fs := newFlags("replay", replaySynopsis, `Runs a saved plan again and checks its history. On the simulator the history
is the same, byte for byte. The plan is judged as it was when it was found:
its model and properties, unless --model or --properties say otherwise.
Exit status: 0 every property held, 1 a violation, 2 usage or bad input,
3 inconclusive (a check ran out of time), 130 interrupted.`, stderr)
	ra = &replayArgs{fs: fs}
	fs.StringVar(&ra.history, "history", "", "also write the history to this file (it must not exist)")
	fs.BoolVar(&ra.trace, "trace", false, "print the simulator's event trace (--target sim only)")
	fs.StringVar(&ra.mutant, "mutant", "", "run this mutant instead of the plan's implementation (\"reference\" for the reference)")
	fs.StringVar(&ra.modelName, "model", "standard", "acquire-exact model: standard or strict; default the plan's")
	fs.StringVar(&ra.props, "properties", "", "comma-separated properties whose violation counts; default the plan's, else all")
	fs.DurationVar(&ra.timeout, "timeout", time.Minute, "time budget of each linearizability check")
	fs.StringVar(&ra.target, "target", "sim", "where the plan runs: sim, rabbitmq (amqp-locks) or mariadb (db-semaphore)")
	fs.StringVar(&ra.amqpURL, "amqp-url", "", "the real broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	fs.BoolVar(&ra.allowRestart, "allow-restart", false, "let the plan restart a real broker")
	fs.StringVar(&ra.impl, "impl", "", "run an implementation that speaks the process protocol instead (implies --target rabbitmq, or mariadb for a db-semaphore plan)")
	fs.StringVar(&ra.dsn, "dsn", "", "the real MariaDB's DSN; default $LOCKPROVER_MYSQL_DSN, else "+mysql.DefaultDSN)
	fs.BoolVar(&ra.private, "private-server", false, "run the plan on a private mariadbd of its own, which it may restart")
	ra.outf.register(fs, true)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return nil, code, false
	}
	ra.real = ra.target != "sim" || ra.impl != ""
	var bad checks
	bad.oneOf("target", ra.target, "sim", "rabbitmq", "mariadb")
	bad.oneOf("model", ra.modelName, "standard", "strict")
	bad.duration("timeout", ra.timeout, false)
	bad.add(given(fs, "impl") && strings.TrimSpace(ra.impl) == "", "--impl needs a command")
	bad.add(ra.impl != "" && given(fs, "target") && ra.target == "sim", "--impl runs processes against a real backend: use --target rabbitmq (or mariadb)")
	bad.add(ra.trace && ra.real, "--trace is the simulator's event trace: not with a real target or --impl")
	bad.add(!ra.real && given(fs, "amqp-url"), "--amqp-url is for a real broker: add --target rabbitmq")
	bad.add(!ra.real && ra.allowRestart, "--allow-restart is for a real broker: add --target rabbitmq")
	bad.add(len(pos) != 1, "want exactly one plan file, got %d arguments", len(pos))
	ra.outf.check(&bad)
	if !bad.report("replay", stderr) {
		return nil, exitUsage, false
	}
	ra.path = pos[0]
	return ra, exitOK, true
}

// open reads the plan as the family it names reads it, with --mutant
// applied, ready to run.
// --impl without --target runs on the family's real backend.
func (ra *replayArgs) open(stdout io.Writer) (*replayRun, error) {
	if planKind(ra.path) == dbsemaphore.Kind {
		if ra.impl != "" && !given(ra.fs, "target") {
			ra.target = "mariadb"
		}
		return replayDatabase(ra, stdout)
	}
	if ra.impl != "" && !given(ra.fs, "target") {
		ra.target = "rabbitmq"
	}
	switch {
	case ra.target == "mariadb":
		return nil, fmt.Errorf("%s: an amqp-locks plan runs on the simulator (--target sim) or RabbitMQ (--target rabbitmq)", ra.path)
	case given(ra.fs, "dsn") || ra.private:
		return nil, errors.New("--dsn and --private-server are for a db-semaphore plan on MariaDB")
	}
	return replayAMQP(ra.path, ra.mutant, ra.trace, ra.impl, stdout)
}

// judge checks the replayed history, prints what it shows, records it in
// the summary and writes the summary out; it returns the exit status of
// the worst counted verdict.
func (ra *replayArgs) judge(rp *replayRun, res *prover.Result, strict bool, counted []string, sum *results.Summary, stdout, stderr io.Writer) int {
	o := model.Options{Strict: strict, Timeout: ra.timeout}
	if rp.judging != nil {
		o = rp.judging(o) // as the search judged it
	}
	r := prover.Judge(res, o)
	for _, pr := range res.Evidence.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", pr)
	}
	if ra.real {
		fmt.Fprintf(stdout, "ran on %s as lock %s\n", rp.backend, res.Evidence.Lock)
	}
	if !ra.outf.quiet || r.Status() != model.Pass {
		printReport(stdout, filepath.Base(ra.path), r)
	}
	worst := judgedWorst(stdout, r, counted, strict, ra.outf.quiet)
	summarizeReplay(sum, stdout, res, r, worst, counted, ra.path, ra.history)
	sum.Timings.ElapsedSeconds = time.Since(sum.Timings.Started).Seconds()
	return ra.outf.write("replay", sum, exitFor(worst), stderr)
}

func runMutants(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mutants", "mutants [--kind semaphore|db-semaphore] [-v] [--detect N [--budget N] [--json FILE] [--junit FILE]]", `Lists the mutants of the reference: each one's name and the property that must
catch it (-v: what it gets wrong). With --detect N it proves every mutant from
seeds 1..N on the simulator and prints a Markdown table of how many seeds
caught it, and the median plans and time it took.
Exit status (--detect): 0 every seed caught every mutant, 1 a seed missed one,
3 a seed missed one only because a check ran out of time, 130 interrupted.`, stderr)
	verbose := fs.Bool("v", false, "also say what each mutant gets wrong")
	detect := fs.Int("detect", 0, "prove each mutant from this many seeds and print a Markdown table of the plans and time it takes to catch")
	budget := fs.Int("budget", 20000, "with --detect, give up on a seed after this many plans")
	kind := fs.String("kind", "semaphore", "the family whose mutants: semaphore (amqp-locks) or db-semaphore")
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
	bad.oneOf("kind", *kind, "semaphore", dbsemaphore.Kind)
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
	for _, m := range mutantsOf(*kind) {
		width = max(width, len(m.Name)+2)
	}
	for _, m := range mutantsOf(*kind) {
		fmt.Fprintf(stdout, "%-*s %s\n", width, m.Name, m.Property)
		if *verbose {
			fmt.Fprintf(stdout, "    %s\n", m.Defect)
		}
	}
	return exitOK
}

// detectMutants proves each mutant from seeds 1..n, counting a seed as
// caught when the mutant's own property breaks, and prints the medians. A
// seed that misses only because checks ran out of time is inconclusive.
func detectMutants(ctx context.Context, kind string, n, budget int, stdout, stderr io.Writer, sum *results.Summary) int {
	fmt.Fprintf(stdout, "| mutant | property | caught | median plans | median seconds |\n|---|---|---|---|---|\n")
	code := exitOK
	for _, m := range mutantsOf(kind) {
		var plans []int
		var secs []float64
		inconclusive := 0
		for seed := 1; seed <= n; seed++ {
			c := prover.Config{Family: m.Family, Properties: []string{m.Property}}
			o, err := prover.Search{Config: c, Seed: uint64(seed), Plans: budget, Shrink: 1, Context: ctx}.Run()
			if err != nil {
				fmt.Fprintf(stderr, "mutants: %s: %v\n", m.Name, err)
				return exitUsage
			}
			if o.Interrupted {
				fmt.Fprintf(stderr, "mutants: interrupted at %s, seed %d\n", m.Name, seed)
				return exitInterrupted
			}
			switch {
			case o.Found != nil:
				plans = append(plans, o.Plans)
				secs = append(secs, o.Elapsed.Seconds())
			case o.Inconclusive > 0:
				inconclusive++
			}
		}
		missed := n - len(plans)
		switch {
		case missed > inconclusive:
			code = exitViolation
		case missed > 0 && code == exitOK:
			code = exitInconclusive
		}
		caught := fmt.Sprintf("%d/%d", len(plans), n)
		if inconclusive > 0 {
			caught += fmt.Sprintf(" (%d inconclusive)", inconclusive)
		}
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s |\n", m.Name, m.Property, caught, median(plans), medianF(secs))
		row := results.Mutant{Name: m.Name, Property: m.Property, Seeds: n, Caught: len(plans), Inconclusive: inconclusive}
		if len(plans) > 0 {
			row.MedianPlans, row.MedianSeconds = plans[len(plans)/2], secs[len(secs)/2] // median and medianF sorted them
		}
		sum.Mutants = append(sum.Mutants, row)
		sum.Plans += sumInts(plans)
	}
	return code
}

func median(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	sort.Ints(v)
	return fmt.Sprint(v[len(v)/2])
}

func medianF(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	sort.Float64s(v)
	return fmt.Sprintf("%.2f", v[len(v)/2])
}

func sumInts(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}
