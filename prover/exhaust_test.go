package prover

import (
	"fmt"
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
