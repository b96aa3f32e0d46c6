package amqpcheck

import (
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
)

// mutexOps builds a true mutex's operations on the slot model, with the
// mutex always "existing": acquire takes it, release frees it, verify reads
// it, and faults may cost the holder its connection, unless keep is set
// (model.Options.Jepsen: Knossos's mutex model, in which no fault ends a hold).
// With exact set, a
// failed acquire also says the mutex was held by another client: a true
// mutex's acquire is one exclusive declare, so it is atomic and never fails
// spuriously.
//
// With keep and not exact, an operation of unknown outcome that is its
// client's last (as every one is in a Jepsen history: Jepsen retires a
// process whose operation crashed) is placed where it is most permissive,
// which spares the search the moment it took effect, exponential in their
// number: an acquire is left out (had it taken the mutex, its client, who
// does nothing more, would hold it for ever, which can only forbid what
// follows), and a release takes effect at its invoke (its client held the
// mutex then or not at all, and nothing its client does later needs the
// hold). With no fault ending holds, nothing else changes the holder in
// between, so whether the history has a linearization is unchanged.
func mutexOps(lh *lockHistory, exact, keep bool) ([]porcupine.Operation, int) {
	var ops []porcupine.Operation
	var calls slotCalls
	judged := 0
	last := map[int]*op{} // each incarnation's last operation
	for _, o := range lh.ops {
		last[o.who] = o
	}
	settle := keep && !exact
	add := func(o *op, k slotKind) {
		ret := o.ret
		if settle && k == maybeRelease && last[o.who] == o {
			ret = o.call
		}
		ops = append(ops, porcupine.Operation{ClientId: o.client, Call: o.call, Return: ret, Input: calls.new(slotOp{kind: k, proc: o.who, src: o}, o.call)})
	}
	// addLoss adds release o, ok after the fault f may have cost its
	// process the mutex: see releaseLost.
	addLoss := func(o *op, f *fault) {
		ops = append(ops, porcupine.Operation{ClientId: o.client, Call: o.call, Return: o.ret, Input: calls.new(slotOp{kind: releaseLost, proc: o.who, src: o, fault: f}, o.call)})
	}
	since := map[int]int64{}
	lastTake := map[int]int64{}
	for _, o := range lh.ops {
		if o.f == histories.Acquire && (o.typ == histories.Ok || o.unknown()) {
			lastTake[o.proc] = o.call
		}
		switch {
		case o.f == histories.Acquire && o.typ == histories.Ok:
			add(o, take)
		case o.f == histories.Acquire && o.unknown():
			if !settle || last[o.who] != o {
				add(o, maybeTake)
			}
		case o.f == histories.Acquire && exact && !o.patched():
			add(o, seeTaken)
			judged++
		case o.f == histories.Release && o.typ == histories.Ok && !keep && lossOf(lh, o, lastTake[o.proc]) != nil:
			addLoss(o, lossOf(lh, o, lastTake[o.proc]))
		case o.f == histories.Release && o.typ == histories.Ok:
			add(o, release)
		case o.f == histories.Release && o.unknown():
			add(o, maybeRelease)
		case o.f == histories.Verify && o.typ == histories.Ok && (*o.res.Held || !faultExcuses(lh, o, lastTake[o.proc])):
			k := verifyLost
			if *o.res.Held {
				k = verifyHeld
			}
			add(o, k)
		}
		if o.f == histories.Acquire && (o.typ == histories.Ok || o.unknown()) {
			if t, ok := since[o.proc]; !ok || o.call < t {
				since[o.proc] = o.call
			}
		}
	}
	if keep {
		since = nil
	}
	for _, proc := range slices.Sorted(maps.Keys(since)) { // not a map's order: see addLost
		t := since[proc]
		for _, f := range lh.faultsOf(proc) {
			if t < f.immune {
				ops = append(ops, porcupine.Operation{ClientId: -1, Call: f.call, Return: never,
					Input: calls.new(slotOp{kind: lost, proc: proc, immune: f.immune, fault: f}, f.call)})
			}
		}
	}
	numberLost(ops, maxClient(lh.ops))
	return ops, judged
}
