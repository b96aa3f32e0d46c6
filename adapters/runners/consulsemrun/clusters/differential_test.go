package clusters_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/conform/consulconform"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/internal/quick"
)

// The simulated cluster agrees with a private real one on twelve drawn
// sequences (seed 371126, whose first twelve hold a fault on the
// cluster: sequence 10, a cut on etcd, a server and an agent split off
// together on Consul), and the report counts them.
func TestClusterDifferential(t *testing.T) {
	quick.Long(t, "a cluster of three etcd servers and one of three Consul servers, partitioned")
	for _, backend := range []string{consulsemrun.Etcd, consulsemrun.Consul} {
		t.Run(backend, func(t *testing.T) {
			cl := startCluster(t, backend)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var progress strings.Builder
			rep, err := consulconform.ClusterDifferential(ctx, cl.ConformCluster(), 12, 371126, 0, &progress)
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
