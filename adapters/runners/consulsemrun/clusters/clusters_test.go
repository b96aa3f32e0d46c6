// Package clusters_test proves the semaphore recipe's hand plans on
// private Consul and etcd clusters (adapters/runners/consulsemrun's cluster
// targets), in a package of its own so that its minutes of cluster time
// run beside the other packages' tests.
package clusters_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// startCluster starts a cluster of backend for t, skipping where the
// machine cannot make one, and checks at t's end that it is gone: no
// namespace of its lab, no directory.
func startCluster(t *testing.T, backend string) *consulsemrun.Cluster {
	t.Helper()
	quick.Skip(t, "a "+backend+" cluster")
	if err := consulsemrun.ClusterPreflight(backend); err != nil {
		t.Skipf("no %s cluster here: %v", backend, err)
	}
	// A bound for a wedged start, not a measure (the start is logged).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := consulsemrun.StartCluster(ctx, backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s cluster started in %.1fs", backend, cl.Took.Seconds())
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
		ns, _ := exec.Command("ip", "netns", "list").Output()
		if strings.Contains(string(ns), cl.Lab()) {
			t.Errorf("lab %s left behind: %s", cl.Lab(), ns)
		}
		if _, err := exec.Command("test", "-e", cl.Dir()).Output(); err == nil {
			t.Errorf("%s left behind", cl.Dir())
		}
	})
	return cl
}

// prove runs the hand plan examples/cluster/<name>.json on cl (against
// mutant, "" for the reference) and judges it as the family does.
func prove(t *testing.T, cl *consulsemrun.Cluster, name, mutant string) (map[string]verdict.Verdict, []histories.Event) {
	t.Helper()
	p, err := consulsemrun.ReadPlan(filepath.Join("..", "..", "..", "..", "examples", "cluster", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	p.Mutant = mutant
	c := consulsemrun.Config{Backend: p.Backend, Target: p.Backend, Cluster: cl}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := c.Run(ctx, p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Evidence.Problems) > 0 {
		t.Errorf("%s: problems: %v", name, res.Evidence.Problems)
	}
	vs := map[string]verdict.Verdict{}
	for _, v := range lease.Check(res.History, model.Options{Family: []any{c.Judging("")}}) {
		vs[v.Property] = v
	}
	return vs, res.History
}

// partitions are the cuts a history's partitions made.
func partitions(h []histories.Event) []string {
	var out []string
	for i := range h {
		if h[i].Process == "nemesis" && h[i].Type == histories.Invoke && h[i].F == histories.Partition {
			out = append(out, histories.FaultOf(&h[i]).Cut)
		}
	}
	return out
}

// On etcd, a holder whose member is cut off from the others, and an
// election (the leader cut off, whichever it is when the fault strikes),
// leave every property of the reference holding; the history records
// the links really cut (the leader's, by its name).
func TestEtcdClusterHandPlans(t *testing.T) {
	quick.Long(t, "a cluster of three etcd servers, partitioned")
	t.Parallel()
	cl := startCluster(t, consulsemrun.Etcd)
	vs, h := prove(t, cl, "etcd-isolated-holder", "")
	for _, v := range vs {
		if v.Status == verdict.Fail {
			t.Errorf("etcd-isolated-holder: %s fails: %s", v.Property, v.Detail)
		}
	}
	if cuts := partitions(h); !slices.Equal(cuts, []string{"e1>e2 e2>e1 e1>e3 e3>e1"}) {
		t.Errorf("etcd-isolated-holder: partitions %q, want e1's", cuts)
	}
	vs, h = prove(t, cl, "etcd-leader-election", "")
	for _, v := range vs {
		if v.Status == verdict.Fail {
			t.Errorf("etcd-leader-election: %s fails: %s", v.Property, v.Detail)
		}
	}
	cuts := partitions(h)
	if len(cuts) != 1 || strings.Contains(cuts[0], "leader") {
		t.Fatalf("etcd-leader-election: partitions %q, want one cutting a member off", cuts)
	}
}

// On Consul, a holder whose client agent is cut off from every other
// node (its application still reaching it) leaves the reference's
// properties holding: its verify gets no answer (unknown), never held.
// The mutant that answers held when it cannot read (Consul #18271's
// monitor) fails aware on the same plan.
func TestConsulClusterHandPlans(t *testing.T) {
	quick.Long(t, "a cluster of three Consul servers, partitioned")
	t.Parallel()
	cl := startCluster(t, consulsemrun.Consul)
	vs, _ := prove(t, cl, "consul-isolated-agent", "")
	for _, v := range vs {
		if v.Status == verdict.Fail {
			t.Errorf("consul-isolated-agent: %s fails: %s", v.Property, v.Detail)
		}
	}
	vs, h := prove(t, cl, "consul-isolated-agent", "consul-monitor-forever")
	if v := vs[lease.Aware]; v.Status != verdict.Fail {
		t.Errorf("consul-isolated-agent, consul-monitor-forever: aware %s (%s), want a failure; the history:\n%s", v.Status, v.Detail, text(h))
	}
}

var _ prover.Plan = (*consulsemrun.Plan)(nil)

// text is h, an event a line.
func text(h []histories.Event) string {
	var b strings.Builder
	for i := range h {
		fmt.Fprintf(&b, "%+v\n", h[i])
	}
	return b.String()
}

// A cluster whose nodes cannot start (an etcd that exits at once) is an
// error of StartCluster, which leaves nothing behind: no namespace of its
// lab, no directory.
func TestFailedStartLeavesNothing(t *testing.T) {
	// Not parallel: it sets LOCKPROVER_ETCD, which the other tests of
	// this package, parallel, read after it has ended.
	quick.Skip(t, "a network lab")
	if err := consulsemrun.ClusterPreflight(consulsemrun.Etcd); err != nil {
		t.Skipf("no etcd cluster here: %v", err)
	}
	t.Setenv("LOCKPROVER_ETCD", "/bin/false")
	var lab, dir string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := consulsemrun.StartCluster(ctx, consulsemrun.Etcd, func(l, d string) { lab, dir = l, d })
	if err == nil {
		cl.Stop()
		t.Fatal("a cluster of /bin/false started")
	}
	if lab == "" || dir == "" {
		t.Fatalf("no lab or directory was made before the nodes failed: %v", err)
	}
	t.Logf("failed as it should: %v", err)
	if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), lab) {
		t.Errorf("lab %s left behind: %s", lab, ns)
	}
	if _, err := exec.Command("test", "-e", dir).Output(); err == nil {
		t.Errorf("%s left behind", dir)
	}
}
