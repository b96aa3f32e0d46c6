package rabbitmqtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
)

// Cluster starts a three-node cluster (n1, n2, n3) as o says, in a lab
// of its own, for t, and stops it (and its lab) at t's end. It skips t,
// saying why, where the machine cannot make one: no rabbitmq-server, not
// root, or a version of a Debian root that is not made here.
func Cluster(t *testing.T, o rabbitmq.ClusterOptions) (*rabbitmq.Cluster, *netns.Lab) {
	t.Helper()
	quick.Skip(t, "a RabbitMQ cluster")
	if o.Version.Rooted() {
		if os.Geteuid() != 0 {
			t.Skip("nodes from a Debian root in network namespaces need root")
		}
		if !o.Version.Made() {
			t.Skipf("%v: its root is not made here (lockprover servers --make rabbitmq-%s: minutes, once)", o.Version, o.Version.Name)
		}
	}
	if err := rabbitmq.ClusterPreflightOf(o.Version); err != nil {
		t.Skipf("no RabbitMQ cluster here: %v", err)
	}
	lab := netnstest.Lab(t, "n1", "n2", "n3")
	// A bound for a wedged start, not a measure: three Erlang VMs boot
	// and join in under a minute on a quiet machine, and took over 3
	// minutes beside the suite (adapters/servers/rabbitmq's TestClusterStarts).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := rabbitmq.StartCluster(ctx, lab, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c, lab
}
