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
		{live: 8 << 20, floor: 400, want: 800},         // a small heap gets Headroom
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

// After a collection the tuner sets GOGC from the live heap: this test's
// heap is a few megabytes, so well above the floor; and it sets it again
// after the cycles that follow (the finalizer arms itself again), which
// undo a GOGC set meanwhile.
func TestStartFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(gogc())
	Start(400)
	if p := gogc(); p != 400 {
		t.Fatalf("GOGC %d right after Start(400), want the floor", p)
	}
	await := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gogc() <= 400 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOGC still %d after 10 s of collections", what, gogc())
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	await("the first cycle")
	debug.SetGCPercent(400)
	await("a later cycle")
}
