package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/histories"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/mysql"
	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
	"github.com/lockprover/lockprover/results"
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
	options                 string
	restart                 bool
	process                 *process.Impl
	heartbeatSet, targetSet bool
	// The database semaphore's real target: --dsn, --private-server and,
	// with --impl, the implementation's processes.
	dsn     string
	private bool
	lease   *process.LeaseImpl
}

func (f *proveFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.runs, "runs", 1000, "number of plans to draw (ignored with --time)")
	fs.DurationVar(&f.dur, "time", 0, "draw plans for this long instead of --runs")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the plans drawn; 0 picks one (and prints it)")
	fs.IntVar(&f.clients, "clients", 3, "at most this many clients per plan")
	fs.IntVar(&f.ops, "ops", 8, "at most this many steps per client")
	fs.IntVar(&f.maxFault, "max-faults", 3, "at most this many faults per plan")
	fs.StringVar(&f.faults, "faults", "all", "comma-separated faults plans may hold: kill, pause, partition, force-close, restart-broker, drop-reply, admin-crash; all; or none")
	fs.StringVar(&f.kind, "kind", "semaphore", "lock kind: semaphore or mutex (amqp-locks), or db-semaphore (the database semaphore, on the simulated database)")
	fs.StringVar(&f.props, "properties", "", "comma-separated properties whose violation counts; empty for all")
	fs.StringVar(&f.modelName, "model", "standard", "acquire-exact model: standard or strict")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "time budget of each linearizability check")
	fs.DurationVar(&f.shrink, "shrink-time", 30*time.Second, "time to spend minimising a counterexample")
	fs.DurationVar(&f.heartbeat, "heartbeat", 0, "heartbeat the reference proposes; default 10s on the simulator, 1s on a real broker (plans wait three heartbeats at their end); 0s for none")
	fs.StringVar(&f.target, "target", "sim", "where plans run: sim (the simulator), rabbitmq (a real broker, see --amqp-url) or, for --kind db-semaphore, mariadb (a real MariaDB, see --dsn)")
	fs.StringVar(&f.url, "amqp-url", "", "the real broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	fs.BoolVar(&f.restart, "allow-restart", false, "let plans on a real broker restart it (rabbitmqctl stop_app/start_app)")
	fs.StringVar(&f.impl, "impl", "", "prove an implementation that runs as processes speaking the protocol (docs/protocol.md) instead of the reference; implies --target rabbitmq (--target mariadb for --kind db-semaphore)")
	fs.StringVar(&f.dsn, "dsn", "", "the real MariaDB's DSN (go-sql-driver form, over tcp); default $LOCKPROVER_MYSQL_DSN, else "+mysql.DefaultDSN)
	fs.BoolVar(&f.private, "private-server", false, "run --target mariadb on a private mariadbd of the run's own (own datadir and port, stopped at the end), which plans may restart")
	fs.StringVar(&f.options, "options", "", "the reference's options as in plans, comma-separated: lazy_connect, channels=per-purpose, reconnect, plain_failure, scan_start=random, delete_order=ascending, overshoot=N, ...")
}

// config checks the flags and turns them into a prover configuration;
// every problem names its flag.
func (f *proveFlags) config(fs *flag.FlagSet) (prover.Config, amqp.Config, error) {
	c := prover.Config{Strict: f.modelName == "strict", Timeout: f.timeout}
	a := amqp.Config{Kind: f.kind, Clients: f.clients, Ops: f.ops, MaxFaults: f.maxFault}
	if bad := f.check(fs); len(bad) > 0 {
		return c, a, errors.New(strings.Join(bad, "\n"+fs.Name()+": "))
	}
	if f.kind == dbsemaphore.Kind {
		return f.dbConfig(fs, c, a)
	}
	if err := f.amqpOptions(&a); err != nil {
		return c, a, err
	}
	if err := f.amqpTarget(fs, &a); err != nil {
		return c, a, err
	}
	if err := f.amqpFaults(&a); err != nil {
		return c, a, err
	}
	if given(fs, "properties") {
		props, err := parseProperties(f.props)
		if err != nil {
			return c, a, err
		}
		c.Properties = props
	}
	return c, a, nil
}

// check lists what is wrong with the flags' values each on its own, for
// every family, so that all of it is reported at once.
func (f *proveFlags) check(fs *flag.FlagSet) checks {
	var bad checks
	bad.oneOf("kind", f.kind, histories.Semaphore, histories.Mutex, dbsemaphore.Kind)
	bad.oneOf("model", f.modelName, "standard", "strict")
	bad.positive("clients", f.clients)
	bad.positive("ops", f.ops)
	bad.nonNegative("max-faults", f.maxFault)
	bad.duration("time", f.dur, true)
	bad.add(f.dur == 0 && f.runs < 1, "--runs must be at least 1, not %d", f.runs)
	bad.add(f.dur > 0 && given(fs, "runs"), "--runs and --time exclude each other: give one")
	bad.duration("timeout", f.timeout, false)
	bad.duration("shrink-time", f.shrink, true)
	bad.duration("heartbeat", f.heartbeat, true)
	bad.add(f.heartbeat > 0 && f.heartbeat < time.Millisecond, "--heartbeat must be at least 1ms (or 0s for none), not %v", f.heartbeat)
	bad.oneOf("target", f.target, "sim", "rabbitmq", "mariadb")
	bad.add(given(fs, "impl") && strings.TrimSpace(f.impl) == "", "--impl needs a command")
	return bad
}

// amqpOptions sets the reference's options in a: the heartbeat (the
// target's default unless --heartbeat says otherwise), --options, and
// --impl, which replaces the reference and moves the run to a real broker.
func (f *proveFlags) amqpOptions(a *amqp.Config) error {
	switch {
	case f.heartbeatSet && f.heartbeat == 0:
		a.Options.HeartbeatMs = amqp.Ms(0)
	case f.heartbeatSet:
		a.Options.HeartbeatMs = amqp.Ms(int(f.heartbeat.Milliseconds()))
	case f.target == "rabbitmq":
		a.Options.HeartbeatMs = amqp.Ms(1000)
	}
	if f.options != "" {
		if f.impl != "" {
			return errors.New("--options sets the reference's options; for the reference served over the protocol use --impl 'lockprover serve-reference --options ...'")
		}
		o, err := amqp.ParseOptions(a.Options, f.options)
		if err != nil {
			return fmt.Errorf("--options: %w", err)
		}
		a.Options = o
	}
	if f.impl != "" {
		if f.targetSet && f.target != "rabbitmq" {
			return errors.New("--impl runs processes against a real broker: use --target rabbitmq")
		}
		f.target = "rabbitmq"
		f.process = &process.Impl{Command: f.impl}
		a.Impl = f.process
		if !f.heartbeatSet {
			a.Options.HeartbeatMs = amqp.Ms(1000)
		}
	}
	return nil
}

// amqpTarget sets where plans run: the simulator refuses the flags of a
// real broker, and a real broker by default draws no broker restart unless
// --allow-restart lets it.
func (f *proveFlags) amqpTarget(fs *flag.FlagSet, a *amqp.Config) error {
	switch f.target {
	case "sim":
		for _, name := range []string{"amqp-url", "allow-restart"} {
			if given(fs, name) {
				return fmt.Errorf("--%s is for a real broker: add --target rabbitmq", name)
			}
		}
	case "rabbitmq":
		a.Target = amqp.RabbitMQ{URL: brokerURL(f.url), AllowRestart: f.restart}
		if f.faults == "all" && !f.restart {
			a.Faults = withoutRestart(amqp.FaultNames())
		}
	}
	return nil
}

// amqpFaults reads --faults for amqp-locks: all (as the target allows),
// none, or a list of known faults, a broker restart on a real broker only
// with --allow-restart.
func (f *proveFlags) amqpFaults(a *amqp.Config) error {
	switch f.faults {
	case "all":
	case "none":
		a.Faults = []string{}
	default:
		for _, name := range strings.Split(f.faults, ",") {
			if !known(name, amqp.FaultNames()) {
				return fmt.Errorf("--faults: unknown fault %q (want some of %s; all; or none)", name, strings.Join(amqp.FaultNames(), ", "))
			}
			if name == histories.RestartBroker && f.target == "rabbitmq" && !f.restart {
				return errors.New("--faults: restart-broker on a real broker needs --allow-restart")
			}
			a.Faults = append(a.Faults, name)
		}
	}
	return nil
}

// search turns prove's flags into the search to run, reporting on stderr
// every flag that is wrong.
func (f *proveFlags) search(fs *flag.FlagSet, mutant, shard, out string, outf *outputFlags, stderr io.Writer) (prover.Search, amqp.Config, bool) {
	c, a, err := f.config(fs)
	switch {
	case err != nil:
	case c.Family != nil: // db-semaphore
		db := c.Family.(dbsemaphore.Config)
		if mutant != "" && dbsemaphore.MutantNamed(mutant) == nil {
			err = fmt.Errorf("--mutant: no %s mutant named %q (see lockprover mutants)", dbsemaphore.Kind, mutant)
		}
		db.Mutant, a.Mutant = mutant, mutant
		c.Family = db
	case mutant != "" && amqp.MutantNamed(mutant) == nil:
		err = fmt.Errorf("--mutant: no mutant named %q (see lockprover mutants)", mutant)
	case mutant != "" && f.impl != "":
		err = errors.New("--mutant is a mutant of the reference; for one served over the protocol use --impl 'lockprover serve-reference --mutant NAME'")
	}
	if err != nil {
		fmt.Fprintf(stderr, "prove: %v\n", err)
		return prover.Search{}, a, false
	}
	if c.Family == nil {
		a.Mutant = mutant
		c.Family = a
	}
	s := prover.Search{Config: c, Seed: f.seed, Shrink: f.shrink}
	if f.shrink == 0 {
		s.Shrink = time.Nanosecond // no shrinking
	}
	if s.Shard, s.Shards, err = parseShard(shard); err != nil {
		fmt.Fprintf(stderr, "prove: --shard: %v\n", err)
		return s, a, false
	}
	if err := checkOut(out); err != nil {
		fmt.Fprintf(stderr, "prove: --out: %v\n", err)
		return s, a, false
	}
	var bad checks
	outf.check(&bad)
	return s, a, bad.report("prove", stderr)
}

// dbConfig is config for --kind db-semaphore: the database semaphore's
// reference (or a mutant) on the simulated database. Flags that belong to
// amqp-locks are refused by name.
func (f *proveFlags) dbConfig(fs *flag.FlagSet, c prover.Config, a amqp.Config) (prover.Config, amqp.Config, error) {
	for _, name := range []string{"heartbeat", "amqp-url", "allow-restart"} {
		if given(fs, name) {
			return c, a, fmt.Errorf("--%s is for amqp-locks, not --kind %s", name, dbsemaphore.Kind)
		}
	}
	d := dbsemaphore.Config{Clients: f.clients, Ops: f.ops, MaxFaults: f.maxFault}
	if err := f.dbTarget(fs, &d); err != nil {
		return c, a, err
	}
	if f.options != "" {
		if f.impl != "" {
			return c, a, errors.New("--options sets the reference's options; an implementation given with --impl has its own")
		}
		o, err := dbsemaphore.ParseOptions(f.options)
		if err != nil {
			return c, a, fmt.Errorf("--options: %w", err)
		}
		d.Options = o
	}
	if err := f.dbFaults(&d); err != nil {
		return c, a, err
	}
	if given(fs, "properties") {
		props, err := parsePropertiesOf(f.props, lease.Properties)
		if err != nil {
			return c, a, err
		}
		c.Properties = props
	}
	c.Family = d
	return c, a, nil
}

// dbTarget sets where the database semaphore's plans run: the simulated
// database, or a real MariaDB (--target mariadb, which --impl implies)
// named by --dsn or, with --private-server, started by the run.
func (f *proveFlags) dbTarget(fs *flag.FlagSet, d *dbsemaphore.Config) error {
	if f.impl != "" {
		if f.targetSet && f.target != "mariadb" {
			return fmt.Errorf("--impl runs processes against a real database: use --target mariadb")
		}
		f.target = "mariadb"
		f.lease = &process.LeaseImpl{Command: f.impl}
		d.Impl = f.lease
	}
	switch f.target {
	case "rabbitmq":
		return fmt.Errorf("--kind %s runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)", dbsemaphore.Kind)
	case "sim":
		for _, name := range []string{"dsn", "private-server"} {
			if given(fs, name) {
				return fmt.Errorf("--%s is for a real database: add --target mariadb", name)
			}
		}
		return nil
	}
	if f.private && given(fs, "dsn") {
		return errors.New("--dsn and --private-server exclude each other: the private server has its own")
	}
	d.Target = dbsemaphore.MariaDB{DSN: mysqlDSN(f.dsn)} // with --private-server, its server is set once started
	return nil
}

// dbFaults reads --faults for the database semaphore: all (but a restart
// of a shared server), none, or a list.
func (f *proveFlags) dbFaults(d *dbsemaphore.Config) error {
	switch f.faults {
	case "all":
		if f.target == "mariadb" && !f.private {
			d.Faults = withoutRestart(dbsemaphore.FaultNames())
		}
		return nil
	case "none":
		d.Faults = []string{}
		return nil
	}
	for _, name := range strings.Split(f.faults, ",") {
		if !known(name, dbsemaphore.FaultNames()) {
			return fmt.Errorf("--faults: unknown fault %q for --kind %s (want some of %s; all; or none)", name, dbsemaphore.Kind, strings.Join(dbsemaphore.FaultNames(), ", "))
		}
		if name == histories.RestartBroker && f.target == "mariadb" && !f.private {
			return errors.New("--faults: restart-broker on MariaDB needs --private-server (the shared server is never restarted)")
		}
		d.Faults = append(d.Faults, name)
	}
	return nil
}

// describe says what is proven and where, as prove's first line says it.
func (f *proveFlags) describe(a amqp.Config) (what, where string) {
	what = "the reference"
	switch {
	case a.Mutant != "":
		what = "mutant " + a.Mutant
	case f.impl != "":
		what = fmt.Sprintf("%q", f.impl)
	}
	if f.options != "" {
		what += " with options " + f.options
	}
	where = "the simulator"
	if f.kind == dbsemaphore.Kind {
		where = "the simulated database"
	}
	switch {
	case f.target == "rabbitmq":
		where = "RabbitMQ at " + redact(brokerURL(f.url))
	case f.target == "mariadb" && f.private:
		where = "a private MariaDB of the run's own"
	case f.target == "mariadb":
		where = dbsemaphore.MariaDB{DSN: mysqlDSN(f.dsn)}.String()
	}
	return what, where
}

// preflight tries the broker and the implementation once before the first
// plan: code is the exit status and err what the summary records when one
// of them cannot be used, code is -1 when both can.
func (f *proveFlags) preflight(ctx context.Context, kind string, stderr io.Writer) (code int, err error) {
	if f.target == "rabbitmq" {
		if code := preflight(ctx, "prove", brokerURL(f.url), stderr); code >= 0 {
			return code, errors.New("the broker cannot be used (see stderr)")
		}
	}
	if f.process != nil {
		if err := f.process.Preflight(ctx, brokerURL(f.url), kind); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(stderr, "prove: interrupted during the implementation's preflight")
				return exitInterrupted, nil
			}
			fmt.Fprintf(stderr, "prove: the implementation failed its preflight: %v\n(lockprover validate-impl --impl %s says what to fix)\n", err, shellQuote(f.impl))
			return exitUsage, fmt.Errorf("the implementation failed its preflight: %v", err)
		}
	}
	return -1, nil
}

// summarize records a search's outcome in the run's summary.
func summarize(sum *results.Summary, o *prover.Outcome, props []string, rate float64) {
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
	sum.Properties = tally(o.Verdicts, props, cxOf)
}

// replayFlags are the flags a replay of this run's counterexample needs:
// the implementation, the broker or database (its URL or DSN only when it
// holds no password), a restart allowed, the check's time budget.
func (f *proveFlags) replayFlags(fs *flag.FlagSet) []string {
	var replay []string
	if f.impl != "" {
		replay = append(replay, "--impl", shellQuote(f.impl))
	} else if f.target == "mariadb" {
		replay = append(replay, "--target", "mariadb")
	}
	if f.target == "mariadb" {
		if f.private {
			replay = append(replay, "--private-server")
		} else if cfg, err := driver.ParseDSN(f.dsn); f.dsn != "" && err == nil && cfg.Passwd == "" {
			replay = append(replay, "--dsn", shellQuote(f.dsn))
		}
	} else if f.impl == "" && f.target == "rabbitmq" {
		replay = append(replay, "--target", "rabbitmq")
		if u, err := url.Parse(f.url); f.url != "" && err == nil && u.User != nil {
			if _, hasPassword := u.User.Password(); !hasPassword {
				replay = append(replay, "--amqp-url", shellQuote(f.url))
			}
		} else if f.url != "" && err == nil {
			replay = append(replay, "--amqp-url", shellQuote(f.url))
		}
	}
	if f.restart {
		replay = append(replay, "--allow-restart")
	}
	if given(fs, "timeout") {
		replay = append(replay, "--timeout", f.timeout.String())
	}
	return replay
}

// parseProperties reads --properties: comma-separated property names of
// amqp-locks.
func parseProperties(s string) ([]string, error) { return parsePropertiesOf(s, properties) }

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

var properties = amqp.PropertyNames

func known(s string, list []string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

const proveSynopsis = `prove [--runs N | --time D] [--seed S] [--clients N] [--ops N] [--max-faults N]
                  [--faults kill,pause,...|all|none] [--kind semaphore|mutex|db-semaphore]
                  [--properties P,...] [--model standard|strict] [--timeout D]
                  [--shrink-time D] [--heartbeat D] [--options K=V,...] [--mutant NAME]
                  [--target sim|rabbitmq|mariadb] [--amqp-url URL] [--allow-restart]
                  [--dsn DSN] [--private-server] [--impl COMMAND] [--out DIR] [--shard i/n|auto]
                  [--parallel N] [--json FILE] [--junit FILE] [--quiet]`

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
	if p.f.process != nil {
		defer p.f.process.Stop()
	}
	what, where := p.f.describe(p.a)
	p.sum.Implementation, p.sum.Seed = what, strconv.FormatUint(p.s.Seed, 10)
	if !p.outf.quiet {
		fmt.Fprintf(stdout, "proving %s on %s, seed %d\n", what, where, p.s.Seed)
	}
	var onInterrupt func()
	switch {
	case p.f.process != nil:
		onInterrupt = p.f.process.Stop
	case p.f.lease != nil:
		onInterrupt = p.f.lease.Stop
		defer p.f.lease.Stop()
	}
	ctx, stop := interrupts(stderr, onInterrupt)
	defer stop()
	if code, err := p.f.preflight(ctx, p.a.Kind, stderr); code >= 0 {
		return p.finish(code, err, stderr)
	}
	if p.f.private {
		server, err := startPrivate(ctx, stdout, p.outf.quiet)
		if err != nil {
			fmt.Fprintf(stderr, "prove: --private-server: %v\n", err)
			return p.finish(exitUsage, err, stderr)
		}
		defer server.Stop()
		d := p.s.Config.Family.(dbsemaphore.Config)
		d.Target = dbsemaphore.MariaDB{Server: server.Server}
		p.s.Config.Family = d
	}
	return p.prove(ctx, term, stdout, stderr)
}

// startPrivate starts a private mariadbd for the run, in a temporary
// directory of its own that Stop removes.
func startPrivate(ctx context.Context, stdout io.Writer, quiet bool) (*privateServer, error) {
	dir, err := os.MkdirTemp("", "lockprover-mariadb-")
	if err != nil {
		return nil, err
	}
	s, err := mysql.StartPrivate(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if !quiet {
		fmt.Fprintf(stdout, "started a private MariaDB at %s (pid %d) for the run\n", s.Addr(), s.PID())
	}
	return &privateServer{s, dir}, nil
}

// A privateServer is a private mariadbd and its directory.
type privateServer struct {
	*mysql.Server
	dir string
}

// Stop stops the server and removes its directory.
func (p *privateServer) Stop() {
	p.Server.Stop()
	os.RemoveAll(p.dir)
}

// A proveRun is one run of prove: its flags, the search they make, and the
// summary the run fills in.
type proveRun struct {
	fs         *flag.FlagSet
	f          proveFlags
	out, shard string // --out and --shard
	parallel   int    // --parallel
	outf       outputFlags
	s          prover.Search
	a          amqp.Config
	sum        *results.Summary
}

// parseProveFlags reads prove's flags and turns them into the search to
// run: ok false with the exit status when the run must not start.
func parseProveFlags(args []string, stdout, stderr io.Writer) (p *proveRun, code int, ok bool) {
	fs := newFlags("prove", proveSynopsis, `Draws plans (admins, clients, faults, schedules) and proves the target on them;
by default the reference implementation on the simulator. On a violation it
shrinks the plan, writes the counterexample under --out and exits 1. A real
broker is tried once before the first plan: one that cannot be used (refused,
wrong password or vhost, not AMQP) is named at once, exit 2.
Exit status: 0 every property held, 1 a violation, 2 usage or bad input,
3 inconclusive (a check ran out of time), 130 interrupted.`, stderr)
	p = &proveRun{fs: fs}
	p.f.register(fs)
	mutant := fs.String("mutant", "", "prove this mutant of the reference instead (see lockprover mutants)")
	fs.StringVar(&p.out, "out", "lockprover-out", "directory for a counterexample")
	fs.IntVar(&p.parallel, "parallel", 0, "plans run at once, each on a lock (and processes, proxies) of its own: 0 means one per CPU on the simulator (the same plans and the same first counterexample whatever the number), four per CPU on a real target (where concurrency slows each plan: see the README)")
	fs.StringVar(&p.shard, "shard", "", "i/n: run the i-th of n shares of the seed's plans (i from 1; --runs counts them all); auto: the shard from the environment (LOCKPROVER_SHARD_INDEX and _COUNT, a Kubernetes Indexed Job's JOB_COMPLETION_INDEX with JOB_COMPLETIONS, GitLab's CI_NODE_INDEX and CI_NODE_TOTAL)")
	p.outf.register(fs, true)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return nil, code, false
	}
	if !noArgs("prove", pos, stderr) {
		return nil, exitUsage, false
	}
	p.f.noticeHeartbeat(fs)
	if p.s, p.a, ok = p.f.search(fs, *mutant, p.shard, p.out, &p.outf, stderr); !ok {
		return nil, exitUsage, false
	}
	var bad checks
	bad.nonNegative("parallel", p.parallel)
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
		p.sum.Verdict, p.sum.Error = results.Failed, err.Error()
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
	fmt.Fprintf(stdout, "%d plans, %d verdicts, %.1fs (%.1f plans/s)\n", o.Plans, o.Judged, o.Elapsed.Seconds(), rate)
	summarize(p.sum, o, s.Config.Properties, rate)
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
	fmt.Fprintln(stdout, "every property held")
	return exitOK
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
		if f != histories.RestartBroker {
			out = append(out, f)
		}
	}
	return out
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
		if v.Property == cx.Property && (v.Status == model.Fail || v.Status == model.Inconclusive) {
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
	return shellQuote(s)
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
