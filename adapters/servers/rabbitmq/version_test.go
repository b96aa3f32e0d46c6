package rabbitmq

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"
)

// rootedVersion is RabbitMQ's version name from a Debian root, or skips
// the test saying how to get it: its root made here, the test run as
// root (mount, chroot, network namespaces).
func rootedVersion(t *testing.T, name string) versions.Version {
	t.Helper()
	quick.Skip(t, "RabbitMQ from a Debian root")
	v, err := versions.Lookup("rabbitmq", name)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skipf("%v runs from a Debian root in a network namespace: needs root", v)
	}
	if !v.Made() {
		t.Skipf("%v: its root is not made here (lockprover servers --make rabbitmq-%s: minutes, once)", v, v.Name)
	}
	return v
}

// startSingle starts one node of o's version in a lab of its own for t,
// stopped (and checked gone: leftovers) at t's end if t did not.
func startSingle(t *testing.T, o ClusterOptions) *Single {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	t0 := time.Now()
	s, err := StartSingle(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s node %s up in %.1fs (lab %s)", o.Version, s.Name, time.Since(t0).Seconds(), s.Lab.ID)
	t.Cleanup(func() { s.Stop() })
	return s
}

// serverVersion is the version an AMQP connection to url announces in
// the server properties of connection.start.
func serverVersion(t *testing.T, url string) string {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, _ := c.Properties["version"].(string)
	return v
}

// nodePIDs are the machine's pids of every process in the node's network
// namespace (its run's init, the script, beam, epmd, erl_child_setup,
// inet_gethost).
func nodePIDs(t *testing.T, s *Single) []int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", s.ns).Output()
	if err != nil {
		t.Fatalf("ip netns pids %s: %v", s.ns, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// comm is a process's command name, "" if it is gone.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// leftovers says what of a stopped Single is still there: any of pids
// (the processes its namespace held), a mount of a root, its lab's
// namespaces.
func leftovers(s *Single, pids []int) []string {
	var left []string
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			left = append(left, fmt.Sprintf("process %d (%s)", p, comm(p)))
		}
	}
	if out, _ := exec.Command("mount").Output(); strings.Contains(string(out), "lockprover/debian-") {
		left = append(left, "a mount of a root:\n"+string(out))
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), s.ns) {
		left = append(left, "namespace "+s.ns)
	}
	return left
}

// testVersion: a node of a root's version says it is that version, and,
// once stopped, leaves no process (beam, epmd), no mount and no
// namespace.
func testVersion(t *testing.T, name string) {
	v := rootedVersion(t, name)
	s := startSingle(t, ClusterOptions{Version: v})
	if got := serverVersion(t, s.URL()); got != name {
		t.Fatalf("the node says it is %q, want %s", got, name)
	}
	pids := nodePIDs(t, s)
	var names []string
	for _, p := range pids {
		names = append(names, comm(p))
	}
	t.Logf("processes of the node's namespace: %v %v", pids, names)
	if !strings.Contains(strings.Join(names, " "), "epmd") || !strings.Contains(strings.Join(names, " "), "beam") {
		t.Errorf("no epmd or beam in the node's namespace: %v", names)
	}
	beam, err := s.beam()
	if err != nil {
		t.Fatal(err)
	}
	if c := comm(beam); !strings.HasPrefix(c, "beam") {
		t.Fatalf("beam() = %d, a %q", beam, c)
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := s.Status(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Running) != 1 || st.Running[0] != s.Name {
		t.Errorf("cluster_status: running %v, want [%s]", st.Running, s.Name)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(s, pids); len(left) > 0 {
		t.Errorf("left after Stop: %s", strings.Join(left, "; "))
	}
}

func TestVersion436(t *testing.T) {
	quick.Long(t, "a RabbitMQ 4.3.6 node from a Debian root")
	testVersion(t, "4.3.6")
}
func TestVersion405(t *testing.T) {
	quick.Long(t, "a RabbitMQ 4.0.5 node from a Debian root")
	testVersion(t, "4.0.5")
}

// A node of 4.3.6 from sid's root takes the faults the prover strikes:
// Pause stops its VM (inside the run's PID namespace) so that it answers
// nothing, Resume continues it, Crash kills the VM and the run ends with
// it (epmd too), Start boots it again on its data.
func TestVersionFaults(t *testing.T) {
	quick.Long(t, "a RabbitMQ 4.3.6 node from a Debian root")
	v := rootedVersion(t, "4.3.6")
	s := startSingle(t, ClusterOptions{Version: v})
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	beam, err := s.beam()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	// (A stop reaches every thread of the VM in turn: the state reads T
	// a moment later.)
	if !eventuallyTrue(5*time.Second, func() bool { return procState(beam) == "T" }) {
		t.Errorf("paused VM %d is in state %q, want T", beam, procState(beam))
	}
	if err := dialWithin(s.URL(), 3*time.Second); err == nil {
		t.Error("a paused node took a connection")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := dialWithin(s.URL(), 10*time.Second); err != nil {
		t.Errorf("resumed node: %v", err)
	}
	init := s.proc.PID()
	pids := nodePIDs(t, s)
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	if s.Up() {
		t.Error("Up after Crash")
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil && p != init {
			t.Errorf("process %d (%s) of the crashed run still there", p, comm(p))
		}
	}
	t0 := time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("started again in %.1fs", time.Since(t0).Seconds())
	if got := serverVersion(t, s.URL()); got != "4.3.6" {
		t.Errorf("after Start the node says it is %q", got)
	}
	pids = nodePIDs(t, s)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(s, pids); len(left) > 0 {
		t.Errorf("left after Stop: %s", strings.Join(left, "; "))
	}
}

// sigintEnv, set, makes TestVersionSIGINT's child: it starts a 4.3.6
// node, writes the node's namespace and pids to the file the variable
// names, and waits to be interrupted.
const sigintEnv = "LOCKPROVER_RABBITMQ_SIGINT_CHILD"

// A test process that gets SIGINT (Go's default: it exits at once,
// running no cleanup) leaves no process of a node of a root and no mount:
// each run's init dies with its launcher (Pdeathsig), and the kernel
// kills the rest of its PID namespace with it; the lab's namespaces are
// what netns.Sweep (and the next lab of the block) removes.
func TestVersionSIGINT(t *testing.T) {
	quick.Long(t, "a RabbitMQ 4.3.6 node from a Debian root")
	if f := os.Getenv(sigintEnv); f != "" {
		v, _ := versions.Lookup("rabbitmq", "4.3.6")
		ctx, cancel := context.WithTimeout(context.Background(), startBound)
		defer cancel()
		s, err := StartSingle(ctx, t.TempDir(), ClusterOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		pids := fmt.Sprint(nodePIDs(t, s))
		os.WriteFile(f+".tmp", []byte(s.ns+" "+strings.Trim(pids, "[]")), 0o644)
		os.Rename(f+".tmp", f)
		time.Sleep(startBound)
		return
	}
	rootedVersion(t, "4.3.6")
	file := t.TempDir() + "/child"
	cmd := exec.Command(os.Args[0], "-test.run=^TestVersionSIGINT$", "-test.count=1")
	cmd.Env = append(os.Environ(), sigintEnv+"="+file)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startBound)
	var b []byte
	for {
		var err error
		if b, err = os.ReadFile(file); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child started no node:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	f := strings.Fields(string(b))
	ns := f[0]
	var pids []int
	for _, x := range f[1:] {
		p, _ := strconv.Atoi(x)
		pids = append(pids, p)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	t.Logf("child: %v; its node's processes %v in %s", cmd.ProcessState, pids, ns)
	gone := eventuallyTrue(10*time.Second, func() bool {
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil {
				return false
			}
		}
		return true
	})
	if !gone {
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil {
				t.Errorf("process %d (%s) left after the child's SIGINT", p, comm(p))
			}
		}
	}
	if out, _ := exec.Command("mount").Output(); strings.Contains(string(out), "lockprover/debian-") {
		t.Errorf("a root is still mounted:\n%s", out)
	}
	if _, err := netnsSweep(); err != nil {
		t.Errorf("netns.Sweep: %v", err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), ns) {
		t.Errorf("namespace %s left after Sweep", ns)
	}
}

// dialWithin opens and closes an AMQP connection to url, the handshake
// included within d (a paused node accepts the TCP connection, in its
// kernel, and answers nothing).
func dialWithin(url string, d time.Duration) error {
	c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(d)})
	if err != nil {
		return err
	}
	return c.Close()
}

// eventuallyTrue polls f every 100 ms until it holds or d passes.
func eventuallyTrue(d time.Duration, f func() bool) bool {
	end := time.Now().Add(d)
	for !f() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

var netnsSweep = netns.Sweep

// declareTransient declares a transient non-exclusive queue (durable
// false, exclusive false, auto-delete false: what amqp-locks-python
// declares its A queues as) on a node and says what came of it: "ok",
// or the error's code and text, and whether the connection survived.
func declareTransient(t *testing.T, url string) string {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclare("lp-version-transient", false, false, false, false, nil)
	if err == nil {
		ch.QueueDelete("lp-version-transient", false, false, false)
		return "ok"
	}
	time.Sleep(200 * time.Millisecond) // the connection's close follows the error
	conn := "connection open"
	if c.IsClosed() {
		conn = "connection closed"
	}
	return fmt.Sprintf("%v (%s)", err, conn)
}

// What each version does with a transient non-exclusive queue. RabbitMQ's
// 4.3.0 notes say it is denied by default (541, deprecated feature
// transient_nonexcl_queues); measured on Debian sid's 4.3.6, on a fresh
// node with the config StartCluster writes, it is declared all the same,
// as on 3.10.8 and 4.0.5 (docs/measurements/rabbitmq-versions.md).
func TestVersionTransientQueue(t *testing.T) {
	if os.Getenv("LOCKPROVER_RABBITMQ_VERSIONS") != "all" {
		t.Skip("a node of each version, a measurement: LOCKPROVER_RABBITMQ_VERSIONS=all runs it (make test does not)")
	}
	for _, c := range []struct{ name, want string }{
		{"3.10.8", "ok"},
		{"4.0.5", "ok"},
		{"4.3.6", "ok"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o ClusterOptions
			if c.name == "3.10.8" {
				quick.Skip(t, "a RabbitMQ node in a lab")
				if err := ClusterPreflight(); err != nil {
					t.Skipf("no RabbitMQ node in a lab here: %v", err)
				}
			} else {
				o.Version = rootedVersion(t, c.name)
			}
			s := startSingle(t, o)
			got := declareTransient(t, s.URL())
			t.Logf("%s: transient non-exclusive declare: %s", c.name, got)
			if !strings.HasPrefix(got, c.want) {
				t.Errorf("%s: %s, want %s...", c.name, got, c.want)
			}
			if c.name != "3.10.8" {
				logDeprecation(t, s)
			}
		})
	}
}

// logDeprecation logs what the node says of the deprecated feature
// transient_nonexcl_queues: its phase in the node's own table, whether the
// node permits it, and rabbitmqctl's list, so that a declare-ok is
// explained by the node rather than guessed.
func logDeprecation(t *testing.T, s *Single) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, expr := range []string{
		"maps:get(deprecation_phase, maps:get(transient_nonexcl_queues, rabbit_deprecated_features:list(all))).",
		"rabbit_deprecated_features:is_permitted(transient_nonexcl_queues).",
		"application:get_env(rabbit, permit_deprecated_features).",
		"rabbit_feature_flags:is_enabled(khepri_db).",
	} {
		out, err := s.Ctl(ctx, "eval", expr)
		t.Logf("%s = %s (%v)", expr, strings.TrimSpace(out), err)
	}
	out, err := s.Ctl(ctx, "list_deprecated_features")
	t.Logf("rabbitmqctl list_deprecated_features (%v):\n%s", err, out)
}

// 4.3.6 given cluster_partition_handling in its rabbitmq.conf (4.3
// removed the strategies): it boots, serves, and takes the key into the
// rabbit application's environment (measured: {ok,pause_minority}); the
// log says what it made of it.
func TestVersion436PartitionHandlingKey(t *testing.T) {
	if os.Getenv("LOCKPROVER_RABBITMQ_VERSIONS") != "all" {
		t.Skip("a measurement of 4.3.6: LOCKPROVER_RABBITMQ_VERSIONS=all runs it (make test does not)")
	}
	v := rootedVersion(t, "4.3.6")
	forcePartitionHandling = true
	defer func() { forcePartitionHandling = false }()
	s := startSingle(t, ClusterOptions{Version: v, PartitionHandling: PauseMinority})
	conf, _ := os.ReadFile(s.Node.dir + "/rabbitmq.conf")
	if !strings.Contains(string(conf), "cluster_partition_handling = pause_minority") {
		t.Fatalf("the key is not in the config:\n%s", conf)
	}
	if got := serverVersion(t, s.URL()); got != "4.3.6" {
		t.Fatalf("the node says it is %q", got)
	}
	log, _ := os.ReadFile(s.proc.Log)
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(strings.ToLower(line), "partition") {
			t.Logf("log: %s", line)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.Ctl(sctx, "eval", "application:get_env(rabbit, cluster_partition_handling).")
	t.Logf("application:get_env(rabbit, cluster_partition_handling) = %s (%v)", strings.TrimSpace(out), err)
	if err != nil || !strings.Contains(out, "pause_minority") {
		t.Errorf("4.3.6 did not take the key: %s (%v)", strings.TrimSpace(out), err)
	}
}

// Three nodes of 4.3.6 from sid's root, each in its host's namespace,
// form one cluster (Khepri, 4.3's only metadata store): every node lists
// the three running, and says it is 4.3.6; the lab's cleanup checks that
// no namespace is left, and no VM outlives Stop.
func TestClusterVersion436(t *testing.T) {
	if os.Getenv("LOCKPROVER_RABBITMQ_VERSIONS") != "all" {
		t.Skip("three 4.3.6 nodes take two minutes: LOCKPROVER_RABBITMQ_VERSIONS=all runs it (make test does not)")
	}
	v := rootedVersion(t, "4.3.6")
	lab := netnstest.Lab(t, "n1", "n2", "n3")
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	t0 := time.Now()
	c, err := StartCluster(ctx, lab, t.TempDir(), ClusterOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	t.Logf("a cluster of three 4.3.6 nodes formed in %.1fs", time.Since(t0).Seconds())
	var beams []int
	for _, n := range c.Nodes {
		st, err := n.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Running) != 3 {
			t.Errorf("%s: cluster_status lists %v running, want the three nodes", n.Name, st.Running)
		}
		if got := serverVersion(t, n.URL()); got != "4.3.6" {
			t.Errorf("%s says it is %q", n.Name, got)
		}
		b, err := n.beam()
		if err != nil {
			t.Fatal(err)
		}
		beams = append(beams, b)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, b := range beams {
		if syscall.Kill(b, 0) == nil {
			t.Errorf("VM %d (%s) still there after Stop", b, comm(b))
		}
	}
}
