// Package amqpcheck is the amqp-locks family's checker: the sequential
// specifications of its lock types, against which it judges histories
// property by property. It registers itself with model for the kinds
// semaphore and mutex, so that model.Check hands it their locks; adapters/runners/amqprun
// records the Evidence it judges the efficiency properties and no-leak by.
//
// A persistent semaphore's history is split per slot; each slot is
// checked for linearizability (with porcupine) against a model in which
// the slot's A queue exists or not and one client at most holds it. Faults
// and operations of unknown outcome become operations that may take effect
// at any time after they began. (A short search for a linearization comes
// first, witness.go: an order it finds settles the check as porcupine
// would, and porcupine decides whatever it cannot order.) The number of
// slots is checked as a register that only admins write; acquires that ran
// alone are checked for exactness against the slots they saw; a true mutex
// is one slot that always exists.
//
// A verdict never says more than the history shows: a check that runs out
// of time is Inconclusive, never Pass, and a property a history cannot show
// (no-leak and the efficiency properties need the broker's queues or method
// counts) is NotJudged.
package amqpcheck

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// The properties of amqp-locks (README.md, Properties), in report order;
// those other families judge too are model's.
const (
	SlotExclusive = model.SlotExclusive
	AcquireExact  = model.AcquireExact
	CountExact    = "count-exact"
	Persistent    = "persistent"
	NoLeak        = "no-leak"
	Available     = model.Available
	CheapAcquire  = "cheap-acquire"
	CheapVerify   = "cheap-verify"
	DriverMinimal = "driver-minimal"
)

// Options are the amqp-locks checker's own options, handed to model.Check
// in model.Options.Family.
type Options struct {
	// Strict judges acquire-exact on every acquire and count, not only on
	// quiescent ones, with a model of the whole semaphore: the spec's scan
	// is not atomic, so correct implementations may fail it.
	Strict bool
}

func init() {
	model.Register(histories.Semaphore, Check)
	model.Register(histories.Mutex, Check)
}

// Check judges one semaphore or mutex: its events and the history's
// nemesis events, as model.Check hands them to a registered family, with
// the evidence o carries about it.
func Check(events []histories.Event, o model.Options) []verdict.Verdict {
	locks, _ := split(events)
	var vs []verdict.Verdict
	for _, lh := range locks {
		if lh.kind == histories.Mutex {
			vs = append(vs, checkMutex(lh, o)...)
		} else {
			vs = append(vs, checkSemaphore(lh, o, model.FamilyOptions[Options](o).Strict)...)
		}
		if e := o.Evidence; e != nil && e.Lock == lh.name {
			ev, _ := e.Family.(*Evidence)
			if ev == nil {
				ev = &Evidence{}
			}
			judgeEvidence(vs, events, lh.name, ev)
		}
	}
	return vs
}

// fail fails v on the operation o.
func fail(v *verdict.Verdict, o *op, detail string) {
	v.Status, v.Detail = verdict.Fail, detail
	v.Ops = append(v.Ops, o.index)
}

func notJudged(lh *lockHistory, props ...string) []verdict.Verdict {
	var vs []verdict.Verdict
	for _, p := range props {
		vs = append(vs, verdict.Verdict{Lock: lh.name, Property: p, Status: verdict.NotJudged,
			Detail: "a history cannot show it: prove judges it from the broker's queues and method counts"})
	}
	return vs
}

func checkSemaphore(lh *lockHistory, o model.Options, strict bool) []verdict.Verdict {
	excl := verdict.Verdict{Lock: lh.name, Property: SlotExclusive}
	parts := slotPartitions(lh, nil)
	for _, ops := range parts {
		excl.Judged += len(ops)
	}
	linearize(&excl, lh, slotModelFor(lh), parts, o)
	ordered := excl.Status == verdict.Pass // an order of the slots' operations was found, before any excuse
	reliance(&excl, lh, slotModelFor(lh), parts, o)
	verifyExcuses(&excl, lh)

	exact := verdict.Verdict{Lock: lh.name, Property: AcquireExact}
	switch {
	case excl.Status != verdict.Pass:
		exact.Status, exact.Detail = verdict.NotJudged, "slot-exclusive does not hold, so the slots' states are not known"
	case strict:
		ops, judged := strictOps(lh)
		exact.Judged = judged
		linearize(&exact, lh, strictModel(lh), map[int][]porcupine.Operation{0: ops}, o)
		if exact.Status == verdict.Fail {
			exact.Detail = "(strict model) " + exact.Detail
		}
	default:
		obs, judged, contended := quiescentAcquires(lh)
		exact.Judged = judged
		if len(contended) > 0 {
			c := contended[0]
			fail(&exact, c, fmt.Sprintf("%s while it ran alone: no other client was acquiring, so it cannot have lost a race", describeOp(c)))
			break
		}
		if len(obs) == 0 && ordered && !o.Visualize {
			// No quiescent acquire failed, so acquire-exact's operations
			// are slot-exclusive's, on the same model, and an order of
			// them was found above: linearize would find it again.
			exact.Status = verdict.Pass
			break
		}
		linearize(&exact, lh, slotModelFor(lh), slotPartitions(lh, obs), o)
	}

	count := verdict.Verdict{Lock: lh.name, Property: CountExact}
	persistent := verdict.Verdict{Lock: lh.name, Property: Persistent}
	ops, judged := countOps(lh, false)
	count.Judged, persistent.Judged = judged, judged
	linearize(&count, lh, countModel, map[int][]porcupine.Operation{0: ops}, o)
	if count.Status == verdict.Fail {
		// Would slots vanishing by themselves explain it?
		relaxed, _ := countOps(lh, true)
		weak := verdict.Verdict{}
		linearize(&weak, lh, countModel, map[int][]porcupine.Operation{0: relaxed}, o)
		if weak.Status == verdict.Pass {
			persistent, count = count, verdict.Verdict{Lock: lh.name, Property: CountExact, Status: verdict.Pass, Judged: judged}
			persistent.Property = Persistent
			persistent.Detail = "slots vanished without an admin removing them: " + persistent.Detail
		}
	}
	vs := []verdict.Verdict{excl, exact, count, persistent, available(lh, o)}
	return append(vs, notJudged(lh, NoLeak, CheapAcquire, CheapVerify, DriverMinimal)...)
}

func checkMutex(lh *lockHistory, o model.Options) []verdict.Verdict {
	lh.keepHolds = o.Jepsen
	excl := verdict.Verdict{Lock: lh.name, Property: SlotExclusive}
	ops, _ := mutexOps(lh, false, o.Jepsen)
	excl.Judged = len(ops)
	linearize(&excl, lh, mutexModel(lh), map[int][]porcupine.Operation{0: ops}, o)
	reliance(&excl, lh, mutexModel(lh), map[int][]porcupine.Operation{0: ops}, o)
	verifyExcuses(&excl, lh)
	exact := verdict.Verdict{Lock: lh.name, Property: AcquireExact}
	if excl.Status != verdict.Pass {
		exact.Status, exact.Detail = verdict.NotJudged, "slot-exclusive does not hold, so the holder is not known"
	} else {
		ops, judged := mutexOps(lh, true, o.Jepsen)
		exact.Judged = judged
		if judged > 0 { // else not judged (Check says so), and no search to run
			linearize(&exact, lh, mutexModel(lh), map[int][]porcupine.Operation{0: ops}, o)
		}
	}
	vs := []verdict.Verdict{excl, exact, available(lh, o)}
	return append(vs, notJudged(lh, NoLeak, CheapAcquire, CheapVerify, DriverMinimal)...)
}

// linearize checks the partitions (keyed by slot) against m and fills v.
func linearize(v *verdict.Verdict, lh *lockHistory, m porcupine.Model, parts map[int][]porcupine.Operation, o model.Options) {
	keys := make([]int, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	list := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		list[i] = parts[k]
	}
	var deadline time.Time
	if o.Timeout > 0 {
		deadline = time.Now().Add(o.Timeout)
	}
	if !o.Visualize && witnessed(m, list, deadline) {
		v.Status = verdict.Pass // what porcupine would say: the order found is a linearization
		return
	}
	// porcupine gets what is left of the one deadline, so that o.Timeout
	// bounds the whole search. A budget already spent is Inconclusive
	// here: porcupine, given a timeout shorter than its check, races its
	// timer against the check's result and may answer either way (a
	// select between two ready channels), which made a 1ns budget decide
	// now and then on a loaded machine.
	left := o.Timeout
	if !deadline.IsZero() {
		if left = time.Until(deadline); left <= 0 {
			v.Status, v.Detail = verdict.Inconclusive, fmt.Sprintf("the linearizability check ran out of time (%v); nothing is known", o.Timeout)
			return
		}
	}
	m.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return list }
	var res porcupine.CheckResult
	var info porcupine.LinearizationInfo
	if o.Visualize {
		res, info = porcupine.CheckOperationsVerbose(m, nil, left)
		view(v, m, info, lh)
	} else {
		res = porcupine.CheckOperationsTimeout(m, nil, left)
	}
	switch res {
	case porcupine.Ok:
		v.Status = verdict.Pass
		return
	case porcupine.Unknown:
		v.Status, v.Detail = verdict.Inconclusive, fmt.Sprintf("the linearizability check ran out of time (%v); nothing is known", o.Timeout)
		return
	}
	v.Status = verdict.Fail
	if v.View == nil {
		_, info = porcupine.CheckOperationsVerbose(m, nil, 0)
		view(v, m, info, lh)
	}
	for i, k := range keys {
		if len(info.PartialLinearizations()) <= i {
			break
		}
		if d, slot, idx, ok := explain(lh, m, list[i], info.PartialLinearizations()[i], k); ok {
			v.Detail, v.Slot, v.Ops = d, slot, idx
			return
		}
	}
	v.Detail = "no order of the operations is consistent with the model"
}

// view makes porcupine's view of the check behind v, with the faults
// marked on its timeline, v's View.
func view(v *verdict.Verdict, m porcupine.Model, info porcupine.LinearizationInfo, lh *lockHistory) {
	var as []porcupine.Annotation
	for _, f := range lh.faults {
		end := f.end
		if end == never {
			end = f.call
		}
		as = append(as, porcupine.Annotation{Tag: "nemesis", Start: f.call, End: end,
			Description: describeFault(f, lh.procs), BackgroundColor: "#f4cccc"})
	}
	info.AddAnnotations(as)
	v.View = func(w io.Writer) error { return porcupine.Visualize(m, info, w) }
}
