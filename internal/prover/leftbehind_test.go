package prover_test

import (
	"slices"
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
)

// What is left and not yet released is listed; released, it is not.
func TestLeftBehind(t *testing.T) {
	a := prover.Leave("the queues of lock lp-b")
	b := prover.Leave("the queues of lock lp-a")
	if got := prover.LeftBehind(); !slices.Contains(got, "the queues of lock lp-a") || !slices.Contains(got, "the queues of lock lp-b") {
		t.Fatalf("left behind %v", got)
	}
	a()
	b()
	if got := prover.LeftBehind(); slices.Contains(got, "the queues of lock lp-a") || slices.Contains(got, "the queues of lock lp-b") {
		t.Errorf("released, still left behind: %v", got)
	}
}
