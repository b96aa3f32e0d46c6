// Package consulsemcli registers Consul's semaphore recipe
// (adapters/runners/consulsemrun) with lockprover (package family): on its simulator
// and on private or given Consul agents and etcd servers, with its side of
// the process protocol (consulsemprotocol), conform and bench. It is the
// family's top: only cmd/lockprover/all imports it.
package consulsemcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/cmd/lockprover/leasecli"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun/consulsemprotocol"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
)

// ConsulSemaphore is Consul's semaphore recipe (adapters/runners/consulsemrun):
// the reference client (package consulsem) or one of its mutants,
// on the simulator of a Consul agent or an etcd server (sim/consulsim),
// or on a private real Consul agent or etcd started for each plan
// (--target consul, --target etcd), or on one the user runs
// (--consul-addr, --etcd-endpoints), with its explore table of what
// restarts do on each, and conform (the simulator against private real
// servers), and bench (the reference beside its floors on private real
// servers); an implementation in any language proves through the process
// protocol (consulsemprotocol) on a real Consul agent or etcd (--impl
// with --target consul or etcd).
var ConsulSemaphore = &family.Descriptor{
	Name:       consulsemrun.Kind,
	Kinds:      []string{consulsemrun.Kind},
	Properties: lease.WithVerify,
	Faults:     consulsemrun.FaultNames(),
	Targets: []family.Target{{Name: "sim", Served: true, Faults: consulsemrun.FaultNames()},
		{Name: consulsemrun.Consul, Real: true, Faults: consulsemrun.RealFaults()}, {Name: consulsemrun.Etcd, Real: true, Faults: consulsemrun.RealFaults()},
		{Name: consulsemrun.ConsulCluster, Real: true, Faults: onCluster(consulsemrun.ConsulCluster)},
		{Name: consulsemrun.EtcdCluster, Real: true, Faults: onCluster(consulsemrun.EtcdCluster)},
		{Name: SimCluster, Faults: onCluster(consulsemrun.ConsulCluster)}},
	Flags: append([]family.Flag{
		{Name: "backend", Arg: "consul|etcd", Verbs: family.Prove | family.Conform | family.Bench | family.Validate, Usage: "consul-semaphore: the server: prove's simulated one, or the private real one validate-impl checks on, conform compares or bench measures; consul (when not given), but both for conform and bench\n. --target consul or etcd names prove's real one"},
		{Name: "persistent", Bool: true, Verbs: family.Prove, Usage: "consul-semaphore: a Consul agent (simulated, or real with --target consul) with a data directory, which keeps its sessions across a restart\n (else a -dev agent, which forgets them)"},
		{Name: "consul-addr", Arg: "HOST:PORT", Real: true, Verbs: family.Runs, Usage: "consul-semaphore: with --target consul, the HTTP API address of a Consul agent you run, which plans run on instead of a private agent each\n: it is not started, stopped or restarted (no restart-broker), and each run's keys and sessions on it are its own and gone at its end"},
		{Name: "etcd-endpoints", Arg: "HOST:PORT,...", Real: true, Verbs: family.Runs, Usage: "consul-semaphore: with --target etcd, the client endpoints of an etcd you run, which plans run on instead of a private etcd each\n: it is not started, stopped or restarted (no restart-broker), and each run's keys and leases on it are its own and gone at its end"},
		serverVersionFlag,
		{Name: "cluster", Bool: true, Verbs: family.Conform, Usage: "consul-semaphore: the simulated cluster against a private real one the run starts (needs root)\n, as --target consul-cluster or etcd-cluster do: drawn sequences of the recipe's calls through clients on different nodes and faults on the cluster, compared step by step (--backend: consul, etcd, or both when not given)"},
		leasecli.TTL,
	}, leasecli.Flags...),
	// How check judges lease locks, as every lease family says it.
	Judging:    leasecli.Judging,
	CheckFlags: leasecli.Check,

	Setup:    consulSetup,
	ReadPlan: func(path string) (prover.Plan, error) { return consulsemrun.ReadPlan(path) },
	Replay:   consulReplay,
	Explore:  consulsemrun.Explore,
	Conform:  consulConform,
	Bench:    consulBench,
	Serve:    consulServe,
	Validate: consulValidate,
}

func init() {
	for _, m := range consulsemrun.Mutants {
		ConsulSemaphore.Mutants = append(ConsulSemaphore.Mutants, family.Mutant{Name: m.Name, Property: m.Property, Defect: m.Defect,
			Prove: consulsemrun.Config{Scope: prover.Scope{Mutant: m.Name}}})
	}
	family.Register(ConsulSemaphore)
}

// consulSetup makes a proof of the recipe from the command line: the
// reference (or a mutant, or a correct variant from --options) on the
// simulated server --backend names, or on a private real one (--target
// consul or etcd) each plan starts.
func consulSetup(s family.Settings) (*family.Setup, error) {
	if consulsemrun.ClusterBackend(s.Target) != "" {
		return clusterSetup(s)
	}
	if s.Target == SimCluster {
		return simClusterSetup(s)
	}
	if err := consulTarget(s); err != nil {
		return nil, err
	}
	c := consulsemrun.Config{Scope: prover.Scope{Clients: s.Clients, Ops: s.Ops, MaxFaults: s.MaxFaults, Mutant: s.Mutant},
		Backend: s.Flag("backend"), Persistent: s.Flag("persistent") != ""}
	if !s.Given("backend") {
		c.Backend = consulsemrun.Consul
	}
	if real := consulReal(s.Target); real {
		if s.Given("backend") && c.Backend != s.Target {
			return nil, fmt.Errorf("--backend: --target %s runs on a real %s; --backend %s names another", s.Target, s.Target, c.Backend)
		}
		c.Target, c.Backend = s.Target, s.Target
	}
	if err := consulGiven(&c, s); err != nil {
		return nil, err
	}
	if err := consulVersion(&c, s); err != nil {
		return nil, err
	}
	if c.Persistent && len(c.Addrs) > 0 {
		// A given agent has a data directory or not as it was started.
		return nil, family.Usagef("--persistent: the Consul agent given with --consul-addr %s keeps its state as it was started to; lockprover chooses only for a private agent", strings.Join(c.Addrs, ","))
	}
	switch {
	case c.Backend != consulsemrun.Consul && c.Backend != consulsemrun.Etcd:
		return nil, fmt.Errorf("--backend: want %s or %s, got %q", consulsemrun.Consul, consulsemrun.Etcd, c.Backend)
	case c.Persistent && c.Backend != consulsemrun.Consul:
		return nil, errors.New("--persistent: only a Consul agent has a choice (etcd always keeps its state)")
	case s.Mutant != "" && consulsemrun.MutantNamed(s.Mutant) == nil:
		return nil, fmt.Errorf("--mutant: no %s mutant named %q (see lockprover mutants --kind %s)", consulsemrun.Kind, s.Mutant, consulsemrun.Kind)
	}
	if err := consulOptions(&c, s.Options); err != nil {
		return nil, err
	}
	if t := s.Flag("ttl"); t != "" {
		ttl, err := time.ParseDuration(t)
		if c.TTLMs = int(ttl.Milliseconds()); err != nil || ttl%time.Millisecond != 0 || consulsemrun.CheckTTL(c.Backend, c.TTLMs) != nil {
			return nil, fmt.Errorf("--ttl: want 1s to 1m for --kind %s (whole seconds on etcd), got %q", consulsemrun.Kind, t)
		}
	}
	if s.Impl != "" {
		impl := consulsemprotocol.NewProcesses(s.Impl)
		impl.InitTimeout = s.InitTimeout
		c.Impl, c.Wire = impl, consulsemprotocol.Wire
	}
	if err := consulFaults(&c, s.Faults); err != nil {
		return nil, err
	}
	return consulWhere(c, s.Impl), nil
}

// consulGiven reads --consul-addr and --etcd-endpoints into c.Addrs: a
// server the user runs, of c's real target (either flag with another
// target is refused, naming it).
func consulGiven(c *consulsemrun.Config, s family.Settings) error {
	for _, backend := range []string{consulsemrun.Consul, consulsemrun.Etcd} {
		flag := consulsemrun.AddrFlag(backend)
		if !s.Given(flag) {
			continue
		}
		if c.Target != backend {
			target := cmp.Or(s.Target, "sim")
			return family.Usagef("--%s: a %s you run is for --target %s, not --target %s", flag, backend, backend, target)
		}
		addrs, err := consulAddrs(flag, s.Flag(flag))
		if err != nil {
			return err
		}
		c.Addrs = addrs
	}
	return nil
}

// consulAddrs reads a flag's comma-separated host:port addresses (a
// Consul agent has one).
func consulAddrs(flag, v string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		if _, _, err := net.SplitHostPort(a); err != nil || strings.Contains(a, "/") {
			return nil, family.Usagef("--%s: want host:port, got %q", flag, a)
		}
		addrs = append(addrs, a)
	}
	if flag == consulsemrun.AddrFlag(consulsemrun.Consul) && len(addrs) != 1 {
		return nil, family.Usagef("--%s: want one agent's address, got %q", flag, v)
	}
	return addrs, nil
}

// consulReal says whether target is a real server.
func consulReal(target string) bool {
	return target == consulsemrun.Consul || target == consulsemrun.Etcd
}

// consulWhere is the setup of c: on the simulator, on private real
// servers, whose binary Start looks for first, or on the server the user
// gave, which Start checks answers; against the implementation command
// starts (c.Impl, "" for none), which Start then tries once.
func consulWhere(c consulsemrun.Config, command string) *family.Setup {
	setup := consulServer(c)
	if c.Impl == nil {
		return setup
	}
	impl := c.Impl.(*consulsemprotocol.Processes)
	server := setup.Start
	setup.What, setup.Interrupt, setup.Stop = impl.String(), impl.Stop, impl.Stop
	setup.Replay = append(setup.Replay, "--impl", family.Quote(command))
	if c.Target == "" {
		setup.Where = "the simulated consul served on the wire"
		setup.Start = func(ctx context.Context) error {
			if err := consulsemrun.PreflightServed(ctx, impl, consulsemprotocol.Wire); err != nil {
				return &family.ImplError{Err: err, Command: command, Kind: consulsemrun.Kind + " --backend " + consulsemrun.Consul}
			}
			return nil
		}
		return setup
	}
	setup.Start = func(ctx context.Context) error {
		if err := server(ctx); err != nil {
			return err
		}
		if err := consulsemrun.PreflightImpl(ctx, c.Target, c.Addrs, c.Version, impl); err != nil {
			// validate-impl checks on the backend the plans run on.
			return &family.ImplError{Err: err, Command: command, Kind: consulsemrun.Kind + " --backend " + c.Target}
		}
		return nil
	}
	return setup
}

// consulServer is the setup of c's server, for the reference.
func consulServer(c consulsemrun.Config) *family.Setup {
	if c.Target == "" {
		return &family.Setup{Target: "sim", Where: "the simulated " + c.Backend, What: c.String(), Prove: c}
	}
	if len(c.Addrs) > 0 {
		flag, addrs := consulsemrun.AddrFlag(c.Target), strings.Join(c.Addrs, ",")
		return &family.Setup{Target: c.Target, Real: true, Where: "the " + c.Target + " at " + addrs, What: c.String(), Prove: c,
			Replay: []string{"--target", c.Target, "--" + flag, addrs},
			Start: func(ctx context.Context) error {
				// Plans draw TTLs of 1 s and up unless --ttl fixes one.
				ttl := time.Duration(max(c.TTLMs, 1000)) * time.Millisecond
				if err := consulsemrun.PreflightAddrs(ctx, c.Target, c.Addrs, ttl); err != nil {
					return family.Usagef("--%s %s: %v", flag, addrs, err)
				}
				return nil
			}}
	}
	return &family.Setup{Target: c.Target, Real: true, Where: "a private real " + c.Target + named(c.Version) + " for each plan", What: c.String(), Prove: c,
		Server: serverName(c.Target, c.Version), Replay: append([]string{"--target", c.Target}, versionReplay(c.Version)...),
		Start: func(ctx context.Context) error {
			if err := serverversion.Have(ctx, c.Version, nil); err != nil {
				return err
			}
			if err := consulsemrun.PreflightVersion(c.Target, c.Version); err != nil {
				return family.Usagef("--target %s: %v", c.Target, err)
			}
			return nil
		}}
}

// consulFaults reads --faults: all (restarts of a -dev agent aside, see
// adapters/runners/consulsemrun), none, or a list (restart-broker in it draws
// restarts of a -dev agent too).
func consulFaults(c *consulsemrun.Config, faults string) error {
	switch faults {
	case "all":
		return nil
	case "none":
		c.Faults = []string{}
		return nil
	}
	for _, name := range strings.Split(faults, ",") {
		if !slices.Contains(consulsemrun.FaultNames(), name) {
			return fmt.Errorf("--faults: unknown fault %q for --kind %s (want some of %s; all; or none)", name, consulsemrun.Kind, strings.Join(consulsemrun.FaultNames(), ", "))
		}
		if c.Target != "" && !slices.Contains(consulsemrun.RealFaults(), name) {
			return fmt.Errorf("--faults: %s is not offered on a real %s (want some of %s; all; or none)", name, c.Target, strings.Join(consulsemrun.RealFaults(), ", "))
		}
		if len(c.Addrs) > 0 && name == histories.RestartBroker {
			return family.Usagef("--faults: %v", consulsemrun.ErrGivenRestart(c.Target))
		}
		if c.Impl != nil && c.Target != "" && !slices.Contains(consulsemrun.ImplFaults(), name) {
			return fmt.Errorf("--faults: %s is not offered for an implementation (want some of %s; all; or none)", name, strings.Join(consulsemrun.ImplFaults(), ", "))
		}
		c.Faults = append(c.Faults, name)
	}
	// A -dev agent's restarts are drawn only when named: they forget
	// every session, which breaks any client.
	c.AnyRestart = slices.Contains(c.Faults, histories.RestartBroker)
	return nil
}

// consulTarget refuses what the family cannot do: an implementation but on
// a real server, or with a mutant or the reference's options; targets it
// does not have.
func consulTarget(s family.Settings) error {
	switch {
	case s.Impl != "" && s.Target != "" && s.Target != "sim" && !consulReal(s.Target):
		return family.Usagef("--impl: an implementation of --kind %s runs on the simulated Consul agent served on the wire (--target sim) or a real server (--target %s, --target %s)", consulsemrun.Kind, consulsemrun.Consul, consulsemrun.Etcd)
	case s.Impl != "" && !consulReal(s.Target) && s.Given("backend") && s.Flag("backend") != consulsemrun.Consul:
		return family.Usagef("--backend %s: %v", s.Flag("backend"), consulsemrun.ErrServedEtcd)
	case s.Impl != "" && s.Mutant != "" && s.Mutant != "reference":
		return errors.New("--mutant: a mutant is a variant of the reference; it cannot run with --impl")
	case s.Impl != "" && s.Options != "":
		return errors.New("--options: the reference's variants; they cannot run with --impl")
	case s.Target != "" && s.Target != "sim" && !consulReal(s.Target):
		return fmt.Errorf("--target: --kind %s runs on the simulator (--target sim), a private real server (--target consul, --target etcd) or cluster (--target consul-cluster, --target etcd-cluster), or the simulated cluster (--target sim-cluster), not %q", consulsemrun.Kind, s.Target)
	}
	return nil
}

// consulOptions reads --options: the reference's correct variants,
// comma-separated (stale-reads, behavior-release, lock-delay).
func consulOptions(c *consulsemrun.Config, options string) error {
	if options == "" {
		return nil
	}
	for _, o := range strings.Split(options, ",") {
		switch o {
		case "stale-reads":
			c.StaleReads = true
		case "behavior-release":
			c.BehaviorRelease = true
		case "lock-delay":
			c.LockDelay = true
		default:
			return fmt.Errorf("--options: unknown option %q for --kind %s (want stale-reads, behavior-release, lock-delay, comma-separated)", o, consulsemrun.Kind)
		}
	}
	return nil
}

// consulReplay makes a plan read back ready to run on the simulator (its
// trace to s.Trace), or on a private real server of its backend
// (--target consul or etcd), against the reference or a mutant.
func consulReplay(pl prover.Plan, s family.Settings) (*family.Setup, error) {
	p := pl.(*consulsemrun.Plan)
	if consulsemrun.ClusterBackend(s.Target) != "" {
		return clusterReplay(p, s)
	}
	if err := consulTarget(s); err != nil {
		return nil, err
	}
	if len(p.Cluster) > 0 && consulReal(s.Target) {
		return nil, family.Usagef("the plan runs on a %s cluster: replay it with --target %s-cluster, or on the simulated cluster with --target sim", p.Backend, p.Backend)
	}
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, consulsemrun.MutantNamed(s.Mutant) != nil, "no consul-semaphore mutant named %q (see lockprover mutants --kind consul-semaphore)"); err != nil {
		return nil, err
	}
	c := consulsemrun.Config{Scope: prover.Scope{Mutant: p.Mutant}, Backend: p.Backend, Persistent: p.Persistent, StaleReads: p.StaleReads, BehaviorRelease: p.BehaviorRelease, LockDelay: p.LockDelay,
		SimCluster: len(p.Cluster) > 0}
	if !consulReal(s.Target) {
		if err := consulGiven(&c, s); err != nil {
			return nil, err
		}
		if err := consulVersion(&c, s); err != nil {
			return nil, err
		}
	}
	if consulReal(s.Target) {
		if p.Backend != s.Target {
			return nil, fmt.Errorf("--target: the plan is for %s, not %s", p.Backend, s.Target)
		}
		c.Target, c.TTLMs = s.Target, p.TTLMs
		if err := consulGiven(&c, s); err != nil {
			return nil, err
		}
		if err := consulVersion(&c, s); err != nil {
			return nil, err
		}
		if len(c.Addrs) > 0 && slices.ContainsFunc(p.Nemesis, func(f consulsemrun.Fault) bool { return f.Fault == histories.RestartBroker }) {
			return nil, family.Usagef("the plan: %v", consulsemrun.ErrGivenRestart(c.Target))
		}
		if s.Impl != "" {
			if slices.ContainsFunc(p.Nemesis, func(f consulsemrun.Fault) bool { return f.Fault == histories.DropReply }) {
				return nil, family.Usagef("the plan holds a %s, which is not offered for an implementation (its proxy does not read HTTP or gRPC)", histories.DropReply)
			}
			if p.Mutant != "" {
				return nil, family.Usagef("the plan is of mutant %s: replay it with --mutant reference to run it against the implementation", p.Mutant)
			}
			impl := consulsemprotocol.NewProcesses(s.Impl)
			impl.InitTimeout = s.InitTimeout
			c.Impl = impl
		}
		setup := consulWhere(c, s.Impl)
		setup.Stop = func() {}
		return setup, nil
	}
	if s.Impl != "" {
		return servedReplay(p, c, s)
	}
	where := "the simulated " + p.Backend
	if c.SimCluster {
		where += " cluster (" + strings.Join(p.Cluster, ", ") + ")"
	}
	return &family.Setup{Target: "sim", Where: where, What: c.String(), Prove: consulTraced{c, s.Trace}, Stop: func() {}}, nil
}

// consulTraced runs a plan on the simulator with its trace to trace (nil
// for none).
type consulTraced struct {
	consulsemrun.Config
	trace io.Writer
}

func (t consulTraced) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	if t.Impl != nil {
		return consulsemrun.SimulateImpl(ctx, p.(*consulsemrun.Plan), t.Impl, t.Wire, t.trace)
	}
	return consulsemrun.Simulate(p.(*consulsemrun.Plan), t.trace)
}

// servedReplay replays p against the implementation s names on the
// simulated Consul agent served on the wire: the steps its run logged
// (the plan's wire), if any, in their order.
func servedReplay(p *consulsemrun.Plan, c consulsemrun.Config, s family.Settings) (*family.Setup, error) {
	if p.Mutant != "" {
		return nil, family.Usagef("the plan is of mutant %s: replay it with --mutant reference to run it against the implementation", p.Mutant)
	}
	if len(p.Cluster) > 0 || p.Backend != consulsemrun.Consul {
		return nil, family.Usagef("the plan runs on the simulated %s%s, which is not served on the wire: only a single Consul agent is", p.Backend, map[bool]string{true: " cluster"}[len(p.Cluster) > 0])
	}
	impl := consulsemprotocol.NewProcesses(s.Impl)
	impl.InitTimeout = s.InitTimeout
	c.Impl, c.Wire = impl, consulsemprotocol.Wire
	setup := consulWhere(c, s.Impl)
	setup.Prove, setup.Stop = consulTraced{c, s.Trace}, func() {}
	return setup, nil
}

// consulServe serves the reference (or a mutant, or a correct variant
// from options) over the process protocol, on the Consul agent or etcd
// each process's init names.
func consulServe(in io.Reader, out, log io.Writer, mutant, options string) error {
	var c consulsemrun.Config
	if err := consulOptions(&c, options); err != nil {
		return &family.UsageError{Err: err}
	}
	o := consulsemprotocol.ServeOptions{Log: log, LockDelay: c.LockDelay}
	o.Options.StaleReads, o.Options.BehaviorRelease = c.StaleReads, c.BehaviorRelease
	if mutant != "" {
		if err := consulsemrun.ApplyMutant(mutant, &o.Options.Defects); err != nil {
			return family.Usagef("--mutant: %v (see lockprover mutants --kind %s)", err, consulsemrun.Kind)
		}
	}
	return consulsemprotocol.Serve(in, out, o)
}

// consulValidate checks an implementation of the semaphore on a private
// server of --backend (consul when not given).
func consulValidate(ctx context.Context, command string, s family.Settings, out io.Writer) (bool, error) {
	if s.Options != "" {
		return false, family.Usagef("--options: consul-semaphore's sessions have no options")
	}
	backend := consulsemrun.Consul
	if s.Given("backend") {
		backend = s.Flag("backend")
	}
	if backend != consulsemrun.Consul && backend != consulsemrun.Etcd {
		return false, family.Usagef("--backend: want %s or %s, got %q", consulsemrun.Consul, consulsemrun.Etcd, backend)
	}
	v, err := serverVersion(s, backend)
	if err != nil {
		return false, err
	}
	if err := serverversion.Have(ctx, v, s.Stderr); err != nil {
		return false, err
	}
	passed, err := consulsemprotocol.ValidateOn(ctx, command, s.InitTimeout, backend, v, out)
	if err != nil && ctx.Err() == nil {
		return false, family.Usagef("%s: %v", backend, err)
	}
	return passed, err
}

// onCluster is what a cluster of target strikes: a single server's faults
// but its restart (restart-node restarts a node), and the cluster's.
func onCluster(target string) []string {
	return append(slices.DeleteFunc(consulsemrun.RealFaults(), func(f string) bool { return f == histories.RestartBroker }), consulsemrun.ClusterFaults(target)...)
}
