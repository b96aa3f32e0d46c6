// Package gctune sets the garbage collector's pace for the lockprover
// binary: a proof on the simulator keeps a small live heap (a few plans'
// worlds and the tallies, some 10 MB) while it allocates fast (a plan's
// world, history and verdicts, some 100 kB, thousands of times a second),
// so that at a fixed GOGC the collector runs many times a second for
// little garbage each time; an exhaustive search may keep gigabytes live
// (the states it has seen), where a large GOGC would multiply its peak.
//
// Start gives every cycle at least Headroom of new allocation before the
// next (GOGC raised to Headroom over the live heap), and never less than
// the floor GOGC it is given: a small heap gets room, a large one keeps
// the floor's proportion. It reads the live heap after each cycle, from a
// finalizer that each cycle runs and arms again.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Headroom is the least the heap may grow by between two collections.
const Headroom = 64 << 20

// most bounds the GOGC Start sets (a heap of a few bytes live).
const most = 10000

// Percent is the GOGC that leaves headroom over a live heap of live
// bytes, and never less than floor.
func Percent(live uint64, floor int) int {
	if live == 0 {
		return most
	}
	p := Headroom * 100 / live
	if p > most {
		p = most
	}
	return max(int(p), floor)
}

// Start sets GOGC to Percent(the heap now, floor) and, after each
// collection, to Percent(the live heap, floor). (Before the first
// collection no live heap is known: the heap's objects now, all of them
// live or not, stand for it.)
func Start(floor int) {
	now := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(now)
	p := floor
	if v := now[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > 0 {
		p = Percent(v.Uint64(), floor)
	}
	debug.SetGCPercent(p)
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.arm()
}

type tuner struct {
	floor  int
	sample []metrics.Sample
}

// A sentinel is garbage as soon as it is made: its finalizer runs after
// the next cycle. (Pointer-free objects of a few bytes may share a block
// with others and never be finalized: it holds a pointer.)
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) { s.t.cycle() })
}

// cycle runs after a collection: it sets GOGC from the live heap that
// collection left (again each time: a GOGC set meanwhile does not last),
// and arms the next. Setting it takes a lock, not a pause of the world.
func (t *tuner) cycle() {
	metrics.Read(t.sample)
	if v := t.sample[0].Value; v.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(Percent(v.Uint64(), t.floor))
	}
	t.arm()
}
