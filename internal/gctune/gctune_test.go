package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live  uint64
		floor int
		want  int
	}{
		{live: Headroom / 8, floor: 400, want: 800},    // a small heap gets Headroom
		{live: 1 << 30, floor: 400, want: 400},         // a large one keeps the floor
		{live: Headroom / 4, floor: 100, want: 400},    // Headroom is four such heaps
		{live: 0, floor: 400, want: most},              // nothing live: the bound
		{live: 1, floor: 400, want: most},              // a few bytes live: the bound
		{live: Headroom / 200, floor: 400, want: most}, // above the bound: the bound
	} {
		if got := Percent(c.live, c.floor); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// gogc reads the GOGC in force.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The tuner sets GOGC from the heap at Start, and after each collection
// from the live heap: this test's heap is a few megabytes, so well above
// the floor; it sets it again after the cycles that follow (the finalizer
// arms itself again), which undo a GOGC set meanwhile; and a live heap
// larger than Headroom brings it down to the floor.
func TestStartFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(gogc())
	Start(400)
	if p := gogc(); p <= 400 {
		t.Fatalf("GOGC %d right after Start(400) with a heap of a few megabytes, want more than the floor", p)
	}
	await := func(what string, done func(int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !done(gogc()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOGC still %d after 10 s of collections", what, gogc())
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	debug.SetGCPercent(400)
	await("a small heap", func(p int) bool { return p > 400 })
	big := make([]byte, 2*Headroom)
	await("a live heap of twice Headroom", func(p int) bool { return p == 400 })
	runtime.KeepAlive(big)
	big = nil
	await("the big heap gone", func(p int) bool { return p > 400 })
}
