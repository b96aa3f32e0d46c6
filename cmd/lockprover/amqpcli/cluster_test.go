package amqpcli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/internal/family"
)

// --target rabbitmq-cluster's flags are refused where they mean nothing
// or say something wrong, each naming the flag.
func TestClusterSetupRefusals(t *testing.T) {
	for _, tt := range []struct {
		name, target, faults string
		flags                map[string]string
		err                  string
	}{
		{"mode without the cluster", "sim", "all", map[string]string{"partition-handling": "autoheal"}, "--partition-handling is for a cluster: add --target rabbitmq-cluster"},
		{"ticktime on a broker", "rabbitmq", "all", map[string]string{"net-ticktime": "5s"}, "--net-ticktime is for a cluster"},
		{"bad mode", clusterTarget, "all", map[string]string{"partition-handling": "pause_majority"}, `--partition-handling: want ignore, pause_minority, autoheal or khepri, not "pause_majority"`},
		{"part seconds", clusterTarget, "all", map[string]string{"net-ticktime": "2500ms"}, "--net-ticktime: want whole seconds"},
		{"URL on the cluster", clusterTarget, "all", map[string]string{"amqp-url": "amqp://u:p@h:5672/"}, "--amqp-url is not for --target rabbitmq-cluster"},
		{"cluster fault on the simulator", "sim", "isolate-node", nil, "--faults: isolate-node strikes a cluster: add --target rabbitmq-cluster"},
		{"broker restart on the cluster", clusterTarget, "restart-broker", nil, "restart-node restarts a node"},
		{"khepri on the machine's RabbitMQ", clusterTarget, "all", map[string]string{"partition-handling": "khepri"}, "--partition-handling: partition handling khepri: the machine's RabbitMQ keeps its metadata in Mnesia"},
		{"a Mnesia mode on 4.3.6", clusterTarget, "all", map[string]string{"partition-handling": "autoheal", "server-version": "4.3.6"}, "--partition-handling: partition handling autoheal: RabbitMQ 4.3.6 has no cluster_partition_handling"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			flags := map[string]string{"partition-handling": "ignore", "net-ticktime": "5s", "docker": dockerAuto}
			given := map[string]bool{}
			for k, v := range tt.flags {
				flags[k], given[k] = v, true
			}
			s := family.Settings{Kind: "semaphore", Target: tt.target, Faults: tt.faults,
				Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return given[n] }}
			_, err := amqpSetup(s)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("err = %v, want one saying %q", err, tt.err)
			}
		})
	}
}

// --target sim-cluster draws plans for a simulated cluster of n1, n2,
// n3 in the mode and tick time the flags say, with the cluster's faults
// (no broker restart), and says how to replay one on the simulator;
// what is only for a real broker is refused, naming the flag.
func TestSimClusterSetup(t *testing.T) {
	flags := map[string]string{"partition-handling": "autoheal", "net-ticktime": "7s", "docker": dockerAuto}
	given := map[string]bool{"partition-handling": true}
	s := family.Settings{Kind: "semaphore", Target: simClusterTarget, Faults: "all",
		Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return given[n] }}
	setup, err := amqpSetup(s)
	if err != nil {
		t.Fatal(err)
	}
	a := setup.Prove.(amqprun.Config)
	sim, ok := a.Target.(amqprun.Simulator)
	if !ok || !slices.Equal(sim.Cluster, []string{"n1", "n2", "n3"}) || sim.PartitionHandling != "autoheal" || sim.NetTicktime != 7*time.Second {
		t.Errorf("target %+v, want a simulated cluster of n1, n2, n3 under autoheal, net_ticktime 7s", a.Target)
	}
	if setup.Real || !strings.Contains(setup.Where, "simulated RabbitMQ cluster") {
		t.Errorf("setup says it runs on %q (real %v)", setup.Where, setup.Real)
	}
	if slices.Contains(a.Faults, "restart-broker") || !slices.Contains(a.Faults, "isolate-node") {
		t.Errorf("faults %v, want the cluster's, no restart-broker", a.Faults)
	}
	if got := strings.Join(setup.Replay, " "); got != "--target sim --partition-handling autoheal --net-ticktime 7s" {
		t.Errorf("replay flags %q", got)
	}
	for _, name := range []string{"amqp-url", "docker"} {
		given := map[string]bool{name: true}
		s.Given = func(n string) bool { return given[n] }
		if _, err := amqpSetup(s); err == nil || !strings.Contains(err.Error(), "--"+name+" is for a real broker") {
			t.Errorf("--%s on the simulated cluster: %v", name, err)
		}
	}
}

// replay --target sim runs a cluster plan on the simulated cluster, in
// the plan's mode unless --partition-handling says another; the flag on
// a plan without a cluster is refused.
func TestReplayClusterPlanOnTheSimulator(t *testing.T) {
	p, err := amqprun.ReadPlan("../../../examples/cluster/isolated-holder.json")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{"partition-handling": "pause_minority", "net-ticktime": "5s", "docker": dockerAuto}
	for _, given := range []bool{false, true} {
		s := family.Settings{Kind: "semaphore", Target: "sim",
			Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return given && n == "partition-handling" }}
		setup, err := amqpReplay(p, s)
		if err != nil {
			t.Fatal(err)
		}
		sim := setup.Prove.(amqprun.Config).Target.(amqprun.Simulator)
		want := map[bool]string{false: "", true: "pause_minority"}[given]
		wantWhere := map[bool]string{false: "(ignore)", true: "(pause_minority)"}[given]
		if sim.PartitionHandling != want || !strings.Contains(setup.Where, wantWhere) || setup.Real {
			t.Errorf("--partition-handling given %v: target %+v on %q", given, sim, setup.Where)
		}
	}
	p.Cluster, p.Nodes, p.PartitionHandling, p.Nemesis = nil, nil, "", nil
	s := family.Settings{Kind: "semaphore", Target: "sim",
		Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return n == "partition-handling" }}
	if _, err := amqpReplay(p, s); err == nil || !strings.Contains(err.Error(), "--partition-handling is for a cluster plan") {
		t.Errorf("--partition-handling on a plan without a cluster: %v", err)
	}
}

// The simulated cluster runs khepri when asked: --target sim-cluster
// --partition-handling khepri draws plans for it and replays them there,
// and replay --target sim of a plan recorded under khepri runs khepri
// (examples/cluster/orphaned-release.json), with no server version.
func TestSimulatedClusterRunsKhepri(t *testing.T) {
	flags := map[string]string{"partition-handling": "khepri", "net-ticktime": "5s", "docker": dockerAuto}
	given := map[string]bool{"partition-handling": true}
	s := family.Settings{Kind: "semaphore", Target: simClusterTarget, Faults: "all",
		Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return given[n] }}
	setup, err := amqpSetup(s)
	if err != nil {
		t.Fatal(err)
	}
	if sim, ok := setup.Prove.(amqprun.Config).Target.(amqprun.Simulator); !ok || sim.PartitionHandling != "khepri" || !strings.Contains(setup.Where, "(khepri)") {
		t.Errorf("--target sim-cluster --partition-handling khepri: target %+v on %q", setup.Prove.(amqprun.Config).Target, setup.Where)
	}
	if got := strings.Join(setup.Replay, " "); got != "--target sim --partition-handling khepri --net-ticktime 5s" {
		t.Errorf("replay flags %q", got)
	}
	p, err := amqprun.ReadPlan("../../../examples/cluster/orphaned-release.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []bool{false, true} {
		s := family.Settings{Kind: "semaphore", Target: "sim",
			Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return mode && n == "partition-handling" }}
		setup, err := amqpReplay(p, s)
		if err != nil {
			t.Fatalf("replay --target sim (--partition-handling given %v): %v", mode, err)
		}
		sim := setup.Prove.(amqprun.Config).Target.(amqprun.Simulator)
		if want := map[bool]string{false: "", true: "khepri"}[mode]; sim.PartitionHandling != want || !strings.Contains(setup.Where, "(khepri)") || setup.Real {
			t.Errorf("replay of a khepri plan, --partition-handling given %v: target %+v on %q", mode, sim, setup.Where)
		}
	}
}

// A cluster of 4.3.6 runs Khepri when no --partition-handling is given
// (its only mode), and the run says so where it says where it runs; the
// machine's RabbitMQ runs ignore, RabbitMQ's default before 4.3.
func TestClusterModeFollowsTheVersion(t *testing.T) {
	for _, tc := range []struct{ version, mode string }{{"", "ignore"}, {"4.3.6", "khepri"}} {
		flags := map[string]string{"partition-handling": "ignore", "net-ticktime": "5s", "docker": dockerAuto, "server-version": tc.version}
		given := map[string]bool{"server-version": tc.version != ""}
		s := family.Settings{Kind: "semaphore", Target: clusterTarget, Faults: "all",
			Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return given[n] }}
		setup, err := amqpSetup(s)
		if err != nil {
			t.Fatalf("%q: %v", tc.version, err)
		}
		if want := "cluster of 3 nodes (" + tc.mode + ")"; !strings.Contains(setup.Where, want) {
			t.Errorf("version %q: runs on %q, want it to say %q", tc.version, setup.Where, want)
		}
		if got := strings.Join(setup.Replay, " "); !strings.Contains(got, "--partition-handling "+tc.mode) {
			t.Errorf("version %q: replay flags %q, want --partition-handling %s", tc.version, got, tc.mode)
		}
		if setup.Stop != nil {
			setup.Stop()
		}
	}
}

// --server-version on the simulator makes it behave as that release: a
// prove's target and replay flags say so, and a replay of a plan for one
// broker runs on it.
func TestSimulatorAsAVersion(t *testing.T) {
	flags := map[string]string{"server-version": "4.3.6", "docker": dockerAuto}
	s := family.Settings{Kind: "semaphore", Target: "sim", Faults: "all",
		Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return flags[n] != "" && n == "server-version" }}
	setup, err := amqpSetup(s)
	if err != nil {
		t.Fatal(err)
	}
	sim, ok := setup.Prove.(amqprun.Config).Target.(amqprun.Simulator)
	if !ok || sim.Version != "4.3.6" || setup.Real || setup.Where != "the simulator, as RabbitMQ 4.3.6" || !strings.Contains(strings.Join(setup.Replay, " "), "--server-version 4.3.6") {
		t.Errorf("prove: target %+v on %q, replay flags %v", setup.Prove.(amqprun.Config).Target, setup.Where, setup.Replay)
	}
	p, err := amqprun.ReadPlan("../../../examples/upstream/plans/amqp-admin-meets-held-mutex.json")
	if err != nil {
		t.Fatal(err)
	}
	setup, err = amqpReplay(p, s)
	if err != nil {
		t.Fatal(err)
	}
	if sim := setup.Prove.(amqprun.Config).Target.(amqprun.Simulator); sim.Version != "4.3.6" || setup.Where != "the simulator, as RabbitMQ 4.3.6" {
		t.Errorf("replay: target %+v on %q", sim, setup.Where)
	}
}
