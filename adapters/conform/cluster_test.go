package conform

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/backends/netns/netnstest"
	"github.com/lockprover/lockprover/backends/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
)

// Drawn cluster sequences run on the simulated cluster in every mode,
// the same sequence giving the same observations every time, and they
// observe what a cluster does: some step is held up (a timeout) or
// refused by a fault somewhere among them, and faults apply.
func TestSimClusterSequences(t *testing.T) {
	seen := map[string]bool{}
	for _, mode := range rabbitmq.Modes {
		for i := range 60 {
			steps := DrawClusterSteps(rand.New(rand.NewPCG(7, uint64(i))), 12)
			a, err := RunSimCluster(mode, 5*time.Second, 0, steps)
			if err != nil {
				t.Fatalf("%s, sequence %d: %v", mode, i, err)
			}
			b, _ := RunSimCluster(mode, 5*time.Second, 0, steps)
			if !slices.Equal(a, b) || len(a) != len(steps) {
				t.Fatalf("%s, sequence %d: %d steps observed %v, then %v", mode, i, len(steps), a, b)
			}
			for j, o := range a {
				if strings.HasPrefix(o, "fault failed") {
					t.Errorf("%s, sequence %d, step %d (%s): %s", mode, i, j+1, steps[j], o)
				}
				seen[o] = true
			}
		}
	}
	for _, want := range []string{"ok", "405", "404", "acked", "returned", "done", "404 home node down"} {
		if !seen[want] {
			t.Errorf("no step observed %q; seen %v", want, seen)
		}
	}
}

// The differential on a real cluster, briefly: a few drawn sequences
// under pause_minority agree with the simulated cluster. It needs root,
// network namespaces and rabbitmq-server, and skips without them.
func TestClusterDifferential(t *testing.T) {
	quick.Skip(t, "a RabbitMQ cluster")
	if err := rabbitmq.ClusterPreflight(); err != nil {
		t.Skipf("no RabbitMQ cluster here: %v", err)
	}
	lab := netnstest.Lab(t, "n1", "n2", "n3")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, err := rabbitmq.StartCluster(ctx, lab, t.TempDir(), rabbitmq.ClusterOptions{PartitionHandling: rabbitmq.PauseMinority})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	agreed, d, err := ClusterDifferential(ctx, RealCluster{c, lab}, ClusterDiffOptions{Mode: rabbitmq.PauseMinority, Sequences: 3, Seed: 1, Steps: 8, Out: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		t.Errorf("after %d sequences that agreed:\n%s", agreed, d)
	}
}

// What the real cluster did on the sequences conform --cluster found the
// simulated one diverging on (each recorded from a real run, and fixed in
// the simulator since), the simulator can do too, on some seed: after a
// bridge under pause_minority the real cluster paused one of the two
// nodes cut off from each other, either of them, or both; under ignore it
// cut one of them off from the bridge node too.
func TestSimClusterMatchesRecordedRealRuns(t *testing.T) {
	s := func(on, do, arg string) ClusterStep { return ClusterStep{On: on, Do: do, Arg: arg} }
	for _, c := range []struct {
		mode  string
		steps []ClusterStep
		real  []string
	}{
		{"pause_minority", // seed 1, sequence 2: n2 paused, n3 served
			[]ClusterStep{s("B", "declare-durable", "d1"), s("", "bridge", "n1"), s("A", "declare-passive", "d1"), s("C", "declare-exclusive", "q2"), s("B", "declare-exclusive", "q2")},
			[]string{"ok", "done", "404 home node down", "ok", "dial: refused"}},
		{"pause_minority", // seed 2, sequence 1: n2 served
			[]ClusterStep{s("", "bridge", "n1"), s("A", "delete", "q1"), s("B", "reconnect", "")},
			[]string{"done", "ok", "ok"}},
		{"pause_minority", // seed 1, sequence 8: n1 and n3 both paused
			[]ClusterStep{s("C", "publish", "q1"), s("", "bridge", "n2"), s("C", "declare-exclusive", "q2"), s("A", "declare-passive", "d1")},
			[]string{"returned", "done", "dial: refused", "dial: refused"}},
		{"ignore", // seed 1, sequence 2: n2 cut off from n1 too
			[]ClusterStep{s("B", "declare-durable", "d1"), s("", "bridge", "n1"), s("A", "declare-passive", "d1"), s("C", "declare-exclusive", "q2"), s("B", "declare-exclusive", "q2")},
			[]string{"ok", "done", "404 home node down", "ok", "ok"}},
	} {
		sim, k, err := SimClusterMatch(c.mode, 5*time.Second, c.steps, c.real)
		if err != nil || k >= 0 {
			t.Errorf("%s %v: real %v, the simulator at best %v (step %d differs), %v", c.mode, c.steps, c.real, sim, k+1, err)
		}
	}
}
