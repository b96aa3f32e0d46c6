package prover

import (
	"sort"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// An Interleaving is an order of two operations that a history shows: X
// by a process right after its own Y (Own), or X as the first operation of
// its process to begin after another process's Y ended. Only operations
// that succeeded count as Y. A defect that needs one process to act after
// another's change (an admin answering count from its own cache: "count
// after another's change") or a client's second scan ("acquire after own
// release") shows only on plans that reach that order.
type Interleaving struct {
	X, Y string // operations, as histories name them (acquire, count, ...)
	Own  bool
}

func (i Interleaving) String() string {
	if i.Own {
		return i.X + " after own " + i.Y
	}
	return i.X + " after another's " + i.Y
}

// Interleavings lists the orders of operations h shows (each once, in no
// fixed order). The nemesis and the run's final checks (processes whose
// names begin with "probe") are left out: they are not the plan's.
func Interleavings(h []histories.Event) []Interleaving {
	var kinds []string // operation names, by index
	kind := func(f string) int {
		for i, k := range kinds {
			if k == f {
				return i
			}
		}
		kinds = append(kinds, f)
		return len(kinds) - 1
	}
	type proc struct {
		last  int    // kind of its last operation that succeeded, or -1
		since uint64 // kinds of others' operations that succeeded since its last one ended
	}
	skip := func(name string) bool { return name == "nemesis" || strings.HasPrefix(name, "probe") }
	procs := map[string]*proc{}
	for _, e := range h {
		if !skip(e.Process) && procs[e.Process] == nil {
			procs[e.Process] = &proc{last: -1}
		}
	}
	seen := map[Interleaving]bool{}
	for _, e := range h {
		if skip(e.Process) || histories.IsNotice(&e) {
			continue
		}
		p := procs[e.Process]
		switch e.Type {
		case histories.Invoke:
			for k := range kinds {
				if p.since&(1<<k) != 0 {
					seen[Interleaving{X: e.F, Y: kinds[k]}] = true
				}
			}
			if p.last >= 0 {
				seen[Interleaving{X: e.F, Y: kinds[p.last], Own: true}] = true
			}
			p.since = 0
		case histories.Ok:
			k := kind(e.F)
			if k >= 64 {
				continue
			}
			p.last = k
			for name, q := range procs {
				if name != e.Process {
					q.since |= 1 << k
				}
			}
		default:
			p.last = -1
		}
	}
	out := make([]Interleaving, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	return out
}

// SortedInterleavings is counts' keys, most often reached first (then by
// name).
func SortedInterleavings(counts map[Interleaving]int) []Interleaving {
	out := make([]Interleaving, 0, len(counts))
	for i := range counts {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool {
		if counts[out[a]] != counts[out[b]] {
			return counts[out[a]] > counts[out[b]]
		}
		return out[a].String() < out[b].String()
	})
	return out
}
