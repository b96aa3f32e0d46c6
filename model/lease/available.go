package lease

import (
	"fmt"
	"sort"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"

	"github.com/lockprover/lockprover/model"
)

// available judges available as for amqp-locks: where no fault is in force
// every operation completes (ok or fail), and every kind of operation the
// history tries succeeds at least once. The definite answers (an acquire
// that found the lock full, a refresh or release that found the lease
// expired) count as successes; a plain fail does not. Each unknown outcome
// a fault excuses is listed; with cutOff (model.Options.Jepsen: a history
// that records no clean end), an operation still in flight at the end is
// excused, and listed, too.
func (h *history) available(cutOff bool) verdict.Verdict {
	v := verdict.Verdict{Property: Available, Status: verdict.Pass}
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
		case o.done < 0 && cutOff:
			v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index}, Why: fmt.Sprintf("%s: still in flight when the history ends, which does not record a clean end (it may have been cut off there), so it makes no liveness claim", describeOp(o))})
		case h.lostDuring(o) != nil:
			n := h.lostDuring(o)
			v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index, n.index}, Why: fmt.Sprintf("%s: an unknown outcome, excused by %s's lost notice (#%d): a higher priority took the lease while it ran", describeOp(o), n.proc, n.index)})
		case ranOut(o) >= 0:
			v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index}, Why: fmt.Sprintf("%s: an unknown outcome, excused by its lease running out while it ran: certainly valid when it began, not certainly so from %s on, before its outcome came, so the servers it reached may have answered either side of the end", describeOp(o), ms(ranOut(o)))})
		default:
			f, why := h.excused(o)
			if f == nil {
				v.Status, v.Ops = verdict.Fail, []int{o.index}
				v.Detail = fmt.Sprintf("%s, and no fault was in force on %s: an operation must complete where nothing is broken", describeOp(o), o.proc)
				return v
			}
			if why != "" {
				why = ": " + why
			}
			if f.said != "" {
				why += " (" + f.said + ")" // a fault the run measured says what it measured
			}
			v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index, f.index}, Why: fmt.Sprintf("%s: an unknown outcome, excused by %s%s", describeOp(o), f.describe(), why)})
		}
	}
	if d := model.NeverSucceeded(order, fair, ok); d != "" {
		v.Status, v.Detail = verdict.Fail, d
	}
	return v
}

// excused returns the fault that explains o's unknown outcome, or nil: one aimed
// at o's process or at the backend (clock faults included), or a pause or
// partition of another process caught in the middle of an operation (it
// may hold the locks that operation took, which o may wait for in vain),
// or a fault on a holder of lower priority than o's (o may have waited
// for its acknowledgement in vain),
// began before the outcome was reported, and o's process had not
// completed an operation cleanly since the fault was over; or a dropped
// reply armed for o's process, o being the first outcome it did not hear
// since. Why says how a fault on another process bears on o, where it is
// a victim's or a thief's ("" otherwise: the fault names it).
func (h *history) excused(o *op) (f *fault, why string) {
	for _, f := range h.faults {
		if o.done >= 0 && f.index > o.done {
			continue
		}
		switch f.f {
		case histories.Resume, histories.Heal, histories.ClockReset:
			continue
		}
		if h.atClient(f) && f.target != o.proc {
			// Its victim's or thief's process recovering is no matter.
			if path := h.victimStruck(o, f); path != nil {
				return f, waitedFor(o, path)
			}
			if a := h.thiefStruck(o, f); a != nil {
				return f, fmt.Sprintf("%s's acquire (#%d), of higher priority than the lease %s names and of unknown outcome, may have taken that lease on some servers, and %s could send no lost notice", a.proc, a.index, o.f, a.proc)
			}
		}
		if h.atClient(f) && f.target != o.proc && !h.caughtMidway(f) {
			continue
		}
		if f.f == "drop-reply" {
			if h.firstCut(o, f) {
				return f, ""
			}
			continue
		}
		if !h.recovered(o, f.over) {
			return f, ""
		}
	}
	return nil, ""
}

// waitedFor says how o may have waited in vain for the victim at the end
// of path, through the thieves before it (victimStruck).
func waitedFor(o *op, path []*op) string {
	v := path[len(path)-1]
	if len(path) == 1 {
		return fmt.Sprintf("%s may have waited in vain for the acknowledgement of %s, whose acquire (#%d) was of lower priority", o.proc, v.proc, v.index)
	}
	s := fmt.Sprintf("%s may have waited in vain for %s's acquire (#%d), of lower priority", o.proc, path[0].proc, path[0].index)
	for _, b := range path[1 : len(path)-1] {
		s += fmt.Sprintf(", which waited for %s's acquire (#%d), lower still", b.proc, b.index)
	}
	return s + fmt.Sprintf(", which waited in vain for the acknowledgement of %s, whose acquire (#%d) was lower still", v.proc, v.index)
}

// victimStruck returns the acquires through which f struck o (nil if it
// did not): f struck (in force from before o ended) the
// process of an acquire of lower priority than o's (o an acquire) that
// may have held the lock, or a key, while o ran: a lease that may have
// been valid then (granted before o began, or after: o may meet it at any
// round of its own), an acquire of unknown outcome invoked before o ended,
// or a failed one that returned less than its ttl(1+r) before o began
// (its key, set on a minority, may live on, and its process answers for
// it). That was o's victim, maybe, whose acknowledgement o waited for in
// vain (a priority lease: docs/lease.md). A lease granted after o began
// and killed was not excused once (prove --kind priority-redlock --seed 2
// stopped at plan 1,154 on it: testdata/histories/170).
func (h *history) victimStruck(o *op, f *fault) []*op {
	p, ok := priorityOf(o)
	if o.f != Acquire || !ok {
		return nil
	}
	end := o.heard // an unknown outcome's too: a lease granted after it is no victim of o's
	for _, a := range h.byProc[f.target] {
		ap, ok := priorityOf(a)
		if a.f != Acquire || !ok || ap >= p || a.call >= end || f.call >= end || f.over < a.call {
			continue
		}
		if a.unknown() || a.ok() && a.lease != nil && a.lease.mayBeValid(o.call, end, 0) ||
			a.failed() && a.ret+h.stretch(a.ttl()) > o.call || h.heldWrite(f, a, o.call) {
			return []*op{a}
		}
	}
	// Or through a thief between them: an acquire of lower priority than
	// o's, in flight while o ran, that itself waited in vain for f's
	// victim, and acknowledged o only once its own wait was over (a
	// chain; the path returned starts with it). prove --kind
	// priority-redlock --seed 1 stopped at plan
	// 23,087 on it: c2 stole from c1, c1 was killed before it
	// acknowledged, and c3, stealing from c2, waited for c2 until c2's
	// wait for c1 ran out (testdata/histories/176). Priorities fall at
	// each step, so the recursion ends.
	for _, b := range h.ops {
		bp, ok := priorityOf(b)
		if b.f != Acquire || !ok || bp >= p || b.call >= end || b.heard <= o.call {
			continue
		}
		if path := h.victimStruck(b, f); path != nil {
			return append([]*op{b}, path...)
		}
	}
	return nil
}

// heldWrite reports whether f, a partition of a's process in force while
// a ran, may have held a write of a's that landed once it healed, setting
// a key that lives past at (its ttl(1+r) from the heal): a partition
// holds the bytes, it does not drop them. prove --kind priority-redlock
// --seed 3 stopped at plan 15,482 on it: c1's grant on one server came
// 500 ms late, long after its lease was over and released, and the next
// thief waited in vain for c1 (testdata/histories/174).
func (h *history) heldWrite(f *fault, a *op, at int64) bool {
	return f.f == histories.Partition && f.call <= a.heard && f.over != never && f.over+h.stretch(a.ttl()) > at
}

// thiefStruck returns the acquire through which f struck o (nil if it did
// not): f struck (in force from before o ended) the
// process of an acquire of unknown outcome and of higher priority than
// the lease o (a refresh or release) names, invoked before o ended, whose
// keys may have lived while o ran (until ttl(1+r) after its completion):
// a thief cut off midway, whose writes may have taken o's lease on some
// servers and who can send no lost notice. prove --kind priority-redlock
// --seed 3 stopped at plan 989 on it: a release that found its lease on 1
// server of 3, where a killed thief's writes had landed after its
// acquire (testdata/histories/172).
func (h *history) thiefStruck(o *op, f *fault) *op {
	if o.f == Acquire || o.lease == nil || o.lease.acq == nil || f.call >= o.heard {
		return nil
	}
	p, ok := priorityOf(o.lease.acq)
	if !ok {
		return nil
	}
	for _, a := range h.byProc[f.target] {
		ap, ok := priorityOf(a)
		if a.f != Acquire || !ok || ap <= p || !a.unknown() || a.call >= o.heard || f.over < a.call {
			continue
		}
		if a.heard == never || a.heard+h.stretch(a.ttl()) > o.call {
			return a
		}
	}
	return nil
}

// lostDuring returns the lost notice of the lease o, a refresh or release
// of unknown outcome, names, if the lease was lost (a thief took it)
// after o was invoked: which servers it reached first, the thief's or
// its own, decides what it did (a priority lease).
func (h *history) lostDuring(o *op) *notice {
	if o.f == Acquire || o.lease == nil {
		return nil
	}
	for _, n := range h.notices {
		if n.victim == o.lease && n.at >= o.call {
			return n
		}
	}
	return nil
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

// ranOut is when the lease o (a refresh or release of unknown outcome)
// names stopped being certainly valid by its ttl, if o began while it
// was and its unknown outcome came after; -1 otherwise (an operation
// that never completed is not excused so). A
// backend of several servers (Redlock's) reached partly before and partly
// after that end cannot tell whether the lease was still held, and says
// so: the soak of issue 55 saw a refresh begun 31 ms before its lease's
// end take 109 ms on a loaded machine, one server of three still holding
// the token. Nothing was broken but the time left.
func ranOut(o *op) int64 {
	if !o.unknown() || o.done < 0 || o.lease == nil || (o.f != Refresh && o.f != Release) {
		return -1
	}
	for _, s := range o.lease.certain {
		if s.byTTL && s.from <= o.call && o.call < s.to && s.to <= o.heard {
			return s.to
		}
	}
	return -1
}
