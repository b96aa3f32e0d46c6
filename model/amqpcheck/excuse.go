package amqpcheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// maxExcusers bounds the excusing operations an excuse lists by name.
const maxExcusers = 5

// reliance finds whether v, a linearizability check that passed over parts,
// passed only because faults may have ended holds or releases of unknown
// outcome may have taken effect: if the same check without them fails, the
// pass rests on them, and v's excuse says what would otherwise have failed
// and which of them, on the processes that failure names, excuse it. Then,
// apart, whether it passed only because releases that answered ok after a
// fault may have cost their clients the hold were let go of nothing
// (releaseLost): without that excuse each is a release of a slot its client
// holds. Not with o.StatusOnly: it changes no status.
func reliance(v *verdict.Verdict, lh *lockHistory, m porcupine.Model, parts map[int][]porcupine.Operation, o model.Options) {
	if v.Status != verdict.Pass || o.StatusOnly {
		return
	}
	relyOn(v, lh, m, parts, o, false)
	relyOn(v, lh, m, parts, o, true)
}

// relyOn is reliance on one kind of excuse: with releases, the releases
// after a loss; otherwise the faults' losses and the releases of unknown
// outcome.
func relyOn(v *verdict.Verdict, lh *lockHistory, m porcupine.Model, parts map[int][]porcupine.Operation, o model.Options, releases bool) {
	strict, excusers := strictParts(parts, releases)
	if len(excusers) == 0 {
		return
	}
	o.Visualize = false
	without := verdict.Verdict{}
	linearize(&without, lh, m, strict, o)
	switch without.Status {
	case verdict.Inconclusive:
		v.Excuses = append(v.Excuses, untold(excusers, releases, o))
	case verdict.Fail:
		if e, ok := excusedBy(without, lh, excusers); ok {
			v.Excuses = append(v.Excuses, e)
		}
	}
}

// strictParts are parts as a strict reading takes them, with the
// operations whose outcome an excuse would rest on (the excusers): without
// the lost holds and releases of unknown outcome, or (releases) with every
// release that answered ok after a fault taken as a plain release.
func strictParts(parts map[int][]porcupine.Operation, releases bool) (map[int][]porcupine.Operation, []*slotOp) {
	strict := map[int][]porcupine.Operation{}
	var excusers []*slotOp
	// Slot by slot in order: the excuse names its excusers in the order
	// met, which must not vary from run to run as a map's order does.
	for _, k := range slices.Sorted(maps.Keys(parts)) {
		for _, p := range parts[k] {
			c, ok := p.Input.(*slotCall)
			switch {
			case ok && !releases && (c.op.kind == lost || c.op.kind == maybeRelease):
				excusers = append(excusers, c.op)
				continue
			case ok && releases && c.op.kind == releaseLost:
				excusers = append(excusers, c.op)
				strictOp := *c.op
				strictOp.kind = release
				p.Input = &slotCall{op: &strictOp, call: c.call}
			}
			strict[k] = append(strict[k], p)
		}
	}
	return strict, excusers
}

// untold is the excuse of a pass whose strict reading ran out of time:
// it may rest on the excusers, which could not be told.
func untold(excusers []*slotOp, releases bool, o model.Options) verdict.Excuse {
	what := "faults that may have ended holds or on releases of unknown outcome"
	if releases {
		what = "releases that answered ok after a fault may have cost the hold, taken as of nothing"
	}
	var ops []int
	for _, so := range excusers {
		i := so.fault.indexOr(so.src)
		if !slices.Contains(ops, i) {
			ops = append(ops, i)
		}
	}
	slices.Sort(ops)
	return verdict.Excuse{Ops: ops, Why: fmt.Sprintf("it may rest on %s (%d of them): whether it does could not be told in time (%v)", what, len(ops), o.Timeout)}
}

// excusedBy is the excuse of a pass whose strict reading failed: the
// excusers on the processes the failure names, each said once (at most
// maxExcusers of them); false when none is on those processes.
func excusedBy(without verdict.Verdict, lh *lockHistory, excusers []*slotOp) (verdict.Excuse, bool) {
	named := map[int]bool{} // the processes the failure names
	for _, i := range without.Ops {
		for _, op := range lh.ops {
			if op.index == i {
				named[op.proc] = true
			}
		}
	}
	var ops []int
	var whys []string
	seen := map[string]bool{}
	for _, so := range excusers {
		idx, why, ok := excuserWhy(so, named, lh)
		if !ok || seen[why] {
			continue
		}
		seen[why] = true
		if len(whys) < maxExcusers {
			whys = append(whys, why)
		}
		ops = append(ops, idx)
	}
	if len(whys) == 0 {
		return verdict.Excuse{}, false // what excused it is not on the processes named: nothing to single out
	}
	if more := len(ops) - len(whys); more > 0 {
		whys = append(whys, fmt.Sprintf("and %d more", more))
	}
	slices.Sort(ops)
	ops = slices.Compact(ops)
	return verdict.Excuse{Ops: append(slices.Clone(without.Ops), ops...),
		Why: fmt.Sprintf("%s: excused only because %s", clause(without.Detail), strings.Join(whys, ", or "))}, true
}

// excuserWhy is the event an excuser stands on and what it may have done,
// if it is on a process the failure names.
func excuserWhy(so *slotOp, named map[int]bool, lh *lockHistory) (int, string, bool) {
	switch {
	case so.kind == lost && named[so.proc]:
		return so.fault.index, fmt.Sprintf("%s may have ended %s's hold", describeFault(so.fault, lh.procs), lh.procs[so.proc-1]), true
	case so.kind == maybeRelease && named[so.src.proc]:
		return so.src.index, describeOp(so.src) + " may have taken effect", true
	case so.kind == releaseLost && named[so.src.proc]:
		return so.fault.index, fmt.Sprintf("%s may have let go of nothing: %s may have cost %s the hold before, and a delete of a queue that is gone answers ok",
			describeOp(so.src), describeFault(so.fault, lh.procs), so.src.name), true
	}
	return 0, "", false
}

// clause is an explanation's first clause, what was seen, less what it
// says ruled out the excuses (which, here, did not).
func clause(detail string) string {
	detail, _, _ = strings.Cut(detail, "; no release")
	detail, _, _ = strings.Cut(detail, " (as in Knossos")
	return strings.TrimSuffix(detail, ".")
}

// indexOr is the index of the fault f, or, with none, of the operation o.
func (f *fault) indexOr(o *op) int {
	if f != nil {
		return f.index
	}
	return o.index
}

// verifyExcuses lists, on v (slot-exclusive, passed), each verify that
// said not held and was left unjudged because a fault on its process may
// have cost it the hold (the broker may keep a B queue a while after its
// client is cut off): the pass does not rest on what it claimed.
func verifyExcuses(v *verdict.Verdict, lh *lockHistory) {
	if v.Status != verdict.Pass {
		return
	}
	lastTake := map[int]int64{} // as slotPartitions and mutexOps keep it
	for _, o := range lh.ops {
		if o.f == histories.Acquire && (o.typ == histories.Ok || o.unknown()) {
			lastTake[o.proc] = o.call
		}
		if o.f != histories.Verify || o.typ != histories.Ok || *o.res.Held {
			continue
		}
		for _, f := range lh.faultsOf(o.proc) {
			if f.call <= o.ret && lastTake[o.proc] < f.immune {
				v.Excuses = append(v.Excuses, verdict.Excuse{Ops: []int{o.index, f.index},
					Why: fmt.Sprintf("%s: left unjudged, since %s may have cost %s the hold, and the broker may keep its B queue a while after", describeOp(o), describeFault(f, lh.procs), o.name)})
				break
			}
		}
	}
}
