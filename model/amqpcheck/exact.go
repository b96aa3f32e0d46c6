package amqpcheck

import (
	"sort"

	"github.com/lockprover/lockprover/histories"
)

// slotObs is what a quiescent acquire that failed saw of one slot.
type slotObs struct {
	slot int
	kind slotKind // seeHeld or seeMissing
}

// quiescentAcquires finds the acquires that ran alone: no other operation
// on the lock and no fault in flight while they did. Such an acquire must
// be exact: full only if every slot 1..C was held (and A[C+1] missing),
// absent only if A[1] was missing, never contended; unavailable (the spec's
// plain "lock-acquire failure", full or absent) only if no slot 1..C was
// free: each was held or missing. That is the disjunction of full and
// absent wherever the slots are contiguous, which they are while C is
// known: C is known only while admins ran one at a time and completed, and
// a completed create, change or destroy leaves exactly 1..C. It returns the slot
// observations of those that failed, how many were judged, and the
// contended ones, which need no model to condemn.
func quiescentAcquires(lh *lockHistory) (map[*op][]slotObs, int, []*op) {
	obs := map[*op][]slotObs{}
	var contended []*op
	judged := 0
	pending := false // an acquire or release of unknown outcome may still land
	var admin adminTrack
	maxRet := int64(-1) // the latest return among the operations before
	busy := faultWindows(lh)
	for i, q := range lh.ops {
		isAlone := maxRet < q.call && (i+1 == len(lh.ops) || lh.ops[i+1].call > q.ret) && !busy.meets(q.call, q.ret)
		maxRet = max(maxRet, q.ret)
		admin.see(q)
		if q.f == histories.Acquire && !q.unknown() && isAlone {
			judged++
			if q.typ == histories.Fail {
				switch q.res.Reason {
				case "absent":
					obs[q] = []slotObs{{1, seeMissing}}
				case "full":
					if !admin.known || admin.c == 0 {
						obs[q] = []slotObs{{1, seeHeld}}
						break
					}
					for s := 1; s <= admin.c; s++ {
						obs[q] = append(obs[q], slotObs{s, seeHeld})
					}
					obs[q] = append(obs[q], slotObs{admin.c + 1, seeMissing})
				case "unavailable":
					c := 1
					if admin.known {
						c = max(1, admin.c)
					}
					for s := 1; s <= c; s++ {
						obs[q] = append(obs[q], slotObs{s, seeUnavailable})
					}
				case "contended":
					if !pending {
						contended = append(contended, q)
					}
				}
			}
		}
		if (q.f == histories.Acquire || q.f == histories.Release) && q.unknown() {
			pending = true
		}
	}
	return obs, judged, contended
}

// adminTrack follows the number of slots along the admin operations, as
// long as they settle it: they ran one at a time, completed, and the last
// one's result says how many slots there are. An operation of unknown
// outcome, or two that overlap, unsettle it for good.
type adminTrack struct {
	known, lost bool
	c           int
	lastRet     int64
}

func (a *adminTrack) see(o *op) {
	switch o.f {
	case histories.Create, histories.Change, histories.Destroy, histories.Count:
	default:
		return
	}
	if a.lost || o.typ == histories.Fail {
		return
	}
	if o.unknown() || a.lastRet >= o.call {
		a.lost, a.known = true, false
		return
	}
	a.lastRet = o.ret
	switch o.f {
	case histories.Create:
		// The semaphore did not exist and now has exactly these slots.
		a.c, a.known = *o.arg.Slots, true
	case histories.Change:
		a.c, a.known = *o.res.To, true
	case histories.Destroy:
		a.c, a.known = 0, true
	case histories.Count:
		if !a.known {
			a.c, a.known = *o.res.Slots, true
		}
	}
}

// windows are time intervals, sorted by start.
type windows struct {
	start, end []int64 // end is the running maximum of the ends so far
}

// faultWindows are the intervals in which a fault was in flight (from its
// invoke to its info).
func faultWindows(lh *lockHistory) windows {
	fs := append([]*fault(nil), lh.faults...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].call < fs[j].call })
	var w windows
	end := int64(-1)
	for _, f := range fs {
		end = max(end, f.end)
		w.start = append(w.start, f.call)
		w.end = append(w.end, end)
	}
	return w
}

// meets reports whether some window intersects [a, b].
func (w windows) meets(a, b int64) bool {
	// The windows starting at or before b; the latest end among them.
	i := sort.Search(len(w.start), func(i int) bool { return w.start[i] > b })
	return i > 0 && w.end[i-1] >= a
}
