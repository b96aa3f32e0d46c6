package clusters_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	consulsemfamily "github.com/lockprover/lockprover/families/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// The simulated cluster agrees with a private real one on twelve drawn
// sequences (seed 371126, whose first twelve hold a fault on the
// cluster: sequence 10, a cut on etcd), and the report counts them. On
// etcd only, unless LOCKPROVER_CLUSTER_DIFF_CONSUL=1: Consul's cluster
// still diverges on about one sequence in eight (81 of 92 agreed on seed
// 371142; the open kinds are in docs/consul-semaphore.md), so its half
// runs on request.
func TestClusterDifferential(t *testing.T) {
	for _, backend := range []string{consulsemfamily.Etcd, consulsemfamily.Consul} {
		t.Run(backend, func(t *testing.T) {
			if backend == consulsemfamily.Consul && os.Getenv("LOCKPROVER_CLUSTER_DIFF_CONSUL") != "1" {
				t.Skip("Consul's cluster has open divergences (docs/consul-semaphore.md): LOCKPROVER_CLUSTER_DIFF_CONSUL=1 runs it")
			}
			cl := startCluster(t, backend)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var progress strings.Builder
			rep, err := consulsim.ClusterDifferential(ctx, cl.ConformTarget(), 12, 371126, 0, &progress)
			t.Logf("%s\n%s", progress.String(), rep)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Sequences != 12 || rep.Agreed != 12 || rep.Divergence != "" {
				t.Errorf("%s: %d of %d agreed:\n%s", backend, rep.Agreed, rep.Sequences, rep.Divergence)
			}
			if !strings.Contains(progress.String(), "(fault)") {
				t.Errorf("%s: no sequence of twelve struck the cluster", backend)
			}
		})
	}
}
