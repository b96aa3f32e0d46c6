package amqpcheck

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// A double hold on a cluster is explained by what struck it: the two
// holders' nodes, the partition between them, and how the first holder
// heard of it. The history is a real run of the isolated-holder hand plan
// on a three-node cluster under ignore (adapters/runners/amqprun's
// TestClusterIsolatedHolderIgnore).
func TestDoubleHoldExplainedOnCluster(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "179-cluster-ignore-double-hold.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lock := h[0].Lock
	judge := func(h []histories.Event, nodes map[string]string) verdict.Verdict {
		ev := &Evidence{Cluster: &Cluster{Mode: "ignore", NodeOf: nodes}}
		for _, v := range model.Check(h, model.Options{Evidence: &model.Evidence{Lock: lock, Family: ev}}).Verdicts {
			if v.Property == SlotExclusive {
				return v
			}
		}
		t.Fatal("no slot-exclusive verdict")
		return verdict.Verdict{}
	}
	nodes := map[string]string{"admin": "n2", "c1": "n1", "c2": "n2", "probe": "n1"}
	v := judge(h, nodes)
	want := "On the cluster (partition handling ignore): c1 held it through n1, c2 took it through n2, while the partition at #4 cut n1>n2 n1>n3 n2>n1 n3>n1 (n1 and n2 cut off from each other) and was not healed: n2 had declared n1 down and let c2 take the slot c1's queue still held there; c1 was told only by its verify (#8), which said not held."
	if v.Status != verdict.Fail || !strings.HasSuffix(v.Detail, want) {
		t.Errorf("got %s %q\nwant a failure ending %q", v.Status, v.Detail, want)
	}
	// Both through one node: no partition explains it.
	same := map[string]string{"admin": "n2", "c1": "n2", "c2": "n2"}
	if v := judge(h, same); !strings.HasSuffix(v.Detail, "c1 held it through n2, c2 took it through n2, the same node, so no partition explains it.") {
		t.Errorf("same node: %q", v.Detail)
	}
	// Without the partition in the history, none is cited.
	cut := slices.DeleteFunc(slices.Clone(h), func(e histories.Event) bool { return e.Process == "nemesis" })
	for i := range cut {
		cut[i].Index = i
	}
	if v := judge(cut, nodes); !strings.Contains(v.Detail, "with no fault on the cluster between n1 and n2 in force") {
		t.Errorf("no partition: %q", v.Detail)
	}
	// Without cluster evidence the verdict says nothing of a cluster.
	for _, v := range model.Check(h, model.Options{}).Verdicts {
		if strings.Contains(v.Detail, "cluster") {
			t.Errorf("a verdict without cluster evidence speaks of one: %q", v.Detail)
		}
	}
}

// Any other failure on a cluster says through which node the operation
// that showed it went, and what had struck the cluster by then. The
// history is what prove --target sim-cluster --partition-handling
// pause_minority --seed 1 found, shrunk: admin made the one slot through
// n2, n2 was killed, and admin2's count through n1 found no slot (n1 had
// declared n2 down and dropped its queues' records).
func TestFailureExplainedOnCluster(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "182-cluster-pm-count-node-killed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{"admin": "n2", "admin2": "n1", "c1": "n1", "c2": "n1", "c3": "n1", "probe": "n1"}
	judge := func(h []histories.Event) verdict.Verdict {
		ev := &Evidence{Cluster: &Cluster{Mode: "pause_minority", NodeOf: nodes}}
		for _, v := range model.Check(h, model.Options{Evidence: &model.Evidence{Lock: "lp", Family: ev}}).Verdicts {
			if v.Property == CountExact {
				return v
			}
		}
		t.Fatal("no count-exact verdict")
		return verdict.Verdict{}
	}
	want := "On the cluster (partition handling pause_minority): admin2 count (#15) went through n1 while n2 was killed (#11)."
	if v := judge(h); v.Status != verdict.Fail || !strings.HasSuffix(v.Detail, want) {
		t.Errorf("got %s %q\nwant a failure ending %q", v.Status, v.Detail, want)
	}
	// The same count after n2's restart: the kill had struck and ended.
	moved := slices.Clone(h)
	i := slices.IndexFunc(moved, func(e histories.Event) bool { return e.Index == 18 }) // n2's restart
	restart := slices.Clone(moved[i : i+2])
	moved = slices.Delete(moved, i, i+2)
	j := slices.IndexFunc(moved, func(e histories.Event) bool { return e.Index == 15 }) // admin2's count
	moved = slices.Insert(moved, j, restart...)
	want = "admin2 count (#15) went through n1; before it, with no fault on the cluster in force, n2 was killed (#11) and started again (#18)."
	if v := judge(moved); !strings.HasSuffix(v.Detail, want) {
		t.Errorf("count after the restart: %q\nwant it to end %q", v.Detail, want)
	}
	// With no fault on the cluster, it says so.
	calm := slices.DeleteFunc(slices.Clone(h), func(e histories.Event) bool { return e.Process == "nemesis" })
	if v := judge(calm); !strings.HasSuffix(v.Detail, "admin2 count (#15) went through n1; no fault had struck the cluster before it.") {
		t.Errorf("no fault: %q", v.Detail)
	}
	// A kill of a process is not a fault on the cluster.
	nodes["n2"] = "n2" // n2 named as a process of the plan
	if v := judge(h); strings.Contains(v.Detail, "killed") {
		t.Errorf("a process's kill cited as a node's: %q", v.Detail)
	}
}
