package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"

	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
)

// startCluster starts a three-node cluster in a lab of its own for a
// test, skipping where the machine cannot make one, and removes every
// trace of it (nodes, epmd, namespaces) at the test's end.
func startCluster(t *testing.T, o ClusterOptions) (*Cluster, *netns.Lab) {
	t.Helper()
	quick.Skip(t, "a RabbitMQ cluster")
	if err := ClusterPreflight(); err != nil {
		t.Skipf("no RabbitMQ cluster here: %v", err)
	}
	lab := netnstest.Lab(t, "n1", "n2", "n3")
	// startBound: three Erlang VMs booting (about 20 s of CPU each) and
	// six rabbitmqctl VMs joining them, which beside the suite (load 24
	// to 40) ran past the 3 minutes this was: rabbitmqctl stop_app killed
	// after 185 s.
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	t0 := time.Now()
	c, err := StartCluster(ctx, lab, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("three nodes (%s, net_ticktime %v) in one cluster in %v", c.o.PartitionHandling, c.o.NetTicktime, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() { stopCluster(t, c) })
	return c, lab
}

// stopCluster stops c's nodes at a test's end. A node that did not stop
// within Stop's grace and was killed is logged, not failed: it is gone
// either way, and a loaded machine (a test beside cluster differentials)
// stretches an Erlang VM's clean stop past 30 s; any other error fails.
func stopCluster(t *testing.T, c *Cluster) {
	err := c.Stop()
	var other []error
	for _, e := range unjoin(err) {
		if !errors.Is(e, proc.ErrKilled) {
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		t.Errorf("Stop: %v", errors.Join(other...))
	} else if err != nil {
		t.Logf("Stop: %v (killed after the grace: nothing left)", err)
	}
}

// unjoin is the errors errors.Join put in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// startBound bounds a cluster's (or a node's) start in the tests: a
// limit for a wedged start, not a measure of how long one takes, which is
// CPU work that a loaded machine stretches (a cluster starts in under a
// minute on a quiet machine). The test's own time is logged.
const startBound = 10 * time.Minute

// TestClusterStarts: three nodes start in a lab and form one cluster, each
// taking AMQP connections, and nothing is left once stopped.
func TestClusterStarts(t *testing.T) {
	quick.Long(t, "a cluster of three RabbitMQ 3.10 nodes")
	c, _ := startCluster(t, ClusterOptions{PartitionHandling: PauseMinority})
	out, err := c.Nodes[0].Ctl(context.Background(), "cluster_status", "--formatter", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if !strings.Contains(out, n.Name) {
			t.Errorf("cluster_status does not name %s: %s", n.Name, out)
		}
	}
	// Pause stops the node's VM itself (not the script that runs it),
	// Resume continues it; Crash kills it and Start brings it back into
	// the cluster.
	n3 := c.Nodes[2]
	pid, err := n3.beam()
	if err != nil {
		t.Fatal(err)
	}
	if err := n3.Pause(); err != nil {
		t.Fatal(err)
	}
	// A signal is delivered when the kernel next schedules the VM's
	// threads: on a loaded machine, some milliseconds after kill returns.
	st := procState(pid)
	for i := 0; i < 100 && st != "T"; i++ {
		time.Sleep(20 * time.Millisecond)
		st = procState(pid)
	}
	if st != "T" {
		t.Errorf("paused node's VM (pid %d) in state %q 2 s after SIGSTOP, want T (stopped)", pid, st)
	}
	if err := n3.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := n3.Crash(); err != nil {
		t.Fatal(err)
	}
	if procState(pid) != "" {
		t.Errorf("crashed node's VM (pid %d) still runs", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	if err := n3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Nodes[0].Ctl(ctx, "cluster_status", "--formatter", "json"); err != nil || !strings.Contains(out, n3.Name) {
		t.Errorf("after its restart, cluster_status %v: %s", err, out)
	}
	// Reset makes the cluster anew: one cluster again, a durable queue
	// declared before it gone.
	q := uniqueName(t)
	if _, err := n3.Ctl(ctx, "eval", fmt.Sprintf(`rabbit_amqqueue:declare(rabbit_misc:r(<<"/">>, queue, <<"%s">>), true, false, [], none, <<"lockprover">>).`, q)); err != nil {
		t.Fatal(err)
	}
	if qs, err := c.Nodes[0].Ctl(ctx, "list_queues", "name", "--no-table-headers", "--quiet"); err != nil || !strings.Contains(qs, q) {
		t.Fatalf("before the reset, list_queues %v: %s (want %s)", err, qs, q)
	}
	if err := c.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.agreed(ctx, &Recovery{}) {
		t.Error("after a reset, the nodes do not agree on one cluster")
	}
	if qs, err := c.Nodes[0].Ctl(ctx, "list_queues", "name", "--no-table-headers", "--quiet"); err != nil || strings.Contains(qs, q) {
		t.Errorf("after a reset, list_queues %v: %s (want no %s)", err, qs, q)
	}
}

// procState is a process's state letter from /proc ("" if it is gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		if st := s[i+2 : i+3]; st != "Z" {
			return st
		}
	}
	return ""
}

// A partition handling mode RabbitMQ does not have, or a net_ticktime that
// is not whole seconds, is refused before anything starts, naming it.
func TestStartClusterRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    ClusterOptions
		want string
	}{
		{ClusterOptions{PartitionHandling: "pause-minority"}, `partition handling "pause-minority": want one of ignore, pause_minority, autoheal, khepri`},
		{ClusterOptions{NetTicktime: 1500 * time.Millisecond}, "net_ticktime 1.5s: whole seconds"},
		{ClusterOptions{NetTicktime: -time.Second}, "net_ticktime -1s"},
	} {
		_, err := StartCluster(context.Background(), nil, t.TempDir(), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.o, err, tc.want)
		}
	}
}

// A cluster's mode follows its version: Mnesia's versions take the three
// partition handling modes (ignore by default), and refuse khepri but for
// 4.0 to 4.2, which opt in to it (khepri_db); 4.3,
// whose metadata lives in Khepri, is khepri by default and refuses a
// Mnesia mode, naming the version, before anything starts.
func TestClusterModeByVersion(t *testing.T) {
	v436, err := versions.Lookup("rabbitmq", "4.3.6")
	if err != nil {
		t.Fatal(err)
	}
	v405, err := versions.Lookup("rabbitmq", "4.0.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o          ClusterOptions
		mode, want string // want: the error's words
	}{
		{o: ClusterOptions{}, mode: Ignore},
		{o: ClusterOptions{PartitionHandling: Autoheal}, mode: Autoheal},
		{o: ClusterOptions{Version: v405, PartitionHandling: PauseMinority}, mode: PauseMinority},
		{o: ClusterOptions{Version: v436}, mode: Khepri},
		{o: ClusterOptions{Version: v436, PartitionHandling: Khepri}, mode: Khepri},
		{o: ClusterOptions{PartitionHandling: Khepri}, want: "partition handling khepri: the machine's RabbitMQ keeps its metadata in Mnesia and has no Khepri"},
		{o: ClusterOptions{Version: v405, PartitionHandling: Khepri}, mode: Khepri},
		{o: ClusterOptions{Version: v405}, mode: Ignore},
		{o: ClusterOptions{Version: v436, PartitionHandling: PauseMinority}, want: "partition handling pause_minority: RabbitMQ 4.3.6 has no cluster_partition_handling"},
	} {
		m, err := tc.o.Mode()
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %q: mode %q, %v; want an error saying %q", tc.o.Version, tc.o.PartitionHandling, m, err, tc.want)
		case tc.want == "" && (err != nil || m != tc.mode):
			t.Errorf("%s %q: mode %q, %v; want %s", tc.o.Version, tc.o.PartitionHandling, m, err, tc.mode)
		}
		if tc.want != "" {
			if _, err := StartCluster(context.Background(), nil, t.TempDir(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartCluster %s %q: %v, want the same refusal", tc.o.Version, tc.o.PartitionHandling, err)
			}
		}
	}
}
