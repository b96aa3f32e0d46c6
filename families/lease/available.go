package lease

import (
	"fmt"
	"github.com/lockprover/lockprover/histories"
	"sort"

	"github.com/lockprover/lockprover/model"
)

// available judges available as for amqp-locks: where no fault is in force
// every operation completes (ok or fail), and every kind of operation the
// history tries succeeds at least once. The definite answers (an acquire
// that found the lock full, a refresh or release that found the lease
// expired) count as successes; a plain fail does not.
func (h *history) available() model.Verdict {
	v := model.Verdict{Property: Available, Status: model.Pass}
	ok, fair := map[string]int{}, map[string]int{}
	var order []string
	for _, o := range h.ops {
		if _, seen := fair[o.f]; !seen {
			order = append(order, o.f)
			fair[o.f] = 0
		}
		v.Judged++
		switch {
		case o.ok() || o.reason() != "":
			ok[o.f]++
			fair[o.f]++
		case o.failed():
			fair[o.f]++
		case !h.excused(o):
			v.Status, v.Ops = model.Fail, []int{o.index}
			v.Detail = fmt.Sprintf("%s, and no fault was in force on %s: an operation must complete where nothing is broken", describeOp(o), o.proc)
			return v
		}
	}
	if d := model.NeverSucceeded(order, fair, ok); d != "" {
		v.Status, v.Detail = model.Fail, d
	}
	return v
}

// excused reports whether a fault explains o's unknown outcome: one aimed
// at o's process or at the backend (clock faults included), or a pause or
// partition of another process caught in the middle of an operation (it
// may hold the locks that operation took, which o may wait for in vain),
// began before the outcome was reported, and o's process had not
// completed an operation cleanly since the fault was over; or a dropped
// reply armed for o's process, o being the first outcome it did not hear
// since.
func (h *history) excused(o *op) bool {
	for _, f := range h.faults {
		if o.done >= 0 && f.index > o.done {
			continue
		}
		switch f.f {
		case histories.Resume, histories.Heal, histories.ClockReset:
			continue
		}
		if f.target != "" && f.target != o.proc && !h.caughtMidway(f) {
			continue
		}
		if f.f == "drop-reply" {
			if h.firstCut(o, f) {
				return true
			}
			continue
		}
		if !h.recovered(o, f.over) {
			return true
		}
	}
	return false
}

// caughtMidway reports whether f is a pause or a partition that struck its
// process while an operation of it was in flight.
func (h *history) caughtMidway(f *fault) bool {
	if f.f != histories.Pause && f.f != histories.Partition {
		return false
	}
	for _, p := range h.byProc[f.target] {
		if p.call < f.call && (p.unknown() || p.ret > f.call) {
			return true
		}
	}
	return false
}

// firstCut reports whether o is the first operation of its process, since
// the dropped reply f was armed, whose outcome the process did not hear.
func (h *history) firstCut(o *op, f *fault) bool {
	for _, p := range h.after(o.proc, f.call) {
		if p.call >= o.call {
			break
		}
		if p != o && p.call > f.call && p.unknown() {
			return false
		}
	}
	return true
}

// recovered reports whether o's process completed an operation (ok or
// fail) that began after t and ended before o began.
func (h *history) recovered(o *op, t int64) bool {
	if t == never {
		return false
	}
	for _, p := range h.after(o.proc, t) {
		if p.call >= o.call {
			break
		}
		if p.call > t && p.ret < o.call && !p.unknown() {
			return true
		}
	}
	return false
}

// after returns the operations of proc from the first invoked after t on,
// in invoke order.
func (h *history) after(proc string, t int64) []*op {
	ops := h.byProc[proc]
	return ops[sort.Search(len(ops), func(i int) bool { return ops[i].call > t }):]
}
