// Package redlockcli registers Redlock and priority Redlock
// (adapters/runners/redlockrun) with lockprover (package family): on their simulated
// Redis servers and on private real ones, with their side of the process
// protocol (redlockprotocol), conform and bench. It is the family's top:
// only cmd/lockprover/all imports it.
package redlockcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/lockprover/lockprover/cmd/lockprover/leasecli"

	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun/redlockprotocol"
	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/lease"
)

// Redlock is the Redis lease lock (adapters/runners/redlockrun): a mutex granted by a
// majority of N Redis servers, on the simulated servers or on real
// redis-servers each plan starts, with its explore table; an
// implementation in any language proves through the process protocol
// (redlockprotocol) on real redis-servers; bench measures the reference
// on private redis-servers beside the raw commands.
var Redlock = &family.Descriptor{
	Name:       redlockrun.Kind,
	Kinds:      []string{redlockrun.Kind},
	Properties: lease.WithValidity,
	Faults:     redlockrun.FaultNames(),
	Targets:    []family.Target{{Name: "sim", Faults: redlockrun.FaultNames()}, {Name: "redis", Real: true, Faults: redlockrun.FaultNames()}},
	Flags: append([]family.Flag{
		{Name: "servers", Arg: family.Int, Verbs: family.Prove | family.Bench, Usage: "redlock: the number of Redis servers every plan has (0: drawn from 1, 2 and 3; bench: 3)", Default: "0"},
		{Name: "persistence", Arg: "none|always", Verbs: family.Prove, Usage: "redlock: what the servers keep across a restart, none or always (fsync on every write); default drawn, with restarts only under always"},
		{Name: "limit", Arg: family.Int, Verbs: family.Prove, Usage: "redlock: how many leases the lock grants at once, every plan's (1: a mutex; above 1 only with --impl, a semaphore: init says the limit)", Default: "1"},
		serverVersionFlag,
		leasecli.TTL,
	}, leasecli.Flags...),
	// How check judges lease locks, as every lease family says it.
	Judging:    leasecli.Judging,
	CheckFlags: leasecli.Check,

	Setup:    redlockSetup,
	ReadPlan: func(path string) (prover.Plan, error) { return redlockrun.ReadPlan(path) },
	Replay:   redlockReplay,
	Explore:  redlockrun.Explore,
	Serve:    redlockServe,
	Validate: redlockValidate,
	Bench:    redlockBench,
}

func init() {
	for _, m := range redlockrun.Mutants {
		Redlock.Mutants = append(Redlock.Mutants, family.Mutant{Name: m.Name, Property: m.Property, Defect: m.Defect, Prove: redlockrun.Config{Scope: prover.Scope{Mutant: m.Name}}})
	}
	family.Register(Redlock)
}

// redlockSetup makes a Redlock proof from the command line: the reference
// (or a mutant) on the simulated servers.
func redlockSetup(s family.Settings) (*family.Setup, error) {
	c := redlockrun.Config{Scope: prover.Scope{Clients: s.Clients, Ops: s.Ops, MaxFaults: s.MaxFaults, Mutant: s.Mutant}, Persistence: s.Flag("persistence")}
	setup, err := redlockTarget(s, &c)
	if err != nil {
		return nil, err
	}
	if s.Options != "" {
		return nil, errors.New("--options: redlock's reference has no options yet")
	}
	n, err := strconv.Atoi(s.Flag("servers"))
	if c.Servers = n; err != nil || n < 0 || n > 9 {
		return nil, fmt.Errorf("--servers: want 0 (drawn) to 9, got %q", s.Flag("servers"))
	}
	l, err := strconv.Atoi(s.Flag("limit"))
	switch {
	case err != nil || l < 1 || l > 9:
		return nil, fmt.Errorf("--limit: want 1 to 9, got %q", s.Flag("limit"))
	case l > 1 && s.Impl == "":
		return nil, fmt.Errorf("--limit %d: the reference is a mutex; a semaphore needs an implementation (--impl)", l)
	}
	c.Limit = l
	if p := c.Persistence; p != "" && p != redlockrun.PersistNone && p != redlockrun.PersistAlways {
		return nil, fmt.Errorf("--persistence: want %s or %s, got %q", redlockrun.PersistNone, redlockrun.PersistAlways, p)
	}
	ttl, err := leasecli.TTLMs(s.Flag("ttl"), 10*time.Millisecond, 0, "at least 10ms")
	if err != nil {
		return nil, err
	}
	if ttl > 0 {
		c.TTLMs = ttl
	}
	if c.Faults, err = leasecli.Faults(s.Faults, redlockrun.Kind, redlockrun.FaultNames(), "all"); err != nil {
		return nil, err
	}
	if s.Mutant != "" && (redlockrun.MutantNamed(s.Mutant) == nil || redlockrun.MutantNamed(s.Mutant).Priority) {
		return nil, fmt.Errorf("--mutant: no %s mutant named %q (see lockprover mutants --kind %s)", redlockrun.Kind, s.Mutant, redlockrun.Kind)
	}
	c.Mutant = s.Mutant
	setup.Prove, setup.What = c, c.String()
	return setup, nil
}

// serverVersionFlag is --server-version: the version of Redis (or
// Valkey) the private servers run.
var serverVersionFlag = serverversion.Flag(family.Server,
	"redlock, priority-redlock: on real servers (--target redis, validate-impl, bench, conform), the version they run: "+
		serverversion.Choices("redis-server", "redis", "valkey"))

// redlockTarget sets where Redlock's plans run: the simulated servers, or
// real redis-servers each plan starts (--target redis), of the version
// --server-version names.
func redlockTarget(s family.Settings, c *redlockrun.Config) (*family.Setup, error) {
	kind := redlockrun.Kind
	if s.Kind != "" {
		kind = s.Kind // or the priority Redlock's
	}
	v, err := serverversion.Parse(s, "redis", "valkey")
	if err != nil {
		return nil, err
	}
	var replay []string
	if s.Flag("server-version") != "" {
		replay = []string{"--server-version", s.Flag("server-version")}
	}
	switch {
	case s.Flag("server-version") != "" && s.Target != "redis":
		return nil, fmt.Errorf("--server-version: the version of real servers; --kind %s runs on the simulated ones unless --target redis", kind)
	case s.Impl != "" && c.Mutant != "":
		return nil, errors.New("--mutant: a mutant is a variant of the reference; it cannot run with --impl")
	case s.Impl != "" && (s.Target == "" || s.Target == "sim"):
		return servedTarget(s, c, kind)
	case s.Impl != "" && s.Target == "redis":
		impl := redlockprotocol.NewProcesses(s.Impl)
		impl.InitTimeout = s.InitTimeout
		t := redlockrun.Redis{Impl: impl, Priority: kind == redlockrun.PriorityKind, Version: v}
		c.Target = t
		return &family.Setup{Target: "redis", Real: true, Where: t.String(), What: impl.String(), Server: v.String(),
			Replay: append([]string{"--target", "redis", "--impl", family.Quote(s.Impl)}, replay...), Interrupt: impl.Stop,
			Start: func(ctx context.Context) error {
				if err := serverversion.Have(ctx, v, s.Stderr); err != nil {
					return err
				}
				if err := (redlockrun.Redis{Version: v}).Preflight(ctx); err != nil {
					return family.Usagef("--target redis: %v", err)
				}
				if err := t.Preflight(ctx); err != nil {
					return &family.ImplError{Err: err, Command: s.Impl, Kind: kind}
				}
				return nil
			}, Stop: impl.Stop}, nil
	case s.Target == "" || s.Target == "sim":
		return &family.Setup{Target: "sim", Where: "the simulated Redis servers"}, nil
	case s.Target == "redis":
		t := redlockrun.Redis{Version: v}
		c.Target = t
		return &family.Setup{Target: "redis", Real: true, Where: t.String(), Server: v.String(), Replay: append([]string{"--target", "redis"}, replay...),
			Start: func(ctx context.Context) error {
				if err := serverversion.Have(ctx, v, s.Stderr); err != nil {
					return err
				}
				if err := t.Preflight(ctx); err != nil {
					return family.Usagef("--target redis: %v", err)
				}
				return nil
			}}, nil
	}
	return nil, fmt.Errorf("--target: --kind %s runs on the simulated Redis servers (--target sim) or real redis-servers (--target redis)", kind)
}

// servedTarget sets an implementation's plans to run on the simulated
// Redis servers served on the wire (--impl, no --target or --target sim).
// The priority Redlock's are not served yet: its victims' watchers send
// their commands between operations, and the served servers take a
// process's commands only while one of its operations is in flight.
func servedTarget(s family.Settings, c *redlockrun.Config, kind string) (*family.Setup, error) {
	if kind == redlockrun.PriorityKind {
		return nil, fmt.Errorf("--impl: --kind %s runs an implementation on real redis-servers (--target redis) only: its victims' watchers listen between operations, which the simulated servers do not serve yet", kind)
	}
	impl := redlockprotocol.NewProcesses(s.Impl)
	impl.InitTimeout = s.InitTimeout
	t := redlockrun.Simulator{Impl: impl, Wire: redlockprotocol.Wire, Trace: s.Trace}
	c.Target = t
	return &family.Setup{Target: "sim", Where: "the simulated Redis servers, served on the wire", What: impl.String(),
		Replay: []string{"--impl", family.Quote(s.Impl)}, Interrupt: impl.Stop, Stop: impl.Stop,
		Start: func(ctx context.Context) error {
			if err := t.Preflight(ctx); err != nil {
				return &family.ImplError{Err: err, Command: s.Impl, Kind: kind}
			}
			return nil
		}}, nil
}

// redlockReplay makes a Redlock plan read back ready to run on the
// simulated servers (its trace to s.Trace), against the reference or a
// mutant.
func redlockReplay(pl prover.Plan, s family.Settings) (*family.Setup, error) {
	p := pl.(*redlockrun.Plan)
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, redlockrun.MutantNamed(s.Mutant) != nil, "no redlock mutant named %q (see lockprover mutants --kind redlock)"); err != nil {
		return nil, err
	}
	return replayOn(s, redlockrun.Config{Scope: prover.Scope{Mutant: p.Mutant}})
}

// replayOn sets up the replay of a plan proved as c (Redlock's or the
// priority Redlock's): on the simulated servers, its trace to s.Trace, or
// on real redis-servers (--target redis).
func replayOn(s family.Settings, c redlockrun.Config) (*family.Setup, error) {
	setup, err := redlockTarget(s, &c)
	if err != nil {
		return nil, err
	}
	setup.What, setup.Prove = c.String(), c
	if setup.Stop == nil {
		setup.Stop = func() {}
	}
	if sim, served := c.Target.(redlockrun.Simulator); !setup.Real && !(served && sim.Impl != nil) {
		setup.Prove = traced{c, s.Trace}
	}
	return setup, nil
}

// traced runs a Redlock plan on the simulated servers with its trace to
// trace (nil for none).
type traced struct {
	redlockrun.Config
	trace io.Writer
}

func (t traced) Run(_ context.Context, p prover.Plan) (*prover.Result, error) {
	return redlockrun.Simulate(p.(*redlockrun.Plan), t.trace)
}

// redlockServe serves the Redlock reference (or a mutant) over the
// process protocol.
func redlockServe(in io.Reader, out, log io.Writer, mutant, options string) error {
	return serveKind(in, out, log, mutant, options, false)
}

// serveKind serves the Redlock reference, or the priority Redlock's
// (priority), or a mutant of it, over the process protocol.
func serveKind(in io.Reader, out, log io.Writer, mutant, options string, priority bool) error {
	kind := redlockrun.Kind
	if priority {
		kind = redlockrun.PriorityKind
	}
	if options != "" {
		return family.Usagef("--options: %s's reference has no options", kind)
	}
	o := redlockprotocol.ServeOptions{Log: log, Priority: priority}
	if mutant != "" {
		m := redlockrun.MutantNamed(mutant)
		if m == nil || m.Priority != priority {
			return family.Usagef("--mutant: no mutant named %q (see lockprover mutants --kind %s)", mutant, kind)
		}
		m.Apply(&o.Defects)
	}
	return redlockprotocol.Serve(in, out, o)
}

// redlockValidate checks a Redlock implementation on private
// redis-servers.
func redlockValidate(ctx context.Context, command string, s family.Settings, out io.Writer) (bool, error) {
	return validateKind(ctx, command, s, out, false)
}

// validateKind checks a Redlock implementation, or a priority Redlock
// (priority), on private redis-servers.
func validateKind(ctx context.Context, command string, s family.Settings, out io.Writer, priority bool) (bool, error) {
	if s.Options != "" {
		return false, family.Usagef("--options: redlock's sessions have no options")
	}
	v, err := serverversion.Parse(s, "redis", "valkey")
	if err != nil {
		return false, err
	}
	if err := serverversion.Have(ctx, v, s.Stderr); err != nil {
		return false, err
	}
	passed, err := redlockprotocol.ValidateOn(ctx, command, s.InitTimeout, redis.Options{Version: v}, out, priority)
	if err != nil && ctx.Err() == nil {
		return false, family.Usagef("%s-server: %v", v.Server, err)
	}
	return passed, err
}

// redlockBench measures the reference on --servers private redis-servers
// (3 for 0).
func redlockBench(ctx context.Context, s family.Settings, c bench.Config, out io.Writer) error {
	return benchKind(ctx, s, c, out, false)
}

// benchKind measures the Redlock reference, or the priority Redlock's
// (priority), on --servers private redis-servers (3 for 0).
func benchKind(ctx context.Context, s family.Settings, c bench.Config, out io.Writer, priority bool) error {
	n, err := strconv.Atoi(s.Flag("servers"))
	if err != nil || n < 0 || n > 9 {
		return family.Usagef("--servers: want 0 (3) to 9, got %q", s.Flag("servers"))
	}
	if n == 0 {
		n = 3
	}
	v, err := serverversion.Parse(s, "redis", "valkey")
	if err != nil {
		return err
	}
	if err := serverversion.Have(ctx, v, s.Stderr); err != nil {
		return err
	}
	err = redlockrun.Bench(ctx, n, redis.Options{Version: v}, priority, c, out)
	if errors.Is(err, redis.ErrNoRedis) {
		return &family.UsageError{Err: err}
	}
	return err
}
