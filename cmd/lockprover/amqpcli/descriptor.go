// Package amqpcli registers amqp-locks (adapters/runners/amqprun) with lockprover
// (package family): its kinds, flags and targets, what prove, replay,
// check, bench and conform do for it on the simulator and on a real
// RabbitMQ, and its side of the process protocol (amqpprotocol). It is the
// family's top: only cmd/lockprover/all imports it.
package amqpcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/internal/prover/explore"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// AMQP is amqp-locks: the persistent semaphore, the true mutex and the
// persistent mutex built from RabbitMQ queues (adapters/runners/amqprun).
var AMQP = &family.Descriptor{
	Name:       "amqp-locks",
	Kinds:      []string{histories.Semaphore, histories.Mutex},
	Models:     []string{amqprun.Strict},
	Properties: amqprun.PropertyNames,
	Faults:     append(amqprun.FaultNames(), amqprun.ClusterFaultNames...),
	Targets: []family.Target{{Name: "sim", Served: true, Faults: amqprun.FaultNames()}, {Name: "rabbitmq", Real: true, Faults: amqprun.FaultNames()},
		{Name: clusterTarget, Real: true, Faults: clusterFaults()}, {Name: simClusterTarget, Faults: clusterFaults()}},
	Flags: []family.Flag{
		{Name: "speedup", Arg: family.Float, Default: "20", Verbs: family.Prove | family.Replay, Usage: "amqp-locks, --impl on the simulator: how many times faster than the implementation's clock the served simulator's may run where it jumps; 0 for no bound\n (docs/served.md#clocks); more is faster, and fewer of the implementation's own timers fire in a plan's gaps"},
		{Name: "heartbeat", Arg: family.Duration, Verbs: family.Prove, Usage: "amqp-locks: the heartbeat the reference proposes, 0s for none; default 10s on the simulator, 1s on a real broker and for --impl\n (plans wait three heartbeats at their end)"},
		{Name: "amqp-url", Arg: "URL", Real: true, Verbs: family.Server, Usage: "amqp-locks: the real broker's URL; default $LOCKPROVER_AMQP_URL, else " + rabbitmq.DefaultURL},
		{Name: "docker", Arg: "auto|always|off", Real: true, Default: dockerAuto, Verbs: family.Prove | family.Replay | family.Validate, Usage: "amqp-locks: a private RabbitMQ in a Docker container for the run, removed at its end: auto when no broker is named or answers; always; or off\n. It is removed also after Ctrl-C; auto starts one when no broker is named (--amqp-url, $LOCKPROVER_AMQP_URL) and none answers at 127.0.0.1:5672"},
		{Name: "docker-image", Arg: "IMAGE", Real: true, Verbs: family.Prove | family.Replay | family.Validate, Usage: "amqp-locks: the image of --docker's broker; default $LOCKPROVER_RABBITMQ_IMAGE, else " + rabbitmq.ContainerImage + "\n (pulled if missing)"},
		{Name: "allow-restart", Bool: true, Real: true, Verbs: family.Runs | family.Conform, Usage: "amqp-locks: let plans on a real broker (and conform's table cases) restart it\n (rabbitmqctl stop_app/start_app), cutting every client of the broker off"},
		{Name: "partition-handling", Arg: "MODE", Verbs: family.Runs | family.Conform, Usage: "amqp-locks: the cluster's mode (--target rabbitmq-cluster or sim-cluster): ignore, pause_minority, autoheal or khepri; default ignore, khepri on 4.3\n. Replay: a cluster plan's on the simulator too. ignore, pause_minority and autoheal are Mnesia's cluster_partition_handling (ignore its default); khepri is Khepri's Raft store: RabbitMQ 4.3's only one, the default of new 4.2 deployments, an opt-in on 4.0 and 4.1 (khepri_db, which the run enables before 4.3; measured on 4.0.5 and 4.3.6), and the simulator's model of 4.3.6's (4.0.5's with --server-version 4.0.5)"},
		{Name: "net-ticktime", Arg: family.Duration, Default: "5s", Verbs: family.Runs | family.Conform, Usage: "amqp-locks: the cluster's net_ticktime (--target rabbitmq-cluster or sim-cluster), whole seconds\n: a node declares a silent peer down 0.75 to 1.25 of it after it last heard from it, by OTP's rule (measured with 5s: 1 to 1.25 of it); RabbitMQ's default, 60s, would make every partition plan last minutes"},
		{Name: "cluster", Bool: true, Verbs: family.Conform, Usage: "amqp-locks: the simulated cluster against a private three-node RabbitMQ cluster the run starts (needs root)\n, as --target rabbitmq-cluster does, in --partition-handling's mode: drawn sequences of queue methods through each node and cluster faults, compared step by step"},
		{Name: "rabbitmqctl", Arg: "COMMAND", Real: true, Default: "rabbitmqctl", Verbs: family.Conform, Usage: "amqp-locks: the command that runs rabbitmqctl for the broker's node (split on spaces)"},
		{Name: "cases", Arg: "ID,...", Verbs: family.Conform, Usage: "amqp-locks: part 1 runs only these cases of the table, by the IDs it prints, comma-separated; default every case\n (7b picks every 7b T=...)"},
		{Name: "retries", Arg: family.Int, Default: "2", Verbs: family.Conform, Usage: "amqp-locks: run a diverging table case again up to this many times (real timing varies on a loaded machine)"},
		{Name: "shrink-time", Arg: family.Duration, Default: "1m0s", Verbs: family.Conform, Usage: "amqp-locks: time to spend minimising a divergence"},
		{Name: "first", Arg: family.Int, Default: "0", Verbs: family.Conform, Usage: "amqp-locks: with --cluster, the first of --seed's sequences to run\n (the sequences before it are skipped: to go on after a divergence, or to run one again)"},
		{Name: "record", Arg: "FILE", Verbs: family.Conform, Usage: "amqp-locks: with --cluster, append each sequence's steps and what the real cluster observed to FILE\n (a line of JSON each), a corpus --recorded holds the simulated cluster to"},
		{Name: "keep-going", Bool: true, Verbs: family.Conform, Usage: "amqp-locks: with --cluster, run every sequence, counting those that diverge, and shrink none\n (a record of a hundred takes over an hour); the first that diverged is shown at the end"},
		{Name: "recorded", Arg: "FILE", Verbs: family.Conform, Usage: "amqp-locks: with --cluster, start no cluster: hold the simulated cluster to every sequence FILE recorded (--record)\n, as the differential does, in seconds"},
		serverVersionFlag,
		{Name: "slots", Arg: family.Int, Default: "8", Verbs: family.Bench, Usage: "amqp-locks: L, the semaphore's slots; acquire is also measured at slot L with L-1 slots held"},
	},
	// check --model strict judges acquire-exact with the whole semaphore.
	Judging:  func(flag func(string) string) any { return amqprun.Config{}.Judging(flag("model")) },
	Setup:    amqpSetup,
	ReadPlan: func(path string) (prover.Plan, error) { return amqprun.ReadPlan(path) },
	Replay:   amqpReplay,
	Serve:    amqpServe,
	Validate: amqpValidate,
	Explore:  amqpExplore,
	Bench:    amqpBench,
	Conform:  amqpConform,
}

func init() {
	for _, m := range amqprun.Mutants {
		AMQP.Mutants = append(AMQP.Mutants, family.Mutant{Name: m.Name, Property: m.Property, Defect: m.Defect, Prove: amqprun.Config{Scope: prover.Scope{Mutant: m.Name}}})
	}
	family.Register(AMQP)
}

// amqpSetup makes an amqp-locks proof from the command line: the
// reference (its options, a mutant) or an implementation over the
// protocol, on the simulator or a real broker.
func amqpSetup(s family.Settings) (*family.Setup, error) {
	a := amqprun.Config{Scope: prover.Scope{Clients: s.Clients, Ops: s.Ops, MaxFaults: s.MaxFaults}, Kind: s.Kind}
	target, err := amqpTarget(s)
	if err != nil {
		return nil, err
	}
	if err := amqpOptions(&a, s, target); err != nil {
		return nil, err
	}
	switch {
	case s.Mutant != "" && amqprun.MutantNamed(s.Mutant) == nil:
		return nil, fmt.Errorf("--mutant: no mutant named %q (see lockprover mutants)", s.Mutant)
	case s.Mutant != "" && s.Impl != "":
		return nil, errors.New("--mutant is a mutant of the reference; for one served over the protocol use --impl 'lockprover serve-reference --mutant NAME'")
	}
	a.Mutant = s.Mutant
	r := &amqpProof{s: s, a: a, target: target, u: s.Flag("amqp-url"), restart: s.Flag("allow-restart") != "",
		setup: &family.Setup{Target: target, Where: "the simulator"}}
	if name := firstGiven(s, clusterFlags); name != "" && target != clusterTarget && target != simClusterTarget {
		return nil, fmt.Errorf("--%s is for a cluster: add --target %s (or %s)", name, clusterTarget, simClusterTarget)
	}
	if err := r.onTarget(); err != nil {
		return nil, err
	}
	if s.Given("speedup") && (s.Impl == "" || target != "sim" && target != simClusterTarget) {
		return nil, family.Usagef("--speedup bounds the simulator served on the wire to an implementation: give --impl, on --target sim or %s", simClusterTarget)
	}
	if err := amqpFaults(&r.a, s.Faults, target, r.restart); err != nil {
		return nil, err
	}
	if r.cluster != nil {
		return clusterSetup(s, r.a, r.setup, r.cluster)
	}
	if err := r.startStop(); err != nil {
		return nil, err
	}
	r.setup.Prove = r.a
	return r.setup, nil
}

// clusterFlags are the flags for a cluster (real or simulated);
// brokerFlags those for a real broker the run connects to.
var (
	clusterFlags = []string{"partition-handling", "net-ticktime"}
	brokerFlags  = []string{"amqp-url", "allow-restart", "docker", "docker-image"}
)

// firstGiven is the first of names that s gives, or "".
func firstGiven(s family.Settings, names []string) string {
	for _, name := range names {
		if s.Given(name) {
			return name
		}
	}
	return ""
}

// amqpTarget is where an amqp-locks proof runs: --target, the simulator
// if none, for the reference and for an implementation (--impl), which
// the simulator serves on the wire; an implementation given a real
// broker's flag (--amqp-url, say) runs on that broker.
func amqpTarget(s family.Settings) (string, error) {
	if s.Target == "" && s.Impl != "" && firstGiven(s, brokerFlags) != "" {
		return "rabbitmq", nil
	}
	return cmp.Or(s.Target, "sim"), nil
}

// amqpProof is an amqp-locks proof being set up from the command line:
// its settings, the Config it proves, its target and the broker's URL
// and restarts as the flags name them, what the run starts (a broker's
// container, a cluster), and the Setup made.
type amqpProof struct {
	s       family.Settings
	a       amqprun.Config
	target  string
	u       string      // --amqp-url
	restart bool        // --allow-restart
	box     *brokerBox  // the run's broker container, with --docker
	cluster *clusterBox // the run's cluster, with --target rabbitmq-cluster
	node    *nodeBox    // the run's private node, with --server-version
	started bool        // box started: the broker is box's
	setup   *family.Setup
}

// onTarget sets the proof up for its target: a simulated cluster, the
// simulator, a private cluster or a real broker; any other is refused.
func (r *amqpProof) onTarget() error {
	switch r.target {
	case simClusterTarget:
		return r.onSimCluster()
	case "sim":
		if name := firstGiven(r.s, brokerFlags); name != "" {
			return fmt.Errorf("--%s is for a real broker: add --target rabbitmq", name)
		}
		return r.onSimVersion()
	case clusterTarget:
		return r.onCluster()
	case "rabbitmq":
		return r.onBroker()
	}
	return fmt.Errorf("--kind %s runs on the simulator (--target sim) or a real RabbitMQ (--target rabbitmq)", r.s.Kind)
}

// onSimVersion sets the simulator up as the RabbitMQ release
// --server-version names, where releases differ on one node
// (rabbitmqsim.Versions; none: 3.10.8's).
func (r *amqpProof) onSimVersion() error {
	v := r.s.Flag("server-version")
	if v == "" {
		return nil
	}
	if !slices.Contains(rabbitmqsim.Versions, v) {
		return family.Usagef("--server-version %s: the simulator behaves as RabbitMQ %s", v, strings.Join(rabbitmqsim.Versions, ", "))
	}
	r.a.Target = amqprun.Simulator{Version: v}
	r.setup.Where = "the simulator, as RabbitMQ " + v
	r.setup.Replay = append(r.setup.Replay, "--server-version", v)
	return nil
}

// clusterFaults are the faults of a cluster, real or simulated, for
// --faults all: every fault but a broker's restart, and the cluster's.
func clusterFaults() []string {
	return append(slices.DeleteFunc(amqprun.FaultNames(), isRestart), amqprun.ClusterFaultNames...)
}

// onSimCluster sets the proof up on a simulated cluster of three nodes,
// in the mode and net tick time the flags name.
func (r *amqpProof) onSimCluster() error {
	s := r.s
	if name := firstGiven(s, brokerFlags); name != "" {
		return fmt.Errorf("--%s is for a real broker: add --target rabbitmq", name)
	}
	o, err := simClusterOptions(s)
	if err != nil {
		return err
	}
	v, err := simClusterVersion(s, o.PartitionHandling)
	if err != nil {
		return err
	}
	r.a.Target = amqprun.Simulator{Cluster: []string{"n1", "n2", "n3"}, PartitionHandling: o.PartitionHandling, NetTicktime: o.NetTicktime, Version: v}
	if s.Faults == "all" {
		r.a.Faults = clusterFaults()
	}
	r.setup.Where = fmt.Sprintf("a simulated RabbitMQ cluster of 3 nodes (%s)", o.PartitionHandling)
	r.setup.Replay = []string{"--target", "sim", "--partition-handling", o.PartitionHandling, "--net-ticktime", strconv.Itoa(int(o.NetTicktime/time.Second)) + "s"}
	if v != "" {
		r.setup.Where = fmt.Sprintf("a simulated RabbitMQ %s cluster of 3 nodes (%s)", v, o.PartitionHandling)
		r.setup.Replay = append(r.setup.Replay, "--server-version", v)
	}
	return nil
}

// simClusterVersion is the release --server-version names for a simulated
// cluster in mode: only where the simulator has it measured, Mnesia's
// modes as 3.10.8 has them and khepri as 4.3.6 has it, or as 4.0.5 with
// khepri_db (broker-semantics.md section 6); "" for none.
func simClusterVersion(s family.Settings, mode string) (string, error) {
	v := s.Flag("server-version")
	switch {
	case v == "", v == "3.10.8" && mode != rabbitmqsim.Khepri, v == "4.3.6" && mode == rabbitmqsim.Khepri:
		return "", nil
	case v == "4.0.5" && mode == rabbitmqsim.Khepri:
		return v, nil
	case slices.Contains(rabbitmqsim.Versions, v) && mode == rabbitmqsim.Khepri:
		return "", family.Usagef("--server-version %s: the simulated cluster's khepri mode is 4.3.6's or 4.0.5's (khepri_db)", v)
	case slices.Contains(rabbitmqsim.Versions, v):
		return "", family.Usagef("--server-version %s: the simulated cluster's %s is 3.10.8's; on %s it has --partition-handling khepri only", v, mode, v)
	}
	return "", family.Usagef("--server-version %s: the simulator behaves as RabbitMQ %s", v, strings.Join(rabbitmqsim.Versions, ", "))
}

// onCluster sets the proof up on a private cluster of three nodes the
// run starts.
func (r *amqpProof) onCluster() error {
	s := r.s
	if name := firstGiven(s, brokerFlags); name != "" {
		return fmt.Errorf("--%s is not for --target %s, whose nodes the run starts (restart-node restarts one)", name, clusterTarget)
	}
	o, err := clusterOptions(s)
	if err != nil {
		return err
	}
	r.cluster = newClusterBox(s, o)
	if s.Faults == "all" {
		r.a.Faults = clusterFaults()
	}
	r.setup.Real, r.setup.Where = true, fmt.Sprintf("a private RabbitMQ cluster of 3 nodes (%s)", o.PartitionHandling)
	r.setup.Replay = clusterReplayFlags(o)
	if s.Impl != "" {
		r.setup.Replay = append([]string{"--impl", family.Quote(s.Impl)}, r.setup.Replay...)
	}
	return nil
}

// onBroker sets the proof up on a real broker: the one named, or a
// private one in Docker (--docker).
func (r *amqpProof) onBroker() error {
	s, setup := r.s, r.setup
	r.a.Target = amqprun.RabbitMQ{URL: rabbitmq.URL(r.u), AllowRestart: r.restart}
	if s.Faults == "all" && !r.restart {
		r.a.Faults = slices.DeleteFunc(amqprun.FaultNames(), isRestart)
	}
	if s.Given("server-version") {
		return r.onNode()
	}
	setup.Real, setup.Where = true, "RabbitMQ at "+redactURL(rabbitmq.URL(r.u))
	setup.Replay = amqpReplayFlags(s, r.u, r.restart)
	inDocker, image, err := containerChoice(s, answers)
	if err != nil {
		return err
	}
	if inDocker {
		r.box = newBox(s, image)
		setup.Where = "a private RabbitMQ in Docker (" + image + ")"
		setup.Replay = append(setup.Replay, dockerReplayFlags(s)...)
	}
	return nil
}

// onNode sets the proof up on a private node of the version
// --server-version names, which the run starts.
func (r *amqpProof) onNode() error {
	s, setup := r.s, r.setup
	if err := versionConflicts(s); err != nil {
		return err
	}
	v, err := serverversion.Parse(s, "rabbitmq")
	if err != nil {
		return err
	}
	r.node = newNodeBox(s, v)
	setup.Real, setup.Where, setup.Server = true, r.node.where(), v.String()
	setup.Replay = append(amqpReplayFlags(s, "", r.restart), "--server-version", v.Name)
	return nil
}

// brokerURL is the broker's URL once Start has begun: the container's
// once started, else the one named.
func (r *amqpProof) brokerURL() string {
	if r.node != nil {
		return r.node.url()
	}
	if r.started {
		return r.box.c.URL
	}
	return rabbitmq.URL(r.u)
}

// startBroker starts the container, if the run has one, and makes it
// the target.
func (r *amqpProof) startBroker(ctx context.Context) error {
	if r.node != nil {
		if err := r.node.start(ctx); err != nil {
			return err
		}
		t, err := r.node.target(r.restart)
		if err != nil {
			return err
		}
		r.a.Target = t
		r.setup.Prove = r.a
		return nil
	}
	if r.box == nil {
		return nil
	}
	if err := r.box.start(ctx, r.s.Flag("docker") == dockerAlways); err != nil {
		return err
	}
	r.a.Target = r.box.target(r.restart)
	r.setup.Prove = r.a
	r.started = true
	return nil
}

// startStop sets how the run starts and stops what it needs: the
// broker's container, if any, then a check that the broker (and the
// implementation's processes, with --impl) answer; at the end the
// implementation's processes, then the container.
func (r *amqpProof) startStop() error {
	s, setup := r.s, r.setup
	if s.Impl != "" && (r.target == "sim" || r.target == simClusterTarget) {
		pi := amqpprotocol.NewProcesses(s.Impl)
		pi.InitTimeout = s.InitTimeout
		r.a.Impl, setup.Stop = pi, pi.Stop
		sim, err := served(r.a.Target, s)
		if err != nil {
			return err
		}
		r.a.Target = sim
		setup.Replay = append([]string{"--impl", family.Quote(s.Impl)}, setup.Replay...)
		setup.Start = func(ctx context.Context) error {
			if err := pi.PreflightServed(ctx, r.a.Kind); err != nil {
				return &family.ImplError{Err: err, Command: s.Impl}
			}
			return nil
		}
	} else if s.Impl != "" {
		pi := amqpprotocol.NewProcesses(s.Impl)
		pi.InitTimeout = s.InitTimeout
		r.a.Impl, setup.Stop = pi, pi.Stop
		setup.Start = func(ctx context.Context) error {
			if err := r.startBroker(ctx); err != nil {
				return err
			}
			if err := rabbitmq.Preflight(ctx, r.brokerURL(), 0); err != nil {
				return &family.UsageError{Err: err}
			}
			if err := pi.Preflight(ctx, r.brokerURL(), r.a.Kind); err != nil {
				return &family.ImplError{Err: err, Command: s.Impl}
			}
			return nil
		}
	} else if r.target == "rabbitmq" {
		setup.Start = func(ctx context.Context) error {
			if err := r.startBroker(ctx); err != nil {
				return err
			}
			if err := rabbitmq.Preflight(ctx, r.brokerURL(), 0); err != nil {
				return &family.UsageError{Err: err}
			}
			return nil
		}
	}
	if r.box != nil || r.node != nil {
		// The implementation's processes end first, then their broker.
		stopImpl := setup.Stop
		setup.Stop = func() {
			if stopImpl != nil {
				stopImpl()
			}
			if r.box != nil {
				r.box.stop()
			}
			if r.node != nil {
				r.node.stop()
			}
		}
	}
	return nil
}

// served is target, the simulator (nil: the single node's defaults),
// served on the wire to an implementation's processes, its clock bounded
// by --speedup.
func served(target amqprun.Target, s family.Settings) (amqprun.Simulator, error) {
	sim, _ := target.(amqprun.Simulator)
	speedup, err := strconv.ParseFloat(s.Flag("speedup"), 64)
	if err != nil || speedup < 0 || math.IsInf(speedup, 0) || math.IsNaN(speedup) {
		return sim, family.Usagef("--speedup %s: want a number, 0 or more (0: no bound)", s.Flag("speedup"))
	}
	if speedup == 0 {
		speedup = -1 // no bound
	}
	sim.Wire = amqpprotocol.Wire(sim.Version, speedup)
	return sim, nil
}

// dockerReplayFlags are the --docker flags a replay needs to run where the
// run ran: in a container of the same image when the run chose one
// explicitly (auto chooses again where the replay runs).
func dockerReplayFlags(s family.Settings) []string {
	var f []string
	if s.Flag("docker") == dockerAlways {
		f = append(f, "--docker", dockerAlways)
	}
	if s.Given("docker-image") {
		f = append(f, "--docker-image", family.Quote(s.Flag("docker-image")))
	}
	return f
}

// amqpOptions sets the reference's options in a: the heartbeat (the
// target's default unless --heartbeat says otherwise), and --options,
// which an implementation over the protocol does not take.
func amqpOptions(a *amqprun.Config, s family.Settings, target string) error {
	if hb := s.Flag("heartbeat"); hb != "" {
		d, err := time.ParseDuration(hb)
		switch {
		case err != nil:
			return fmt.Errorf("--heartbeat: %v", err)
		case d < 0:
			return fmt.Errorf("--heartbeat must not be negative, not %v", d)
		case d > 0 && d < time.Millisecond:
			return fmt.Errorf("--heartbeat must be at least 1ms (or 0s for none), not %v", d)
		}
		a.Options.HeartbeatMs = amqprun.Ms(int(d.Milliseconds()))
	} else if target == "rabbitmq" || target == clusterTarget || s.Impl != "" {
		// An implementation gets a real broker's heartbeat on the served
		// simulator too: its plans wait three at their end, and its
		// counterexamples replay on either alike.
		a.Options.HeartbeatMs = amqprun.Ms(1000)
	}
	if s.Options == "" {
		return nil
	}
	if s.Impl != "" {
		return errors.New("--options sets the reference's options; for the reference served over the protocol use --impl 'lockprover serve-reference --options ...'")
	}
	o, err := amqprun.ParseOptions(a.Options, s.Options)
	if err != nil {
		return fmt.Errorf("--options: %w", err)
	}
	a.Options = o
	return nil
}

// amqpFaults reads --faults for amqp-locks: all (as the target allows),
// none, or a list of known faults, a broker restart on a real broker only
// with --allow-restart.
func amqpFaults(a *amqprun.Config, faults, target string, restart bool) error {
	switch faults {
	case "all":
		return nil
	case "none":
		a.Faults = []string{}
		return nil
	}
	for _, name := range strings.Split(faults, ",") {
		if slices.Contains(amqprun.ClusterFaultNames, name) {
			if target != clusterTarget && target != simClusterTarget {
				return fmt.Errorf("--faults: %s strikes a cluster: add --target %s (or %s)", name, clusterTarget, simClusterTarget)
			}
			a.Faults = append(a.Faults, name)
			continue
		}
		if !slices.Contains(amqprun.FaultNames(), name) {
			return fmt.Errorf("--faults: unknown fault %q (want some of %s; all; or none)", name, strings.Join(append(amqprun.FaultNames(), amqprun.ClusterFaultNames...), ", "))
		}
		if name == histories.RestartBroker && (target == clusterTarget || target == simClusterTarget) {
			return fmt.Errorf("--faults: on a cluster, restart-node restarts a node (restart-broker has no broker to restart)")
		}
		if name == histories.RestartBroker && target == "rabbitmq" && !restart {
			return errors.New("--faults: restart-broker on a real broker needs --allow-restart")
		}
		a.Faults = append(a.Faults, name)
	}
	return nil
}

// amqpReplayFlags are the flags a replay of a plan on a real broker
// needs: the implementation or the target, the URL when it holds no
// password, a restart allowed.
func amqpReplayFlags(s family.Settings, u string, restart bool) []string {
	replay := []string{"--target", "rabbitmq"}
	if s.Impl != "" {
		replay = []string{"--impl", family.Quote(s.Impl), "--target", "rabbitmq"} // --impl alone is the served simulator
	} else {
		if pu, err := url.Parse(u); u != "" && err == nil && pu.User != nil {
			if _, hasPassword := pu.User.Password(); !hasPassword {
				replay = append(replay, "--amqp-url", family.Quote(u))
			}
		} else if u != "" && err == nil {
			replay = append(replay, "--amqp-url", family.Quote(u))
		}
	}
	if restart {
		replay = append(replay, "--allow-restart")
	}
	return replay
}

// amqpReplay makes an amqp-locks plan read back ready to run: on the
// simulator (its trace to s.Trace), or on a real broker, against the
// reference, a mutant, or --impl.
func amqpReplay(pl prover.Plan, s family.Settings) (*family.Setup, error) {
	p := pl.(*amqprun.Plan)
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, amqprun.MutantNamed(s.Mutant) != nil, "no mutant named %q (see lockprover mutants)"); err != nil {
		return nil, err
	}
	target, err := replayTarget(p, s)
	if err != nil {
		return nil, err
	}
	if target == clusterTarget {
		return clusterReplay(p, s)
	}
	simCluster, err := replaySimulator(p, s, target)
	if err != nil {
		return nil, err
	}
	a := amqprun.Config{Scope: prover.Scope{Mutant: p.Mutant}, Target: simCluster}
	setup := &family.Setup{Target: target, Where: "the simulator", Stop: func() {}}
	if target == "sim" && len(p.Cluster) > 0 {
		setup.Where = fmt.Sprintf("a simulated RabbitMQ cluster of %d nodes (%s)", len(p.Cluster), cmp.Or(simCluster.PartitionHandling, p.PartitionHandling, rabbitmq.Ignore))
	}
	if simCluster.Version != "" {
		setup.Where = "the simulator, as RabbitMQ " + simCluster.Version
	}
	if s.Given("speedup") && (s.Impl == "" || target != "sim") {
		return nil, family.Usagef("--speedup bounds the simulator served on the wire to an implementation: give --impl, on --target sim")
	}
	if s.Impl != "" {
		pi := amqpprotocol.NewProcesses(s.Impl)
		pi.InitTimeout = s.InitTimeout
		a.Impl, setup.Stop = pi, pi.Stop
		if target == "sim" {
			sim, err := served(simCluster, s)
			if err != nil {
				return nil, err
			}
			a.Target = sim
		}
	}
	setup.What = a.String()
	if s.Impl != "" {
		setup.What = fmt.Sprintf("%q", s.Impl)
	}
	if target == "rabbitmq" {
		if err := replayOnBroker(s, &a, setup); err != nil {
			return nil, err
		}
	}
	setup.Prove = a
	return setup, nil
}

// replayTarget is where a replay of p runs: --target; if none, a real
// broker for --impl, a private cluster for a plan with a cluster, else
// the simulator. The simulated cluster is the simulator's (the plan
// names the cluster).
func replayTarget(p *amqprun.Plan, s family.Settings) (string, error) {
	target := s.Target
	if target == "" && s.Impl != "" && firstGiven(s, brokerFlags) != "" {
		target = "rabbitmq" // a real broker's flag names the broker
	}
	if target == "" {
		target = "sim"
	}
	if len(p.Cluster) > 0 && s.Target == "" {
		target = clusterTarget
	}
	if target == simClusterTarget {
		target = "sim"
	}
	if target != "sim" && target != "rabbitmq" && target != clusterTarget {
		return "", fmt.Errorf("an amqp-locks plan runs on the simulator (--target sim), RabbitMQ (--target rabbitmq) or a RabbitMQ cluster (--target %s)", clusterTarget)
	}
	return target, nil
}

// simClusterOptions reads --partition-handling and --net-ticktime for the
// simulated cluster, which has every mode (rabbitmqsim.Modes), khepri
// too, with no server version to ask: ignore unless given.
func simClusterOptions(s family.Settings) (rabbitmq.ClusterOptions, error) {
	khepri := s.Given("partition-handling") && s.Flag("partition-handling") == rabbitmqsim.Khepri
	if khepri {
		given := s.Given
		s.Given = func(name string) bool { return name != "partition-handling" && given(name) }
	}
	o, err := clusterOptions(s)
	if khepri {
		o.PartitionHandling = rabbitmqsim.Khepri
	}
	return o, err
}

// replaySimulator is the simulator a replay of p on target runs on: for
// a cluster plan on the simulator, its mode (as the plan says unless
// --partition-handling does) and tick time as the flags say; its trace
// to s.Trace. A cluster's flags are refused for any other plan, a real
// broker's on the simulator.
func replaySimulator(p *amqprun.Plan, s family.Settings, target string) (amqprun.Simulator, error) {
	var simCluster amqprun.Simulator
	if name := firstGiven(s, clusterFlags); name != "" && (target != "sim" || len(p.Cluster) == 0) {
		return simCluster, fmt.Errorf("--%s is for a cluster plan: add --target %s, or --target sim for a plan with a cluster", name, clusterTarget)
	}
	if target == "sim" && len(p.Cluster) > 0 {
		o, err := simClusterOptions(s)
		if err != nil {
			return simCluster, err
		}
		if s.Given("partition-handling") {
			simCluster.PartitionHandling = o.PartitionHandling
		}
		simCluster.NetTicktime = o.NetTicktime
	}
	if name := firstGiven(s, brokerFlags); name != "" && target == "sim" {
		return simCluster, fmt.Errorf("--%s is for a real broker: add --target rabbitmq", name)
	}
	if v := s.Flag("server-version"); v != "" && target == "sim" {
		var err error
		switch {
		case len(p.Cluster) > 0:
			simCluster.Version, err = simClusterVersion(s, amqprun.Simulator{PartitionHandling: simCluster.PartitionHandling}.Mode(p))
		case !slices.Contains(rabbitmqsim.Versions, v):
			err = family.Usagef("--server-version %s: the simulator behaves as RabbitMQ %s", v, strings.Join(rabbitmqsim.Versions, ", "))
		default:
			simCluster.Version = v
		}
		if err != nil {
			return simCluster, err
		}
	}
	simCluster.Trace = s.Trace
	return simCluster, nil
}

// replayOnBroker sets a replay (a, setup) up on a real broker: the one
// --amqp-url names, or a private one in Docker (--docker), started and
// checked when the replay starts.
func replayOnBroker(s family.Settings, a *amqprun.Config, setup *family.Setup) error {
	u, restart := rabbitmq.URL(s.Flag("amqp-url")), s.Flag("allow-restart") != ""
	a.Target = amqprun.RabbitMQ{URL: u, AllowRestart: restart}
	setup.Real, setup.Where = true, "RabbitMQ"
	if s.Given("server-version") {
		return replayOnNode(s, a, setup, restart)
	}
	inDocker, image, err := containerChoice(s, answers)
	if err != nil {
		return err
	}
	var box *brokerBox
	if inDocker {
		box = newBox(s, image)
		setup.Where = "a private RabbitMQ in Docker (" + image + ")"
		stopImpl := setup.Stop
		setup.Stop = func() { stopImpl(); box.stop() }
	}
	setup.Start = func(ctx context.Context) error {
		if box != nil {
			if err := box.start(ctx, s.Flag("docker") == dockerAlways); err != nil {
				return err
			}
			a.Target, u = box.target(restart), box.c.URL
			setup.Prove = *a
		}
		if err := rabbitmq.Preflight(ctx, u, 0); err != nil {
			return &family.UsageError{Err: err}
		}
		return nil
	}
	return nil
}

// amqpServe serves amqp-locks' reference (or a mutant) over the protocol.
func amqpServe(in io.Reader, out, log io.Writer, mutant, options string) error {
	if mutant != "" && amqprun.MutantNamed(mutant) == nil {
		return family.Usagef("--mutant: no mutant named %q (see lockprover mutants)", mutant)
	}
	o, err := amqprun.ParseOptions(amqprun.Options{}, options)
	if err != nil {
		return family.Usagef("--options: %v", err)
	}
	return amqpprotocol.Serve(in, out, o, mutant)
}

func redactURL(raw string) string {
	if pu, err := url.Parse(raw); err == nil {
		return pu.Redacted()
	}
	return raw
}

// amqpValidate checks an implementation of the semaphore and the mutex
// on the simulated broker served on the wire, or, given a real broker's
// flag (--amqp-url, --docker), against that broker once it answers.
func amqpValidate(ctx context.Context, command string, s family.Settings, out io.Writer) (bool, error) {
	if s.Options != "" {
		return false, family.Usagef("--options: an amqp-locks implementation is validated as it is, without options")
	}
	if firstGiven(s, brokerFlags) == "" {
		v := s.Flag("server-version")
		if v != "" && !slices.Contains(rabbitmqsim.Versions, v) {
			return false, family.Usagef("--server-version %s: the simulator behaves as RabbitMQ %s (a real broker: --amqp-url)", v, strings.Join(rabbitmqsim.Versions, ", "))
		}
		fmt.Fprintf(out, "on the simulated RabbitMQ %s, served on the wire (a real broker: --amqp-url URL)\n", cmp.Or(v, "3.10.8"))
		return amqpprotocol.ValidateServed(ctx, command, s.InitTimeout, v, out), nil
	}
	u := rabbitmq.URL(s.Flag("amqp-url"))
	inDocker, image, err := containerChoice(s, answers)
	if err != nil {
		return false, &family.UsageError{Err: err}
	}
	if inDocker {
		box := newBox(s, image)
		defer box.stop()
		if err := box.start(ctx, s.Flag("docker") == dockerAlways); err != nil {
			return false, err
		}
		u = box.c.URL
	}
	if err := rabbitmq.Preflight(ctx, u, 0); err != nil {
		return false, &family.UsageError{Err: fmt.Errorf("%w\ncannot reach the broker, so the implementation was not tried", err)}
	}
	return amqpprotocol.ValidateInit(ctx, command, s.InitTimeout, u, out), nil
}

// amqpBench measures the reference on the broker --amqp-url names beside
// its floors, with --slots slots.
func amqpBench(ctx context.Context, s family.Settings, c bench.Config, out io.Writer) error {
	slots, err := strconv.Atoi(s.Flag("slots"))
	switch {
	case err != nil:
		return family.Usagef("--slots: want a number, got %q", s.Flag("slots"))
	case slots < 2:
		return family.Usagef("--slots must be at least 2, not %d", slots)
	case s.Options != "":
		return family.Usagef("--options: amqp-locks' bench measures the reference with its defaults, and its floors")
	}
	u := rabbitmq.URL(s.Flag("amqp-url"))
	if err := rabbitmq.Preflight(ctx, u, 0); err != nil {
		return &family.UsageError{Err: err}
	}
	return amqprun.Bench(ctx, u, slots, c, out)
}

// replayOnNode sets a replay up on a private node of the version
// --server-version names, started when the replay starts.
func replayOnNode(s family.Settings, a *amqprun.Config, setup *family.Setup, restart bool) error {
	if err := versionConflicts(s); err != nil {
		return err
	}
	v, err := serverversion.Parse(s, "rabbitmq")
	if err != nil {
		return err
	}
	box := newNodeBox(s, v)
	setup.Where, setup.Server = box.where(), v.String()
	stopImpl := setup.Stop
	setup.Stop = func() { stopImpl(); box.stop() }
	setup.Start = func(ctx context.Context) error {
		if err := box.start(ctx); err != nil {
			return err
		}
		t, err := box.target(restart)
		if err != nil {
			return err
		}
		a.Target = t
		setup.Prove = *a
		return nil
	}
	return nil
}

// amqpConform runs the semantics table and drawn sequences on the
// simulated broker and on the RabbitMQ --amqp-url names.
func amqpConform(ctx context.Context, s family.Settings, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	retries, err := strconv.Atoi(s.Flag("retries"))
	switch {
	case err != nil:
		return 0, family.Usagef("--retries: want a number, got %q", s.Flag("retries"))
	case retries < 0:
		return 0, family.Usagef("--retries must not be negative, not %d", retries)
	}
	shrink, err := time.ParseDuration(s.Flag("shrink-time"))
	switch {
	case err != nil:
		return 0, family.Usagef("--shrink-time: %v", err)
	case shrink < 0:
		return 0, family.Usagef("--shrink-time must not be negative, not %v", shrink)
	}
	if s.Flag("cluster") != "" {
		return clusterConform(ctx, s, c, shrink, out)
	}
	for _, name := range []string{"partition-handling", "net-ticktime", "first", "record", "recorded"} {
		if s.Given(name) {
			return 0, family.Usagef("--%s is for --cluster", name)
		}
	}
	ctl := strings.Fields(s.Flag("rabbitmqctl"))
	if len(ctl) == 0 {
		return 0, family.Usagef("--rabbitmqctl must not be empty")
	}
	var cases []semantics.Case
	if f := s.Flag("cases"); f != "" {
		if cases, err = conform.SelectCases(strings.Split(f, ",")); err != nil {
			return 0, family.Usagef("--cases: %v", err)
		}
	}
	u := rabbitmq.URL(s.Flag("amqp-url"))
	if s.Given("server-version") {
		if err := versionConflicts(s); err != nil {
			return 0, err
		}
		if s.Given("rabbitmqctl") {
			return 0, family.Usagef("--server-version starts a private node, with its own rabbitmqctl: not with --rabbitmqctl")
		}
		v, err := serverversion.Parse(s, "rabbitmq")
		if err != nil {
			return 0, err
		}
		box := newNodeBox(s, v)
		if err := box.start(ctx); err != nil {
			return 0, err
		}
		defer box.stop()
		u = box.url()
		if ctl, err = box.ctl(); err != nil {
			return 0, err
		}
	}
	if err := rabbitmq.Preflight(ctx, u, 0); err != nil {
		return 0, &family.UsageError{Err: err}
	}
	tg, err := conform.Open(ctx, conform.Options{URL: u, Ctl: ctl, AllowRestart: s.Flag("allow-restart") != ""})
	if errors.Is(err, conform.ErrNoBroker) {
		return 0, family.Usagef("%v\nStart RabbitMQ there, or name another broker with --amqp-url or LOCKPROVER_AMQP_URL.", err)
	}
	if err != nil {
		return 0, &family.UsageError{Err: err}
	}
	defer func() {
		if err := tg.Close(); err != nil {
			fmt.Fprintf(c.Log, "conform: %v\n", err)
		}
	}()
	if !tg.FastCtl() {
		why := ""
		if err := tg.CtlSessionErr(); err != nil {
			why = " (" + err.Error() + ")"
		}
		fmt.Fprintf(out, "note: the rabbitmqctl eval session did not start%s; every query is a plain rabbitmqctl command (about a second), so timed cases may diverge\n", why)
	}
	st, err := conform.RunRabbitMQ(ctx, tg, rabbitmq.RedactURL(u), conform.RunConfig{Cases: cases, Sequences: c.Sequences, Seed: c.Seed, Retries: retries, Shrink: shrink, Out: out, Log: c.Log})
	return family.Conformance(st), err
}

// isRestart says whether a fault is restart-broker, which a plan on a
// shared real server may not draw.
func isRestart(fault string) bool { return fault == histories.RestartBroker }

// amqpExplore is explore: the reference's variants, or the
// implementations --impl names, one row each, on the served simulator.
func amqpExplore(ctx context.Context, c explore.Config) (bool, error) {
	if len(c.Impls) > 0 {
		return amqpprotocol.ExploreImpls(ctx, c)
	}
	return amqprun.Explore(ctx, c)
}
