package prover_test

import (
	"context"
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
)

// Detect counts the seeds that catch a mutant and the plans each took;
// the reference, which nothing catches, is missed by every seed.
func TestDetect(t *testing.T) {
	d, err := prover.Detect(context.Background(), toyFamily{broken: true}, toyExclusive, 5, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if d.Caught != 5 || d.Ran != 5 || d.Missed() || len(d.Plans) != 5 {
		t.Fatalf("mutant: %+v", d)
	}
	if p, ok := d.MedianPlans(); !ok || p < 1 {
		t.Errorf("median plans %d, %v", p, ok)
	}
	d, err = prover.Detect(context.Background(), toyFamily{}, toyExclusive, 2, 50)
	if err != nil {
		t.Fatal(err)
	}
	if d.Caught != 0 || !d.Missed() {
		t.Errorf("reference: %+v", d)
	}
	if _, ok := d.MedianPlans(); ok {
		t.Errorf("a median of no catch")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := prover.Detect(ctx, toyFamily{}, toyExclusive, 2, 50); err != prover.ErrInterrupted {
		t.Errorf("cancelled: %v", err)
	}
}
