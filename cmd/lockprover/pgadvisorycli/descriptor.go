// Package pgadvisorycli registers the PostgreSQL advisory-lock family
// (adapters/runners/pgadvisoryrun) with lockprover (package family): its plans run
// on the simulated PostgreSQL (sim/postgressim), or on a private PostgreSQL
// server the run starts and stops. It is the family's top: only
// cmd/lockprover/all imports it.
package pgadvisorycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/conform/postgresconform"
	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun/pgadvisoryprotocol"
	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/cmd/lockprover/leasecli"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
)

// target is the family's real target: a private PostgreSQL server.
const target = "postgres"

// PGAdvisory is the PostgreSQL advisory-lock family.
var PGAdvisory = &family.Descriptor{
	Name:       pgadvisoryrun.Kind,
	Kinds:      []string{pgadvisoryrun.Kind},
	Properties: lease.Properties,
	Faults:     pgadvisoryrun.FaultNames(),
	// The simulator, and a real server, a private one of the run's own.
	Targets:    []family.Target{{Name: "sim", Faults: pgadvisoryrun.FaultNames()}, {Name: target, Real: true, Faults: pgadvisoryrun.FaultNames()}},
	Flags:      append([]family.Flag{leasecli.TTL, serverVersionFlag}, leasecli.Flags...),
	Judging:    leasecli.Judging,
	CheckFlags: leasecli.Check,
	Setup:      setup,
	ReadPlan:   func(path string) (prover.Plan, error) { return pgadvisoryrun.ReadPlan(path) },
	Replay:     replay,
	Serve:      serve,
	Validate:   validate,
	Conform:    conform,
}

func init() {
	for _, m := range pgadvisoryrun.Mutants {
		PGAdvisory.Mutants = append(PGAdvisory.Mutants, family.Mutant{Name: m.Name, Property: m.Property, Defect: m.Defect,
			Prove: pgadvisoryrun.Config{Scope: prover.Scope{Mutant: m.Name}}})
	}
	family.Register(PGAdvisory)
}

// serverVersionFlag is --server-version: the version of the private
// PostgreSQL a run starts.
var serverVersionFlag = serverversion.Flag(family.Server,
	"pg-advisory: on a private PostgreSQL (--target postgres, validate-impl, conform), the version it runs: "+
		serverversion.Choices("postgresql", "postgresql"))

// serverVersion is the version --server-version names ("" the machine's
// own); an unknown one is a *family.UsageError listing those it takes.
func serverVersion(s family.Settings) (versions.Version, error) {
	return serverversion.Parse(s, "postgresql")
}

// startServer starts a private PostgreSQL of version v for a run, its
// root made first where v has one (told to log): a version that cannot be
// had here, or a machine without PostgreSQL, is a *family.UsageError
// saying what is missing.
func startServer(ctx context.Context, v versions.Version, log io.Writer) (*postgres.Server, func(), error) {
	if log == nil {
		log = io.Discard
	}
	server, stop, err := postgres.StartTempVersion(ctx, v, log)
	switch {
	case err == nil:
		return server, stop, nil
	case errors.Is(err, debroot.ErrUnavailable):
		return nil, nil, family.Usagef("--server-version: %s cannot be had here: %v", v, err)
	case errors.Is(err, postgres.ErrNoServer) || errors.Is(err, postgres.ErrNoUser):
		return nil, nil, family.Usagef("%v", err)
	}
	return nil, nil, family.Usagef("a private PostgreSQL: %v", err)
}

// simWhere is where plans run on the simulator.
const simWhere = "the simulated PostgreSQL"

// checkTarget says where the plans run: the simulator ("" means sim,
// unless --impl, which needs a real server: postgres), or a private
// PostgreSQL.
func checkTarget(s family.Settings) (string, error) {
	where, err := targetOf(s)
	if err == nil && where == "sim" && s.Flag("server-version") != "" {
		return "", family.Usagef("--server-version: the version of a private PostgreSQL; --kind %s runs on the simulated one unless --target %s (or --impl)", pgadvisoryrun.Kind, target)
	}
	return where, err
}

// targetOf is the target s names, or implies.
func targetOf(s family.Settings) (string, error) {
	switch {
	case s.Target == "" && s.Impl != "":
		return target, nil
	case s.Target == "":
		return "sim", nil
	case s.Target == "sim" && s.Impl != "":
		return "", family.Usagef("--impl runs processes against a real PostgreSQL: use --target %s", target)
	case s.Target != "sim" && s.Target != target:
		return "", family.Usagef("--kind %s runs on the simulated PostgreSQL (--target sim) or a private PostgreSQL (--target %s), not %q", pgadvisoryrun.Kind, target, s.Target)
	}
	return s.Target, nil
}

// setup makes a proof from the command line: the reference (or a
// mutant) on the simulator, or on a private PostgreSQL the run starts.
func setup(s family.Settings) (*family.Setup, error) {
	where, err := checkTarget(s)
	if err != nil {
		return nil, err
	}
	v, err := serverVersion(s)
	if err != nil {
		return nil, err
	}
	c := pgadvisoryrun.Config{Scope: prover.Scope{Clients: s.Clients, Ops: s.Ops, MaxFaults: s.MaxFaults}}
	if s.Mutant != "" && pgadvisoryrun.MutantNamed(s.Mutant) == nil {
		return nil, fmt.Errorf("--mutant: no %s mutant named %q (%s)", pgadvisoryrun.Kind, s.Mutant, mutantNames())
	}
	c.Mutant = s.Mutant
	var stopImpl func()
	if s.Impl != "" {
		if s.Mutant != "" {
			return nil, errors.New("--mutant is a variant of the reference: it cannot be given with --impl")
		}
		li := pgadvisoryprotocol.NewProcesses(s.Impl)
		li.InitTimeout = s.InitTimeout
		c.Impl, stopImpl = li, li.Stop
	}
	if s.Options != "" {
		return nil, fmt.Errorf("--options: --kind %s takes none", pgadvisoryrun.Kind)
	}
	ttl, err := leasecli.TTLMs(s.Flag("ttl"), 10*time.Millisecond, time.Minute, "10ms to 1m")
	if err != nil {
		return nil, err
	}
	if ttl > 0 {
		c.TTLMs = ttl
	}
	if c.Faults, err = leasecli.Faults(s.Faults, pgadvisoryrun.Kind, pgadvisoryrun.FaultNames(), "all, which is kill, pause and partition"); err != nil {
		return nil, err
	}
	if where == "sim" {
		return &family.Setup{Target: "sim", Where: simWhere, Prove: c}, nil
	}
	st := &family.Setup{Target: target, Where: serverversion.PrivateWhere(s, "PostgreSQL", v), Real: true, Prove: c, Server: v.String(),
		Replay: []string{"--target", target}}
	if s.Impl != "" {
		st.Replay = append(st.Replay, "--impl", family.Quote(s.Impl))
	}
	if s.Flag("server-version") != "" {
		st.Replay = append(st.Replay, "--server-version", v.Name)
	}
	startPrivate(s, st, v, stopImpl, func(server *postgres.Server) { c.Server = server; st.Prove = c })
	return st, nil
}

// mutantNames lists the family's mutants.
func mutantNames() string {
	var names []string
	for _, m := range pgadvisoryrun.Mutants {
		names = append(names, m.Name)
	}
	return "its mutants: " + strings.Join(names, ", ")
}

// startPrivate makes st start a private PostgreSQL of version v for the
// run (saying so unless quiet), hand it to then, and stop it, its data
// removed, at the end, after the implementation's processes (stopImpl, if
// set).
func startPrivate(s family.Settings, st *family.Setup, v versions.Version, stopImpl func(), then func(*postgres.Server)) {
	var stopServer func()
	st.Start = func(ctx context.Context) error {
		server, stop, err := startServer(ctx, v, s.Stderr)
		if err != nil {
			return err
		}
		stopServer = stop
		if !s.Quiet {
			fmt.Fprintf(s.Stdout, "started a private PostgreSQL%s at %s (pid %d) for the run\n", serverversion.Named(s, v), server.Addr(), server.PID())
		}
		then(server)
		return nil
	}
	st.Stop = func() {
		if stopImpl != nil {
			stopImpl()
		}
		if stopServer != nil {
			stopServer()
			stopServer = nil
		}
	}
	st.Interrupt = st.Stop
	if stopImpl != nil {
		st.Interrupt = stopImpl
	}
}

// replay makes a plan read back ready to run again on the simulator or a
// private PostgreSQL, with s.Mutant ("reference" for none) replacing its mutant.
func replay(pl prover.Plan, s family.Settings) (*family.Setup, error) {
	p := pl.(*pgadvisoryrun.Plan)
	where, err := checkTarget(s)
	if err != nil {
		return nil, err
	}
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, pgadvisoryrun.MutantNamed(s.Mutant) != nil, "no pg-advisory mutant named %q"); err != nil {
		return nil, err
	}
	if s.Impl != "" && p.Mutant != "" {
		return nil, fmt.Errorf("the plan names mutant %s: add --mutant reference to run it against --impl", p.Mutant)
	}
	v, err := serverVersion(s)
	if err != nil {
		return nil, err
	}
	c := pgadvisoryrun.Config{Scope: prover.Scope{Mutant: p.Mutant}}
	if where == "sim" {
		return &family.Setup{Target: "sim", Where: simWhere, What: c.String(), Prove: simulated{c, s.Trace}}, nil
	}
	var stopImpl func()
	if s.Impl != "" {
		li := pgadvisoryprotocol.NewProcesses(s.Impl)
		li.InitTimeout = s.InitTimeout
		c.Impl, stopImpl = li, li.Stop
	}
	st := &family.Setup{Target: target, Where: serverversion.PrivateWhere(s, "PostgreSQL", v), Real: true, What: c.String(), Prove: c, Server: v.String()}
	startPrivate(s, st, v, stopImpl, func(server *postgres.Server) { c.Server = server; st.Prove = c })
	return st, nil
}

// conform holds the simulator (sim/postgressim) to a private PostgreSQL the
// run starts: c.Sequences drawn sequences from c.Seed (postgresconform.Conform).
func conform(ctx context.Context, s family.Settings, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	if c.Sequences == 0 {
		return 0, family.Usagef("--sequences 0 leaves nothing to run with --kind %s", pgadvisoryrun.Kind)
	}
	v, err := serverVersion(s)
	if err != nil {
		return 0, err
	}
	server, stop, err := startServer(ctx, v, c.Log)
	if err != nil {
		return 0, err
	}
	defer stop()
	fmt.Fprintf(out, "started a private PostgreSQL%s at %s (pid %d)\n", serverversion.Named(s, v), server.Addr(), server.PID())
	rep, err := postgresconform.Conform(ctx, server.URL(), c.Sequences, c.Seed, out)
	switch {
	case ctx.Err() != nil:
		return 0, fmt.Errorf("interrupted; the private server is stopped: %w", ctx.Err())
	case err != nil:
		return family.Inconclusive, err
	case rep.Found != nil:
		return family.Diverge, nil
	case rep.Unjudged > rep.Sequences/10:
		fmt.Fprintf(out, "too many sequences unjudged (%d of %d): the machine is too slow for the differential's margins\n", rep.Unjudged, rep.Sequences)
		return family.Inconclusive, nil
	}
	return family.Agree, nil
}

// simulated is a replay on the simulator, its trace (--trace) to trace.
type simulated struct {
	pgadvisoryrun.Config
	trace io.Writer
}

func (s simulated) Run(_ context.Context, p prover.Plan) (*prover.Result, error) {
	return pgadvisoryrun.Simulate(p.(*pgadvisoryrun.Plan), s.trace)
}

// serve serves the reference (or a mutant) over the process protocol.
func serve(in io.Reader, out, log io.Writer, mutant, options string) error {
	if options != "" {
		return family.Usagef("--options: --kind %s takes none", pgadvisoryrun.Kind)
	}
	o := pgadvisoryprotocol.ServeOptions{Log: log}
	if mutant != "" {
		m := pgadvisoryrun.MutantNamed(mutant)
		if m == nil {
			return family.Usagef("--mutant: no %s mutant named %q (%s)", pgadvisoryrun.Kind, mutant, mutantNames())
		}
		o.Defects = m.Defects()
	}
	return pgadvisoryprotocol.Serve(in, out, o)
}

// validate checks an implementation on a private PostgreSQL it starts.
func validate(ctx context.Context, command string, s family.Settings, out io.Writer) (bool, error) {
	v, err := serverVersion(s)
	if err != nil {
		return false, err
	}
	passed, err := pgadvisoryprotocol.ValidateOn(ctx, command, s.InitTimeout, v, s.Stderr, out)
	if err != nil && ctx.Err() == nil {
		return false, &family.UsageError{Err: fmt.Errorf("%w\ncannot start a private PostgreSQL, so the implementation was not tried", err)}
	}
	return passed, nil
}
