package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
)

// proveFlags are the flags prove and explore share.
type proveFlags struct {
	runs                    int
	dur                     time.Duration
	seed                    uint64
	clients, ops, maxFault  int
	faults, kind, props     string
	modelName               string
	timeout, shrink         time.Duration
	heartbeat               time.Duration
	target, url, impl       string
	restart                 bool
	process                 *process.Impl
	heartbeatSet, targetSet bool
}

func (f *proveFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.runs, "runs", 1000, "number of plans to draw (ignored with --time)")
	fs.DurationVar(&f.dur, "time", 0, "draw plans for this long instead of --runs")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the plans drawn; 0 picks one (and prints it)")
	fs.IntVar(&f.clients, "clients", 3, "at most this many clients per plan")
	fs.IntVar(&f.ops, "ops", 8, "at most this many steps per client")
	fs.IntVar(&f.maxFault, "max-faults", 3, "at most this many faults per plan")
	fs.StringVar(&f.faults, "faults", "all", "comma-separated faults plans may hold: kill, pause, partition, force-close, restart-broker, drop-reply, admin-crash; all; or none")
	fs.StringVar(&f.kind, "kind", "semaphore", "lock kind: semaphore or mutex")
	fs.StringVar(&f.props, "properties", "", "comma-separated properties whose violation counts; empty for all")
	fs.StringVar(&f.modelName, "model", "standard", "acquire-exact model: standard or strict")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "time budget of each linearizability check")
	fs.DurationVar(&f.shrink, "shrink-time", 30*time.Second, "time to spend minimising a counterexample")
	fs.DurationVar(&f.heartbeat, "heartbeat", 0, "heartbeat the reference proposes; default 10s on the simulator, 1s on a real broker (plans wait three heartbeats at their end); 0s for none")
	fs.StringVar(&f.target, "target", "sim", "where plans run: sim (the simulator) or rabbitmq (a real broker, see --amqp-url)")
	fs.StringVar(&f.url, "amqp-url", "", "the real broker's URL; default $LOCKPROVER_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/")
	fs.BoolVar(&f.restart, "allow-restart", false, "let plans on a real broker restart it (rabbitmqctl stop_app/start_app)")
	fs.StringVar(&f.impl, "impl", "", "prove an implementation that runs as processes speaking the protocol (docs/protocol.md) instead of the reference; implies --target rabbitmq")
}

// config checks the flags and turns them into a prover configuration.
func (f *proveFlags) config() (prover.Config, error) {
	c := prover.Config{Kind: f.kind, Clients: f.clients, Ops: f.ops, MaxFaults: f.maxFault, Strict: f.modelName == "strict", Timeout: f.timeout}
	switch {
	case f.kind != "semaphore" && f.kind != "mutex":
		return c, fmt.Errorf("--kind must be semaphore or mutex, not %q", f.kind)
	case f.modelName != "standard" && f.modelName != "strict":
		return c, fmt.Errorf("--model must be standard or strict, not %q", f.modelName)
	case f.clients < 1 || f.ops < 1 || f.maxFault < 0:
		return c, errors.New("--clients and --ops must be at least 1, --max-faults at least 0")
	case f.runs < 1 && f.dur == 0:
		return c, errors.New("--runs must be at least 1")
	case f.timeout <= 0:
		return c, errors.New("--timeout must be positive")
	}
	switch {
	case f.heartbeatSet && f.heartbeat == 0:
		c.Options.HeartbeatMs = -1
	case f.heartbeatSet:
		c.Options.HeartbeatMs = int(f.heartbeat.Milliseconds())
	case f.target == "rabbitmq":
		c.Options.HeartbeatMs = 1000
	}
	if f.impl != "" {
		if f.targetSet && f.target != "rabbitmq" {
			return c, errors.New("--impl runs processes against a real broker: use --target rabbitmq")
		}
		f.target = "rabbitmq"
		f.process = &process.Impl{Command: f.impl}
		c.Impl = f.process
		if !f.heartbeatSet {
			c.Options.HeartbeatMs = 1000
		}
	}
	switch f.target {
	case "sim":
	case "rabbitmq":
		c.Target = prover.RabbitMQ{URL: brokerURL(f.url), AllowRestart: f.restart}
		if f.faults == "all" && !f.restart {
			c.Faults = withoutRestart(prover.FaultNames())
		}
	default:
		return c, fmt.Errorf("--target must be sim or rabbitmq, not %q", f.target)
	}
	switch f.faults {
	case "all":
	case "none":
		c.Faults = []string{}
	default:
		for _, name := range strings.Split(f.faults, ",") {
			if !known(name, prover.FaultNames()) {
				return c, fmt.Errorf("--faults: unknown fault %q (want some of %s)", name, strings.Join(prover.FaultNames(), ", "))
			}
			c.Faults = append(c.Faults, name)
		}
	}
	if f.props != "" {
		for _, name := range strings.Split(f.props, ",") {
			if !known(name, properties) {
				return c, fmt.Errorf("--properties: unknown property %q (want some of %s)", name, strings.Join(properties, ", "))
			}
			c.Properties = append(c.Properties, name)
		}
	}
	return c, nil
}

var properties = []string{model.SlotExclusive, model.AcquireExact, model.CountExact, model.Persistent, model.NoLeak,
	model.Available, model.CheapAcquire, model.CheapVerify, model.DriverMinimal}

func known(s string, list []string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func runProve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("prove", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: lockprover prove [flags]\n\nDraws plans (admins, clients, faults, schedules) and proves the target on them;\nby default the reference implementation on the simulator. On a violation it\nshrinks the plan, writes the counterexample under --out and exits 1.\n\nFlags:")
		fs.PrintDefaults()
	}
	var f proveFlags
	f.register(fs)
	mutant := fs.String("mutant", "", "prove this mutant of the reference instead (see lockprover mutants)")
	out := fs.String("out", "lockprover-out", "directory for a counterexample")
	shard := fs.String("shard", "", "i/n: run the i-th of n shares of the seed's plans (i from 1)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	f.noticeHeartbeat(fs)
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prove: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	c, err := f.config()
	switch {
	case err != nil:
	case *mutant != "" && prover.MutantNamed(*mutant) == nil:
		err = fmt.Errorf("--mutant: no mutant named %q (see lockprover mutants)", *mutant)
	case *mutant != "" && f.impl != "":
		err = errors.New("--mutant is a mutant of the reference; for one served over the protocol use --impl 'lockprover serve-reference --mutant NAME'")
	}
	if err != nil {
		fmt.Fprintf(stderr, "prove: %v\n", err)
		return exitUsage
	}
	c.Mutant = *mutant
	s := prover.Search{Config: c, Seed: f.seed, Shrink: f.shrink}
	if s.Shard, s.Shards, err = parseShard(*shard); err != nil {
		fmt.Fprintf(stderr, "prove: --shard: %v\n", err)
		return exitUsage
	}
	if s.Seed == 0 {
		s.Seed = rand.Uint64()
	}
	if f.dur > 0 {
		s.Until = time.Now().Add(f.dur)
	} else {
		s.Plans = f.runs
	}
	what := "the reference"
	switch {
	case c.Mutant != "":
		what = "mutant " + c.Mutant
	case f.impl != "":
		what = fmt.Sprintf("%q", f.impl)
		defer f.process.Stop()
	}
	where := "the simulator"
	if f.target == "rabbitmq" {
		where = "RabbitMQ at " + redact(brokerURL(f.url))
	}
	fmt.Fprintf(stdout, "proving %s on %s, seed %d\n", what, where, s.Seed)
	status := newStatus(stdout)
	s.Progress = status.update
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if f.process != nil {
		if err := f.process.Preflight(ctx, brokerURL(f.url), c.Kind); err != nil {
			fmt.Fprintf(stderr, "prove: the implementation failed its preflight: %v\n(lockprover validate-impl --impl %s says what to fix)\n", err, shellQuote(f.impl))
			return exitUsage
		}
	}
	s.Context = ctx
	o, err := s.Run()
	status.done()
	if err != nil {
		fmt.Fprintf(stderr, "prove: %v\n", err)
		return exitViolation
	}
	rate := float64(o.Plans) / o.Elapsed.Seconds()
	fmt.Fprintf(stdout, "%d plans, %d verdicts, %.1fs (%.1f plans/s)\n", o.Plans, o.Judged, o.Elapsed.Seconds(), rate)
	if o.Found == nil {
		fmt.Fprintln(stdout, "every property held")
		return exitOK
	}
	var replay []string
	if f.impl != "" {
		replay = append(replay, "--impl", shellQuote(f.impl))
	} else if f.target == "rabbitmq" {
		replay = append(replay, "--target", "rabbitmq")
	}
	return reportCounterexample(o.Found, *out, replay, stdout, stderr)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// noticeHeartbeat records whether --heartbeat was given (0s then means
// none, its absence means the target's default).
func (f *proveFlags) noticeHeartbeat(fs *flag.FlagSet) {
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "heartbeat":
			f.heartbeatSet = true
		case "target":
			f.targetSet = true
		}
	})
}

// brokerURL is the flag's URL, else $LOCKPROVER_AMQP_URL, else the local
// default.
func brokerURL(flagURL string) string {
	if flagURL != "" {
		return flagURL
	}
	if u := os.Getenv("LOCKPROVER_AMQP_URL"); u != "" {
		return u
	}
	return defaultAMQPURL
}

func withoutRestart(faults []string) []string {
	var out []string
	for _, f := range faults {
		if f != "restart-broker" {
			out = append(out, f)
		}
	}
	return out
}

func parseShard(s string) (int, int, error) {
	if s == "" {
		return 0, 1, nil
	}
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(i)
	b, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || b < 1 || a < 1 || a > b {
		return 0, 0, fmt.Errorf("want i/n with 1 <= i <= n, got %q", s)
	}
	return a - 1, b, nil
}

// reportCounterexample writes cx under dir and prints its summary and how
// to replay it.
func reportCounterexample(cx *prover.Counterexample, dir string, replayFlags []string, stdout, stderr io.Writer) int {
	dir, err := freshDir(dir)
	if err == nil {
		err = cx.Write(dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "writing the counterexample: %v\n", err)
		return exitViolation
	}
	replay := strings.Join(append(append([]string{"lockprover replay"}, replayFlags...), filepath.Join(dir, "plan.json")), " ")
	fmt.Fprintf(stdout, "\n%s", cx.Summary())
	for _, pr := range cx.Result.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", pr)
	}
	fmt.Fprintf(stdout, "counterexample: %s\nreplay: %s\n", dir, replay)
	for _, v := range cx.Report.Verdicts {
		if v.Property == cx.Property && v.Status == model.Inconclusive {
			return exitInconclusive
		}
	}
	return exitViolation
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
	line := fmt.Sprintf("plans %d  plans/s %.1f  verdicts %d  elapsed %s", plans, float64(plans)/el.Seconds(), judged, el.Round(time.Second))
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
