// Package dbsemcli registers the database semaphore
// (adapters/runners/dbsemrun) with lockprover (package family): on the
// simulated MariaDB and on a real or private one, with its side of the
// process protocol (dbsemprotocol), conform and bench. It is the family's
// top: only cmd/lockprover/all imports it.
package dbsemcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/cmd/lockprover/leasecli"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun/dbsemprotocol"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/lease"
)

// DBSemaphore is the database counting semaphore (adapters/runners/dbsemrun):
// leases in SQL tables, on the simulated database or a real MariaDB.
var DBSemaphore = &family.Descriptor{
	Name:       dbsemrun.Kind,
	Kinds:      []string{dbsemrun.Kind},
	Properties: lease.Properties,
	Faults:     dbsemrun.FaultNames(),
	Targets:    []family.Target{{Name: "sim", Faults: dbsemrun.FaultNames()}, {Name: "mariadb", Real: true, Faults: dbsemrun.FaultNames()}},
	Flags: append([]family.Flag{
		{Name: "dsn", Arg: "DSN", Real: true, Verbs: family.Server, Usage: "db-semaphore: the real MariaDB's DSN (go-sql-driver form, over tcp); default $LOCKPROVER_MYSQL_DSN, else " + mariadb.DefaultDSN},
		leasecli.TTL,
		{Name: "private-server", Bool: true, Real: true, Verbs: family.Server, Usage: "db-semaphore: run --target mariadb (validate-impl, bench, conform) on a private mariadbd of the run's own, which plans may restart\n (its own datadir and port, stopped at the end)"},
		serverVersionFlag,
	}, leasecli.Flags...),
	// How check judges lease locks, as every lease family says it.
	Judging:    leasecli.Judging,
	CheckFlags: leasecli.Check,

	Setup:    dbSetup,
	ReadPlan: func(path string) (prover.Plan, error) { return dbsemrun.ReadPlan(path) },
	Replay:   dbReplay,
	Serve:    dbServe,
	Validate: dbValidate,
	Explore:  dbsemrun.Explore,
	Bench:    dbBench,
	Conform:  dbConform,
}

func init() {
	for _, m := range dbsemrun.Mutants {
		DBSemaphore.Mutants = append(DBSemaphore.Mutants, family.Mutant{Name: m.Name, Property: m.Property, Defect: m.Defect, Prove: dbsemrun.Config{Scope: prover.Scope{Mutant: m.Name}}})
	}
	family.Register(DBSemaphore)
}

// serverVersionFlag is --server-version: the version of the private
// mariadbd a run starts (--private-server). The shared MariaDB (--dsn) is
// whatever version it runs: a version is a private server's.
var serverVersionFlag = serverversion.Flag(family.Server,
	"db-semaphore: with --private-server (--target mariadb, validate-impl, bench, conform), the version the private mariadbd runs: "+
		serverversion.Choices("mariadb-server", "mariadb")+
		"; the shared MariaDB --dsn names has no version flag: it runs what it runs")

// serverVersion is the version --server-version names ("" the machine's
// own): an unknown one, or one given without --private-server, is a
// *family.UsageError.
func serverVersion(s family.Settings) (versions.Version, error) {
	if s.Flag("server-version") != "" && s.Flag("private-server") == "" {
		return versions.Version{}, family.Usagef("--server-version: the version of a private mariadbd: add --private-server (the shared MariaDB --dsn names runs whatever version it runs, which no flag chooses)")
	}
	return serverversion.Parse(s, "mariadb")
}

// startServer starts a private mariadbd of version v, its root made
// first where v has one (told to log): a version that cannot be had here,
// or a machine without MariaDB, is a *family.UsageError saying what is
// missing.
func startServer(ctx context.Context, v versions.Version, log io.Writer) (*mariadb.Server, func(), error) {
	if log == nil {
		log = io.Discard
	}
	server, stop, err := mariadb.StartTempVersion(ctx, v, log)
	switch {
	case err == nil:
		return server, stop, nil
	case errors.Is(err, debroot.ErrUnavailable):
		return nil, nil, family.Usagef("--server-version: %s cannot be had here: %v", v, err)
	}
	return nil, nil, family.Usagef("--private-server: %v", err)
}

// privateDSN starts a private mariadbd (--private-server) for a verb that
// talks to a DSN (validate-impl, bench, conform), saying so on out, and
// gives its DSN and its stop; without --private-server, the DSN --dsn
// names and a stop that does nothing.
func privateDSN(ctx context.Context, s family.Settings, log, out io.Writer) (string, func(), error) {
	v, err := serverVersion(s)
	if err != nil {
		return "", nil, err
	}
	if s.Flag("private-server") == "" {
		return mariadb.DSN(s.Flag("dsn")), func() {}, nil
	}
	if s.Given("dsn") {
		return "", nil, family.Usagef("--dsn and --private-server exclude each other: the private server has its own")
	}
	server, stop, err := startServer(ctx, v, log)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "started a private MariaDB%s at %s (pid %d)\n", serverversion.Named(s, v), server.Addr(), server.PID())
	return server.DSN(), stop, nil
}

// dbSetup makes a database semaphore proof from the command line: the
// reference (or a mutant) on the simulated database, or on a real MariaDB
// (--target mariadb, which --impl implies) named by --dsn or, with
// --private-server, started by the run.
func dbSetup(s family.Settings) (*family.Setup, error) {
	d := dbsemrun.Config{Scope: prover.Scope{Clients: s.Clients, Ops: s.Ops, MaxFaults: s.MaxFaults}}
	setup, err := dbTarget(s, &d)
	if err != nil {
		return nil, err
	}
	if s.Options != "" {
		// The reference's design and fencing; an implementation given
		// with --impl is told them in every init (and refuses one it does
		// not support there, which its preflight reports).
		if d.Options, err = dbsemrun.ParseOptions(s.Options); err != nil {
			return nil, fmt.Errorf("--options: %w", err)
		}
	}
	ttl, err := leasecli.TTLMs(s.Flag("ttl"), time.Millisecond, 0, "at least 1ms")
	if err != nil {
		return nil, err
	}
	if ttl > 0 {
		d.TTLMs = ttl
	}
	if err := dbFaults(&d, s.Faults, setup.Target, s.Flag("private-server") != ""); err != nil {
		return nil, err
	}
	if s.Mutant != "" && dbsemrun.MutantNamed(s.Mutant) == nil {
		return nil, fmt.Errorf("--mutant: no %s mutant named %q (see lockprover mutants)", dbsemrun.Kind, s.Mutant)
	}
	d.Mutant = s.Mutant
	setup.Prove = d
	if s.Flag("private-server") != "" {
		v, err := serverVersion(s)
		if err != nil {
			return nil, err
		}
		startPrivate(s, setup, v, func(_ context.Context, server *mariadb.Server) error {
			d.Target = dbsemrun.MariaDB{Server: server}
			setup.Prove = d
			return nil
		})
	}
	return setup, nil
}

// startPrivate makes setup start a private MariaDB of the run's own
// (saying so unless quiet), hand it to then, and stop it after the
// implementation's processes.
func startPrivate(s family.Settings, setup *family.Setup, v versions.Version, then func(context.Context, *mariadb.Server) error) {
	var stopServer func()
	setup.Server = v.String()
	if s.Flag("server-version") != "" {
		setup.Where = serverversion.PrivateWhere(s, "MariaDB", v)
	}
	setup.Start = func(ctx context.Context) error {
		server, stop, err := startServer(ctx, v, s.Stderr)
		if err != nil {
			return err
		}
		stopServer = stop
		if !s.Quiet {
			fmt.Fprintf(s.Stdout, "started a private MariaDB%s at %s (pid %d) for the run\n", serverversion.Named(s, v), server.Addr(), server.PID())
		}
		return then(ctx, server)
	}
	stopImpl := setup.Stop
	setup.Stop = func() {
		if stopImpl != nil {
			stopImpl()
		}
		if stopServer != nil {
			stopServer()
		}
	}
}

// dbTarget sets where the database semaphore's plans run: the simulated
// database, or a real MariaDB (--target mariadb, which --impl implies).
func dbTarget(s family.Settings, d *dbsemrun.Config) (*family.Setup, error) {
	setup := &family.Setup{Target: s.Target, Where: "the simulated database"}
	if setup.Target == "" {
		setup.Target = "sim"
	}
	dsn, private := s.Flag("dsn"), s.Flag("private-server") != ""
	if s.Impl != "" {
		if s.Target != "" && s.Target != "mariadb" {
			return nil, fmt.Errorf("--impl runs processes against a real database: use --target mariadb")
		}
		setup.Target = "mariadb"
		li := dbsemprotocol.NewProcesses(s.Impl)
		li.InitTimeout = s.InitTimeout
		d.Impl, setup.Interrupt, setup.Stop = li, li.Stop, li.Stop
	}
	switch setup.Target {
	case "sim":
		for _, name := range []string{"dsn", "private-server", "server-version"} {
			if s.Given(name) {
				return nil, fmt.Errorf("--%s is for a real database: add --target mariadb", name)
			}
		}
		return setup, nil
	case "mariadb":
	default:
		return nil, fmt.Errorf("--kind %s runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)", dbsemrun.Kind)
	}
	if private && s.Given("dsn") {
		return nil, errors.New("--dsn and --private-server exclude each other: the private server has its own")
	}
	if _, err := serverVersion(s); err != nil {
		return nil, err
	}
	d.Target = dbsemrun.MariaDB{DSN: mariadb.DSN(dsn)} // with --private-server, its server is set once started
	setup.Real = true
	setup.Where = d.Target.(dbsemrun.MariaDB).String()
	if private {
		setup.Where = "a private MariaDB of the run's own"
	}
	setup.Replay = dbReplayFlags(s.Impl, dsn, private)
	if s.Flag("server-version") != "" {
		setup.Replay = append(setup.Replay, "--server-version", s.Flag("server-version"))
	}
	return setup, nil
}

// dbFaults reads --faults for the database semaphore: all (but a restart
// of a shared server), none, or a list.
func dbFaults(d *dbsemrun.Config, faults, target string, private bool) error {
	switch faults {
	case "all":
		if target == "mariadb" && !private {
			d.Faults = slices.DeleteFunc(dbsemrun.FaultNames(), isRestart)
		}
		return nil
	case "none":
		d.Faults = []string{}
		return nil
	}
	for _, name := range strings.Split(faults, ",") {
		if !slices.Contains(dbsemrun.FaultNames(), name) {
			return fmt.Errorf("--faults: unknown fault %q for --kind %s (want some of %s; all; or none)", name, dbsemrun.Kind, strings.Join(dbsemrun.FaultNames(), ", "))
		}
		if name == histories.RestartBroker && target == "mariadb" && !private {
			return errors.New("--faults: restart-broker on MariaDB needs --private-server (the shared server is never restarted)")
		}
		d.Faults = append(d.Faults, name)
	}
	return nil
}

// dbReplayFlags are the flags a replay of a plan on MariaDB needs: the
// implementation or the target, the private server, or the DSN when it
// holds no password.
func dbReplayFlags(impl, dsn string, private bool) []string {
	var replay []string
	if impl != "" {
		replay = append(replay, "--impl", family.Quote(impl))
	} else {
		replay = append(replay, "--target", "mariadb")
	}
	if private {
		replay = append(replay, "--private-server")
	} else if cfg, err := driver.ParseDSN(dsn); dsn != "" && err == nil && cfg.Passwd == "" {
		replay = append(replay, "--dsn", family.Quote(dsn))
	}
	return replay
}

// dbReplay makes a database semaphore plan read back ready to run: on the
// simulated database (its trace to s.Trace) or on a real MariaDB, against
// the reference, a mutant, or --impl.
func dbReplay(pl prover.Plan, s family.Settings) (*family.Setup, error) {
	p := pl.(*dbsemrun.Plan)
	target := s.Target
	if target == "" && s.Impl != "" {
		target = "mariadb"
	}
	if target == "" {
		target = "sim"
	}
	private := s.Flag("private-server") != ""
	switch {
	case target != "sim" && target != "mariadb":
		return nil, fmt.Errorf("a %s plan runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)", dbsemrun.Kind)
	case target == "sim" && (s.Given("dsn") || private || s.Given("server-version")):
		return nil, errors.New("--dsn, --private-server and --server-version are for a real database: add --target mariadb")
	case private && s.Given("dsn"):
		return nil, errors.New("--dsn and --private-server exclude each other: the private server has its own")
	}
	v, err := serverVersion(s)
	if err != nil {
		return nil, err
	}
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, dbsemrun.MutantNamed(s.Mutant) != nil, "no db-semaphore mutant named %q (see lockprover mutants --kind db-semaphore)"); err != nil {
		return nil, err
	}
	if s.Impl != "" && p.Mutant != "" {
		return nil, fmt.Errorf("the plan names mutant %s: add --mutant reference to run it against --impl", p.Mutant)
	}
	c := dbsemrun.Config{Scope: prover.Scope{Mutant: p.Mutant}}
	setup := &family.Setup{Target: target, Where: "the simulated database", Stop: func() {}}
	if s.Impl != "" {
		li := dbsemprotocol.NewProcesses(s.Impl)
		li.InitTimeout = s.InitTimeout
		c.Impl, setup.Stop, setup.Interrupt = li, li.Stop, li.Stop
	}
	if target == "sim" {
		setup.What, setup.Prove = c.String(), simulated{c, s.Trace}
		return setup, nil
	}
	c.Target = dbsemrun.MariaDB{DSN: mariadb.DSN(s.Flag("dsn"))}
	setup.What, setup.Real, setup.Where = c.String(), true, "MariaDB"
	setup.Prove = c
	if private {
		startPrivate(s, setup, v, func(ctx context.Context, server *mariadb.Server) error {
			c.Target = dbsemrun.MariaDB{Server: server}
			setup.Prove = c
			return c.Preflight(ctx)
		})
	} else {
		setup.Start = func(ctx context.Context) error { return c.Preflight(ctx) }
	}
	return setup, nil
}

// simulated runs a database semaphore plan on the simulated database with
// its trace to trace (nil for none).
type simulated struct {
	dbsemrun.Config
	trace io.Writer
}

func (s simulated) Run(_ context.Context, p prover.Plan) (*prover.Result, error) {
	return dbsemrun.Simulate(p.(*dbsemrun.Plan), s.trace)
}

// dbServe serves the database semaphore's reference (or a mutant) over
// the protocol; its design and fencing come from init, and --options may
// give it a grain of lease time (grain=D: each ttl granted rounded up to
// whole grains, said in the reply; with unsaid, not said).
func dbServe(in io.Reader, out, log io.Writer, mutant, options string) error {
	o, err := dbServeOptions(options)
	if err != nil {
		return err
	}
	o.Log = log
	if mutant != "" {
		m := dbsemrun.MutantNamed(mutant)
		if m == nil {
			return family.Usagef("--mutant: no mutant named %q (see lockprover mutants --kind db-semaphore)", mutant)
		}
		o.Defects = m.Defects()
	}
	return dbsemprotocol.Serve(in, out, o)
}

// dbServeOptions reads serve-reference's --options for the database
// semaphore: grain=D (a duration of whole milliseconds) and unsaid.
func dbServeOptions(options string) (dbsemprotocol.ServeOptions, error) {
	var o dbsemprotocol.ServeOptions
	if options == "" {
		return o, nil
	}
	for _, kv := range strings.Split(options, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "grain":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d%time.Millisecond != 0 {
				return o, family.Usagef("--options: grain=%s: want a duration of whole milliseconds, at least 1ms (grain=1s)", v)
			}
			o.Grain = d
		case kv == "unsaid":
			o.Unsaid = true
		default:
			return o, family.Usagef("--options: unknown option %q: the database semaphore takes its design and fencing from init, and serves with grain=D (a lease time grain) and unsaid (granted leases not said)", kv)
		}
	}
	if o.Unsaid && o.Grain == 0 {
		return o, family.Usagef("--options: unsaid needs a grain (grain=1s,unsaid)")
	}
	return o, nil
}

// dbValidate checks an implementation of the database semaphore against
// the database --dsn names, with the session's design and fencing from
// --options.
func dbValidate(ctx context.Context, command string, s family.Settings, out io.Writer) (bool, error) {
	var o dbsemrun.Options
	if s.Options != "" {
		var err error
		if o, err = dbsemrun.ParseOptions(s.Options); err != nil {
			return false, family.Usagef("--options: %v", err)
		}
	}
	dsn, stop, err := privateDSN(ctx, s, s.Stderr, out)
	if err != nil {
		return false, err
	}
	defer stop()
	passed, err := dbsemprotocol.ValidateInit(ctx, command, s.InitTimeout, dsn, o, out)
	if err != nil && ctx.Err() == nil {
		return false, &family.UsageError{Err: fmt.Errorf("%w\ncannot use the database, so the implementation was not tried", err)}
	}
	return passed, nil
}

// dbBench measures the reference (its design and fencing from --options)
// on the MariaDB --dsn names beside its floors.
func dbBench(ctx context.Context, s family.Settings, c bench.Config, out io.Writer) error {
	o, err := dbsemrun.ParseOptions(s.Options)
	if s.Options != "" && err != nil {
		return family.Usagef("--options: %v", err)
	}
	dsn, stop, err := privateDSN(ctx, s, nil, out)
	if err != nil {
		return err
	}
	defer stop()
	err = dbsemrun.Bench(ctx, dsn, o, c, out)
	var pe *dbsemrun.PreflightError
	if errors.As(err, &pe) {
		return &family.UsageError{Err: err}
	}
	return err
}

// dbConform runs drawn sequences of dbsem's statements on the simulated
// database and on the MariaDB --dsn names.
func dbConform(ctx context.Context, s family.Settings, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	if c.Sequences == 0 {
		return 0, family.Usagef("--sequences 0 leaves nothing to run with --kind %s", dbsemrun.Kind)
	}
	dsn, stop, err := privateDSN(ctx, s, c.Log, out)
	if err != nil {
		return 0, err
	}
	defer stop()
	rep, err := conform.MariaDB(ctx, dsn, c.Sequences, c.Seed, out)
	switch {
	case ctx.Err() != nil:
		return 0, fmt.Errorf("interrupted; its tables are dropped: %w", ctx.Err())
	case err != nil:
		return 0, &family.UsageError{Err: err}
	case rep.Found != nil:
		return family.Diverge, nil
	}
	return family.Agree, nil
}

// isRestart says whether a fault is restart-broker, which a plan on a
// shared real server may not draw.
func isRestart(fault string) bool { return fault == histories.RestartBroker }
