package consulsemcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun/consulsemprotocol"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
)

// clusterFaults are the faults --faults may name for --target
// consul-cluster or etcd-cluster: those of a real server aimed at one
// client (an implementation's proxy loses no reply), and those on the
// cluster's nodes (consulsemrun.ClusterFaultNames); a single server's
// restart is restart-node's there.
func clusterFaults(target string, impl bool) []string {
	var out []string
	for _, f := range consulsemrun.RealFaults() {
		if f != histories.RestartBroker && (!impl || f != histories.DropReply) {
			out = append(out, f)
		}
	}
	return append(out, consulsemrun.ClusterFaults(target)...)
}

// clusterSetup makes a proof of the recipe on a private cluster
// (--target consul-cluster or etcd-cluster), started once before the
// first plan (and the implementation's preflight, on its first node) and
// removed after the last: plans run one at a time on it.
func clusterSetup(s family.Settings) (*family.Setup, error) {
	backend := consulsemrun.ClusterBackend(s.Target)
	c, err := clusterConfig(s, backend, s.Target)
	if err != nil {
		return nil, err
	}
	c.Target = backend
	if c.Version, err = serverVersion(s, backend); err != nil {
		return nil, err
	}
	var impl *consulsemprotocol.Processes
	if s.Impl != "" {
		impl = consulsemprotocol.NewProcesses(s.Impl)
		impl.InitTimeout = s.InitTimeout
		c.Impl = impl
	}
	box := &clusterBox{backend: backend, target: s.Target, version: c.Version, stderr: s.Stderr}
	return clusterTail(s, c, impl, box, backend)
}

// simClusterSetup makes a proof of the recipe on the simulated cluster
// of --backend (--target sim-cluster): plans draw the nodes their clients
// talk to and faults on the cluster's nodes, as on the real cluster
// targets, and replay with --target sim.
func simClusterSetup(s family.Settings) (*family.Setup, error) {
	backend := consulsemrun.Consul
	if s.Given("backend") {
		backend = s.Flag("backend")
	}
	if backend != consulsemrun.Consul && backend != consulsemrun.Etcd {
		return nil, fmt.Errorf("--backend: want %s or %s, got %q", consulsemrun.Consul, consulsemrun.Etcd, backend)
	}
	if s.Impl != "" {
		return nil, family.Usagef("--impl: an implementation runs on a real cluster (--target %s-cluster), not the simulated one", backend)
	}
	if s.Flag("server-version") != "" {
		return nil, family.Usagef("--server-version: the version of a real cluster's nodes (--target %s-cluster), not the simulated one's", backend)
	}
	c, err := clusterConfig(s, backend, backend+"-cluster")
	if err != nil {
		return nil, err
	}
	c.SimCluster = true
	return &family.Setup{Target: SimCluster, Where: "the simulated " + backend + " cluster (" + strings.Join(consulsemrun.ClusterNodes(backend), ", ") + ")",
		What: c.String(), Prove: c, Replay: []string{"--target", "sim"}}, nil
}

// SimCluster is the target of plans on the simulated cluster of
// --backend.
const SimCluster = "sim-cluster"

// clusterConfig is the Config of a proof on a cluster of backend, real
// or simulated, as s says it (target names the real cluster's target,
// whose faults it offers).
func clusterConfig(s family.Settings, backend, target string) (consulsemrun.Config, error) {
	var c consulsemrun.Config
	for _, flag := range []string{"consul-addr", "etcd-endpoints", "persistent"} {
		if s.Given(flag) {
			return c, family.Usagef("--%s is not for --target %s, whose nodes the run starts (and whose servers keep their state)", flag, s.Target)
		}
	}
	if s.Given("backend") && s.Flag("backend") != backend {
		return c, fmt.Errorf("--backend: --target %s runs on %s; --backend %s names another", s.Target, backend, s.Flag("backend"))
	}
	switch {
	case s.Impl != "" && s.Mutant != "" && s.Mutant != "reference":
		return c, fmt.Errorf("--mutant: a mutant is a variant of the reference; it cannot run with --impl")
	case s.Impl != "" && s.Options != "":
		return c, fmt.Errorf("--options: the reference's variants; they cannot run with --impl")
	case s.Mutant != "" && consulsemrun.MutantNamed(s.Mutant) == nil:
		return c, fmt.Errorf("--mutant: no %s mutant named %q (see lockprover mutants --kind %s)", consulsemrun.Kind, s.Mutant, consulsemrun.Kind)
	}
	c = consulsemrun.Config{Scope: prover.Scope{Clients: s.Clients, Ops: s.Ops, MaxFaults: s.MaxFaults, Mutant: s.Mutant},
		Backend: backend}
	if err := consulOptions(&c, s.Options); err != nil {
		return c, err
	}
	if t := s.Flag("ttl"); t != "" {
		ttl, err := time.ParseDuration(t)
		if c.TTLMs = int(ttl.Milliseconds()); err != nil || ttl%time.Millisecond != 0 || consulsemrun.CheckTTL(backend, c.TTLMs) != nil {
			return c, fmt.Errorf("--ttl: want 1s to 1m for --kind %s (whole seconds on etcd), got %q", consulsemrun.Kind, t)
		}
	}
	offered := clusterFaults(target, s.Impl != "")
	switch s.Faults {
	case "all":
		c.Faults = offered
	case "none":
		c.Faults = []string{}
	default:
		for _, name := range strings.Split(s.Faults, ",") {
			if !slices.Contains(offered, name) {
				return c, fmt.Errorf("--faults: %q is not offered on --target %s (want some of %s; all; or none)", name, s.Target, strings.Join(offered, ", "))
			}
			c.Faults = append(c.Faults, name)
		}
	}
	return c, nil
}

// clusterTail is the rest of clusterSetup: the setup that starts the
// cluster before the first plan and removes it after the last.
func clusterTail(s family.Settings, c consulsemrun.Config, impl *consulsemprotocol.Processes, box *clusterBox, backend string) (*family.Setup, error) {
	if box.stderr == nil {
		box.stderr = io.Discard
	}
	setup := &family.Setup{Target: s.Target, Real: true, Where: "a private " + backend + named(c.Version) + " cluster (" + strings.Join(consulsemrun.ClusterNodes(backend), ", ") + ")",
		What: c.String(), Prove: c, Server: serverName(backend, c.Version), Replay: append([]string{"--target", s.Target}, versionReplay(c.Version)...)}
	if impl != nil {
		setup.What, setup.Interrupt = impl.String(), impl.Stop
		setup.Replay = append(setup.Replay, "--impl", family.Quote(s.Impl))
	}
	setup.Start = func(ctx context.Context) error {
		cl, err := box.start(ctx)
		if err != nil {
			return err
		}
		c.Cluster = cl
		setup.Prove, setup.What = c, c.String()
		if impl != nil {
			setup.What = impl.String()
			if err := consulsemrun.PreflightImpl(ctx, backend, []string{cl.AppAddr()}, c.Version, impl); err != nil {
				return &family.ImplError{Err: err, Command: s.Impl, Kind: consulsemrun.Kind + " --backend " + backend}
			}
		}
		return nil
	}
	setup.Stop = func() {
		if impl != nil {
			impl.Stop()
		}
		box.stop()
	}
	return setup, nil
}

// A clusterBox is the private cluster of one run, started by start and
// gone (nodes, lab, files) after stop, which an interrupt may call while
// start is under way.
type clusterBox struct {
	backend, target string
	version         versions.Version // its nodes', the zero Version for the default
	stderr          io.Writer
	mu              sync.Mutex
	cl              *consulsemrun.Cluster
	stopped         bool
	leave           func() // says the cluster is gone (prover.Leave)
}

// start starts the cluster, saying so and how long it took; a machine
// that cannot is a *family.UsageError naming what it lacks.
func (b *clusterBox) start(ctx context.Context) (*consulsemrun.Cluster, error) {
	if err := consulsemrun.ClusterPreflight(b.backend); err != nil {
		return nil, family.Usagef("--target %s: %v", b.target, err)
	}
	if err := serverversion.Have(ctx, b.version, b.stderr); err != nil {
		return nil, err
	}
	if err := consulsemrun.PreflightVersion(b.backend, b.version); err != nil {
		return nil, family.Usagef("--target %s: %v", b.target, err)
	}
	leave := func() {}
	cl, err := consulsemrun.StartClusterVersion(ctx, b.backend, b.version, func(lab, dir string) {
		leave = prover.Leave(fmt.Sprintf("the %s cluster's network lab %s (ip netns list: its namespaces begin with %s) and %s", b.backend, lab, lab, dir))
		fmt.Fprintf(b.stderr, "lockprover: starting a cluster of %s%s (%s) in the network lab %s, files under %s\n",
			b.backend, named(b.version), strings.Join(consulsemrun.ClusterNodes(b.backend), ", "), lab, dir)
	})
	if err != nil {
		leave()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("--target %s: %w", b.target, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		cl.Stop()
		leave()
		return nil, context.Canceled
	}
	b.cl, b.leave = cl, leave
	fmt.Fprintf(b.stderr, "lockprover: started the cluster of %s in %.1fs; it is removed when the run ends\n", b.backend, cl.Took.Seconds())
	return cl, nil
}

// stop removes the cluster; it may be called more than once.
func (b *clusterBox) stop() {
	b.mu.Lock()
	cl, leave := b.cl, b.leave
	b.cl, b.leave, b.stopped = nil, nil, true
	b.mu.Unlock()
	if cl == nil {
		return
	}
	if err := cl.Stop(); err != nil {
		fmt.Fprintf(b.stderr, "lockprover: stopping the cluster: %v\n", err)
		if errors.Is(err, consulsemrun.ErrLeft) {
			return // what it could not remove is left behind, and said so
		}
	}
	leave()
	fmt.Fprintf(b.stderr, "lockprover: removed the cluster of %s and its network lab\n", b.backend)
}

// clusterReplay makes a plan on a cluster ready to run again on a
// cluster of its own.
func clusterReplay(p *consulsemrun.Plan, s family.Settings) (*family.Setup, error) {
	if len(p.Cluster) == 0 {
		return nil, fmt.Errorf("--target %s: the plan runs on a single %s: replay it on the simulator or --target %s", s.Target, p.Backend, p.Backend)
	}
	if b := consulsemrun.ClusterBackend(s.Target); b != p.Backend {
		return nil, fmt.Errorf("--target: the plan is for a %s cluster, not %s", p.Backend, s.Target)
	}
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, consulsemrun.MutantNamed(s.Mutant) != nil, "no consul-semaphore mutant named %q (see lockprover mutants --kind consul-semaphore)"); err != nil {
		return nil, err
	}
	if s.Impl != "" && p.Mutant != "" {
		return nil, family.Usagef("the plan is of mutant %s: replay it with --mutant reference to run it against the implementation", p.Mutant)
	}
	// The plan says what runs: its mutant, its variants, its faults.
	s.Clients, s.Ops, s.MaxFaults, s.Faults, s.Mutant = 0, 0, 0, "none", p.Mutant
	var opts []string
	if p.StaleReads {
		opts = append(opts, "stale-reads")
	}
	if p.BehaviorRelease {
		opts = append(opts, "behavior-release")
	}
	if p.LockDelay {
		opts = append(opts, "lock-delay")
	}
	if s.Impl == "" {
		s.Options = strings.Join(opts, ",")
	}
	setup, err := clusterSetup(s)
	if err != nil {
		return nil, err
	}
	return setup, nil
}
