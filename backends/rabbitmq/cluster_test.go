package rabbitmq

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/backends/netns"
	"github.com/lockprover/lockprover/internal/quick"
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
	lab, err := netns.New(context.Background(), "n1", "n2", "n3")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lab.Close()
		ns, _ := exec.Command("ip", "netns", "list").Output()
		if strings.Contains(string(ns), lab.ID) {
			t.Errorf("lab %s left behind", lab.ID)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	c, err := StartCluster(ctx, lab, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("three nodes (%s, net_ticktime %v) in one cluster in %v", c.o.PartitionHandling, c.o.NetTicktime, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c, lab
}

// TestClusterStarts: three nodes start in a lab and form one cluster, each
// taking AMQP connections, and nothing is left once stopped.
func TestClusterStarts(t *testing.T) {
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
	t.Logf("%s", out)
}
