// Package model holds the sequential specifications of the amqp-locks lock
// types and checks histories against them, property by property.
//
// A persistent semaphore's history is split per lock and per slot; each slot
// is checked for linearizability (with porcupine) against a model in which
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
package model

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
)

// The properties lockprover judges (README.md, Properties).
const (
	SlotExclusive = "slot-exclusive"
	AcquireExact  = "acquire-exact"
	CountExact    = "count-exact"
	Persistent    = "persistent"
	NoLeak        = "no-leak"
	Available     = "available"
	CheapAcquire  = "cheap-acquire"
	CheapVerify   = "cheap-verify"
	DriverMinimal = "driver-minimal"
)

// Status is a property's verdict.
type Status int

const (
	Pass Status = iota
	NotJudged
	Inconclusive
	Fail
)

func (s Status) String() string {
	return [...]string{"pass", "not judged", "inconclusive", "FAIL"}[s]
}

// Options tune Check.
type Options struct {
	// Strict judges acquire-exact on every acquire and count, not only on
	// quiescent ones, with a model of the whole semaphore: the spec's scan
	// is not atomic, so correct implementations may fail it.
	Strict bool
	// Timeout bounds each linearizability check; 0 means none. A check
	// that runs out of time is Inconclusive.
	Timeout time.Duration
	// Visualize keeps what Verdict.Visualize needs for every
	// linearizability check, not only the failed ones.
	Visualize bool
	// Evidence, if set, is what a run showed beyond its history (method
	// counts, queues left, the processes' failures), from which Check
	// judges the properties a history alone cannot show.
	Evidence *Evidence
	// Drift bounds how far the clocks that time leases may run fast or
	// slow, as a fraction of the time measured: a lease of ttl t granted at
	// g is certainly valid until g + t(1-Drift) and may be valid until
	// g + t(1+Drift). It is for families with expiring holds (lease); the
	// amqp-locks checks ignore it. 0 means DefaultDrift.
	Drift float64
	// Clocks says which clocks time leases, for the lease family: "" (any:
	// the backend's and every process's, so that a fault of either beyond
	// the drift bound may excuse what it explains) or ClocksBackend (only
	// the backend's, as the database semaphore judges expiry by the
	// database's clock: a fault of a process's clock excuses nothing).
	Clocks string
}

// ClocksBackend is Options.Clocks for designs whose leases are timed by the
// backend's clock alone.
const ClocksBackend = "backend"

// DefaultDrift is the drift bound when Options.Drift is 0: 1%, Redlock's
// clock drift factor, and wide enough for NTP-disciplined clocks over any
// ttl longer than a few milliseconds.
const DefaultDrift = 0.01

// DriftBound is o.Drift, or DefaultDrift when o.Drift is 0.
func (o Options) DriftBound() float64 {
	if o.Drift == 0 {
		return DefaultDrift
	}
	return o.Drift
}

// A Verdict is one property of one lock.
type Verdict struct {
	Lock, Property string
	Status         Status
	// Judged is how many operations or observations the verdict rests on.
	Judged int
	// Slot is the slot a failure concerns, or 0.
	Slot int
	// Ops are the history indexes of the operations a failure involves.
	Ops []int
	// Detail says what went wrong, in words a person can act on.
	Detail string

	viz *viz
}

type viz struct {
	model porcupine.Model
	info  porcupine.LinearizationInfo
}

func (v *Verdict) fail(o *op, detail string) {
	v.Status, v.Detail = Fail, detail
	v.Ops = append(v.Ops, o.index)
}

// Visualize writes porcupine's HTML view of the check behind v, with faults
// as annotations. It reports false if v has none (it was not a
// linearizability check, or Options.Visualize was off and v passed).
func (v *Verdict) Visualize(w io.Writer) (bool, error) {
	if v.viz == nil {
		return false, nil
	}
	return true, porcupine.Visualize(v.viz.model, v.viz.info, w)
}

// A Report is every verdict for every lock of a history, locks in the
// order they first appear and properties in a fixed order.
type Report struct {
	Verdicts []Verdict
}

// Status is the report's worst verdict: Fail, else Inconclusive, else Pass.
func (r *Report) Status() Status {
	s := Pass
	for _, v := range r.Verdicts {
		if v.Status > s && v.Status != NotJudged {
			s = v.Status
		}
	}
	return s
}

// Check checks a validated history (as histories.Read returns it). Locks
// of a kind a family registered (Register) are judged by that family.
func Check(h []histories.Event, o Options) *Report {
	core, fam, order := byFamily(h)
	locks, _ := split(core)
	r := &Report{}
	for _, name := range order {
		if fl := fam[name]; fl != nil {
			r.Verdicts = append(r.Verdicts, fl.check(fl.events, o)...)
			continue
		}
		lh := locks[0]
		locks = locks[1:]
		if lh.kind == histories.Mutex {
			r.Verdicts = append(r.Verdicts, checkMutex(lh, o)...)
		} else {
			r.Verdicts = append(r.Verdicts, checkSemaphore(lh, o)...)
		}
	}
	if o.Evidence != nil {
		r.Verdicts = judgeEvidence(r.Verdicts, h, o.Evidence)
	}
	return r
}

func notJudged(lh *lockHistory, props ...string) []Verdict {
	var vs []Verdict
	for _, p := range props {
		vs = append(vs, Verdict{Lock: lh.name, Property: p, Status: NotJudged,
			Detail: "a history cannot show it: prove judges it from the broker's queues and method counts"})
	}
	return vs
}

func checkSemaphore(lh *lockHistory, o Options) []Verdict {
	excl := Verdict{Lock: lh.name, Property: SlotExclusive}
	parts := slotPartitions(lh, nil)
	for _, ops := range parts {
		excl.Judged += len(ops)
	}
	linearize(&excl, lh, slotModelFor(lh), parts, o)

	exact := Verdict{Lock: lh.name, Property: AcquireExact}
	switch {
	case excl.Status != Pass:
		exact.Status, exact.Detail = NotJudged, "slot-exclusive does not hold, so the slots' states are not known"
	case o.Strict:
		ops, judged := strictOps(lh)
		exact.Judged = judged
		linearize(&exact, lh, strictModel(lh), map[int][]porcupine.Operation{0: ops}, o)
		if exact.Status == Fail {
			exact.Detail = "(strict model) " + exact.Detail
		}
	default:
		obs, judged, contended := quiescentAcquires(lh)
		exact.Judged = judged
		if len(contended) > 0 {
			c := contended[0]
			exact.fail(c, fmt.Sprintf("%s while it ran alone: no other client was acquiring, so it cannot have lost a race", describeOp(c)))
			break
		}
		linearize(&exact, lh, slotModelFor(lh), slotPartitions(lh, obs), o)
	}

	count := Verdict{Lock: lh.name, Property: CountExact}
	persistent := Verdict{Lock: lh.name, Property: Persistent}
	ops, judged := countOps(lh, false)
	count.Judged, persistent.Judged = judged, judged
	linearize(&count, lh, countModel, map[int][]porcupine.Operation{0: ops}, o)
	if count.Status == Fail {
		// Would slots vanishing by themselves explain it?
		relaxed, _ := countOps(lh, true)
		weak := Verdict{}
		linearize(&weak, lh, countModel, map[int][]porcupine.Operation{0: relaxed}, o)
		if weak.Status == Pass {
			persistent, count = count, Verdict{Lock: lh.name, Property: CountExact, Status: Pass, Judged: judged}
			persistent.Property = Persistent
			persistent.Detail = "slots vanished without an admin removing them: " + persistent.Detail
		}
	}
	vs := []Verdict{excl, exact, count, persistent, available(lh)}
	return append(vs, notJudged(lh, NoLeak, CheapAcquire, CheapVerify, DriverMinimal)...)
}

func checkMutex(lh *lockHistory, o Options) []Verdict {
	excl := Verdict{Lock: lh.name, Property: SlotExclusive}
	ops, _ := mutexOps(lh, false)
	excl.Judged = len(ops)
	linearize(&excl, lh, mutexModel(lh), map[int][]porcupine.Operation{0: ops}, o)
	exact := Verdict{Lock: lh.name, Property: AcquireExact}
	if excl.Status != Pass {
		exact.Status, exact.Detail = NotJudged, "slot-exclusive does not hold, so the holder is not known"
	} else {
		ops, judged := mutexOps(lh, true)
		exact.Judged = judged
		linearize(&exact, lh, mutexModel(lh), map[int][]porcupine.Operation{0: ops}, o)
	}
	vs := []Verdict{excl, exact, available(lh)}
	return append(vs, notJudged(lh, NoLeak, CheapAcquire, CheapVerify, DriverMinimal)...)
}

// linearize checks the partitions (keyed by slot) against m and fills v.
func linearize(v *Verdict, lh *lockHistory, m porcupine.Model, parts map[int][]porcupine.Operation, o Options) {
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
		v.Status = Pass // what porcupine would say: the order found is a linearization
		return
	}
	m.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return list }
	var res porcupine.CheckResult
	if o.Visualize {
		var info porcupine.LinearizationInfo
		res, info = porcupine.CheckOperationsVerbose(m, nil, o.Timeout)
		v.viz = &viz{m, info}
		annotate(v.viz, lh)
	} else {
		res = porcupine.CheckOperationsTimeout(m, nil, o.Timeout)
	}
	switch res {
	case porcupine.Ok:
		v.Status = Pass
		return
	case porcupine.Unknown:
		v.Status, v.Detail = Inconclusive, fmt.Sprintf("the linearizability check ran out of time (%v); nothing is known", o.Timeout)
		return
	}
	v.Status = Fail
	if v.viz == nil {
		_, info := porcupine.CheckOperationsVerbose(m, nil, 0)
		v.viz = &viz{m, info}
		annotate(v.viz, lh)
	}
	for i, k := range keys {
		if len(v.viz.info.PartialLinearizations()) <= i {
			break
		}
		if d, slot, idx, ok := explain(lh, m, list[i], v.viz.info.PartialLinearizations()[i], k); ok {
			v.Detail, v.Slot, v.Ops = d, slot, idx
			return
		}
	}
	v.Detail = "no order of the operations is consistent with the model"
}

// annotate marks the faults on the visualization's timeline.
func annotate(z *viz, lh *lockHistory) {
	var as []porcupine.Annotation
	for _, f := range lh.faults {
		end := f.end
		if end == never {
			end = f.call
		}
		as = append(as, porcupine.Annotation{Tag: "nemesis", Start: f.call, End: end,
			Description: describeFault(f, lh.procs), BackgroundColor: "#f4cccc"})
	}
	z.info.AddAnnotations(as)
}
