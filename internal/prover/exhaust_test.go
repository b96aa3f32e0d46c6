package prover

import (
	"fmt"
	"strings"
	"testing"
)

// Subsets lists the placements of at most k faults in order, the empty
// one first, each once.
func TestSubsets(t *testing.T) {
	got := fmt.Sprint(Subsets([]string{"a", "b", "c"}, 2))
	if want := "[[] [a] [a b] [a c] [b] [b c] [c]]"; got != want {
		t.Errorf("Subsets(a b c, 2) = %s, want %s", got, want)
	}
	if got := len(Subsets([]int{1, 2, 3}, 0)); got != 1 {
		t.Errorf("Subsets of at most 0: %d, want only the empty one", got)
	}
}

// TestClientScripts: each client gets every script of its own count of
// steps, shortest first, the first client varying slowest; a count per
// client must be one per client, and too many plans are refused by --ops.
func TestClientScripts(t *testing.T) {
	cs, err := ClientScripts([]string{"a", "b"}, ExhaustScope{Clients: 2, EachOps: []int{2, 1}}, 1)
	if err != nil || len(cs) != 6*2 {
		t.Fatalf("%v, %d choices, want 12", err, len(cs))
	}
	if fmt.Sprint(cs[0], cs[1], cs[11]) != "[[a] [a]] [[a] [b]] [[b b] [b]]" {
		t.Errorf("order: %v %v %v", cs[0], cs[1], cs[11])
	}
	if s := (ExhaustScope{Clients: 2, EachOps: []int{2, 1}}).Steps(); s != "1 to 2 (c1), 1 to 1 (c2)" {
		t.Errorf("steps: %q", s)
	}
	if _, err := ClientScripts([]string{"a"}, ExhaustScope{Clients: 3, EachOps: []int{2, 1}}, 1); err == nil || !strings.HasPrefix(err.Error(), "--ops 2,1: give one count per client") {
		t.Errorf("two counts for three clients: %v", err)
	}
	if _, err := ClientScripts([]string{"a", "b", "c", "d"}, ExhaustScope{Clients: 2, Ops: 4}, 2); err == nil || !strings.HasPrefix(err.Error(), "--clients 2, --ops 4: 2.31e+05 plans") {
		t.Errorf("too many: %v", err)
	}
}

// A schedule's prefix replayed onto a point with another number of
// choices than when the search first met it has left the tree (an
// implementation whose steps depend on more than the choices): the dfs
// says where, and only then.
func TestPrefixThatDiverges(t *testing.T) {
	same := &dfs{prefix: []int{1, 0}, prefixNs: []int{2, 3}, pruned: -1, bound: -1}
	same.Choose(2, -1, nil)
	same.Choose(3, -1, nil)
	if same.diverged != "" {
		t.Errorf("the same numbers of choices: diverged %q", same.diverged)
	}
	other := &dfs{prefix: []int{1, 0}, prefixNs: []int{2, 3}, pruned: -1, bound: -1}
	if pick := other.Choose(2, -1, nil); pick != 1 {
		t.Fatalf("first choice %d, want the prefix's 1", pick)
	}
	other.Choose(4, -1, nil)
	if want := "the schedule's choice 2 was among 4 where it had been among 3"; !strings.Contains(other.diverged, want) {
		t.Errorf("diverged %q, want it to say %q", other.diverged, want)
	}
	// The branches a run stacks carry the numbers of choices they met.
	if b := same.branches(0, 2); len(b) == 0 || len(b[0].ns) != len(b[0].picks) {
		t.Errorf("branches %v: each needs as many numbers of choices as picks", b)
	}
}
