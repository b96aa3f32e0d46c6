package amqpcheck

import (
	"fmt"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// available: where no fault is in force, every operation completes (ok or
// a definite fail), and every kind of operation the history tries succeeds
// at least once: an implementation that errors on everything proves nothing.
// An answer the spec allows counts as a success: an acquire that found the
// semaphore full or absent (or a true mutex held), a create that found the
// semaphore there, an admin operation that found the administration mutex
// taken, a release of a slot not held. Each unknown outcome a fault
// excuses is listed; with o.Jepsen, an operation still in flight at the end
// of the history is excused too (the history may have been cut off there:
// it makes no liveness claim), and listed.
func available(lh *lockHistory, o model.Options) verdict.Verdict {
	v := verdict.Verdict{Lock: lh.name, Property: Available, Status: verdict.Pass}
	// For each kind of operation: its successes, and its attempts that no
	// fault cut short.
	ok, fair := map[string]int{}, map[string]int{}
	var order []string
	cutOff := o.Jepsen
	for _, o := range lh.ops {
		if _, seen := fair[o.f]; !seen {
			order = append(order, o.f)
			fair[o.f] = 0
		}
		v.Judged++
		switch {
		case o.patched():
			// The process saw an unknown outcome: a fault must explain it.
			f := excused(lh, o)
			if f == nil {
				fail(&v, o, fmt.Sprintf("%s, seen by %s as unknown, and no fault was in force on it: an operation must complete where nothing is broken", describeOp(o), o.name))
				return v
			}
			excuse(&v, o, f, lh)
		case o.typ == histories.Ok || answered(o):
			ok[o.f]++
			fair[o.f]++
		case !o.unknown():
			fair[o.f]++
		case o.done < 0 && cutOff:
			v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index}, Why: fmt.Sprintf("%s: still in flight when the history ends, which does not record a clean end (it may have been cut off there), so it makes no liveness claim", describeOp(o))})
		default:
			f := excused(lh, o)
			if f == nil {
				fail(&v, o, fmt.Sprintf("%s, and no fault was in force on %s: an operation must complete where nothing is broken", describeOp(o), o.name))
				return v
			}
			excuse(&v, o, f, lh)
		}
	}
	if d := model.NeverSucceeded(order, fair, ok); d != "" {
		v.Status, v.Detail = verdict.Fail, d
	}
	return v
}

// excuse records that the fault f excuses o's unknown outcome.
func excuse(v *verdict.Verdict, o *op, f *fault, lh *lockHistory) {
	v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index, f.index}, Why: fmt.Sprintf("%s: an unknown outcome, excused by %s", describeOp(o), describeFault(f, lh.procs))})
}

// excused returns the fault that explains o's unknown outcome, or nil: one that
// could reach o's process (or the whole broker) began before o's process
// heard the outcome (an unknown outcome may still take effect later, but
// a fault struck after it was reported cannot have caused it), and
// the process had not yet completed an operation cleanly after the fault
// was over (a queue-deleted excuses a release later than that: see
// acquiredSince). A wait waits for another process's hold to end, and a hold a
// fault cut off may outlive the fault for ever (with heartbeats off, a
// killed holder's B queue stays), however well the waiter itself recovered:
// any fault on any process that began before the wait ended excuses it.
func excused(lh *lockHistory, o *op) *fault {
	for _, f := range lh.faults {
		if o.done >= 0 && f.index > o.done || !costsHolds(f) {
			continue
		}
		if o.f == histories.Wait {
			return f
		}
		if (f.target == 0 || f.target == o.proc) && !recovered(lh, o, over(lh, f)) {
			return f
		}
		if f.f == histories.DropReply && f.target == o.proc && firstCut(lh, o, f) {
			return f
		}
		if f.f == histories.QueueDeleted && f.target == o.proc && o.f == histories.Release && !acquiredSince(lh, o, f) {
			return f
		}
	}
	return nil
}

// acquiredSince reports whether o's process began an acquire after the
// fault f began and before o. The broker deleting a holder's queue by name
// (queue-deleted: RabbitMQ's exclusive-delete race) breaks nothing the
// process sees until it lets go: its connection lives, its verifies probe
// A[L] only, and its release then meets the queue of that name, which
// another may own by now (a 405). So the fault excuses an unknown release
// of the process however many operations it completed cleanly meanwhile,
// until it acquires anew (issue 55: c2's release answered unknown after
// c1 took the slot c2's deleted queue had freed).
func acquiredSince(lh *lockHistory, o *op, f *fault) bool {
	for _, p := range lh.ops {
		if p.proc == o.proc && p.f == histories.Acquire && p.call > f.call && p.call < o.call {
			return true
		}
	}
	return false
}

// firstCut reports whether o is the first operation of its process, since
// the dropped reply f was armed, whose outcome the process did not hear. A
// dropped reply fires at the process's next method, whenever that is:
// operations that completed cleanly in between may have sent nothing (a
// verify answered from what the client knows, say), so they do not show
// that the fault is over; the first outcome the process did not hear does.
func firstCut(lh *lockHistory, o *op, f *fault) bool {
	for _, p := range lh.ops {
		if p != o && p.proc == o.proc && p.call > f.call && p.call < o.call && (p.unknown() || p.patched()) {
			return false
		}
	}
	return true
}

// over is when a fault stops being in force: a pause or a partition when it
// is resumed or healed, any other fault once it is in place.
func over(lh *lockHistory, f *fault) int64 {
	if f.f == histories.Pause || f.f == histories.Partition {
		for _, g := range lh.faults {
			if g.index == f.healIdx {
				return g.end
			}
		}
		return never
	}
	return f.end
}

// recovered reports whether o's process completed an operation cleanly
// (ok or fail) that began after t and ended before o began.
func recovered(lh *lockHistory, o *op, t int64) bool {
	if t == never {
		return false
	}
	for _, p := range lh.ops {
		if p.proc == o.proc && p.call > t && p.ret < o.call && !p.unknown() && !p.patched() {
			return true
		}
	}
	return false
}

// answered reports whether o failed with an answer the spec allows.
func answered(o *op) bool {
	if o.typ != histories.Fail || o.res == nil {
		return false
	}
	switch o.f + " " + o.res.Reason {
	case "acquire full", "acquire absent", "acquire unavailable", "acquire held", "create exists", "release not held",
		"create contended", "change contended", "destroy contended", "count contended":
		return true
	}
	return false
}
