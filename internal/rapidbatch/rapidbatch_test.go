package rapidbatch

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func draws(t *testing.T, seed uint64, b, n int) []int {
	var got []int
	if Batch(seed, b, n, func(rt *rapid.T) { got = append(got, rapid.IntRange(0, 1<<30).Draw(rt, "x")) }) {
		t.Fatal("a property that cannot fail failed")
	}
	return got
}

// A batch runs n cases, even under -short, and the same seed and batch
// number draw the same cases.
func TestBatch(t *testing.T) {
	end, err := Begin(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	a, again, next := draws(t, 7, 0, 20), draws(t, 7, 0, 20), draws(t, 7, 1, 20)
	if len(a) != 20 {
		t.Fatalf("ran %d cases, want 20", len(a))
	}
	if !slices.Equal(a, again) {
		t.Errorf("same seed and batch, different draws:\n%v\n%v", a, again)
	}
	if slices.Equal(a, next) {
		t.Errorf("batches 0 and 1 drew the same cases: %v", a)
	}
	last := -1
	failed := Batch(7, 0, 100, func(rt *rapid.T) {
		if x := rapid.IntRange(0, 1000).Draw(rt, "x"); x >= 10 {
			last = x
			rt.Fatalf("%d", x)
		}
	})
	if !failed || last != 10 {
		t.Errorf("failed %v, last failing case %d: want a failure shrunk to 10", failed, last)
	}
}
