package amqpcheck

import (
	"fmt"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
)

// slotKind is what an operation does to one slot of a semaphore.
type slotKind uint8

const (
	take           slotKind = iota // acquire ok: the slot must exist and be free
	maybeTake                      // acquire of unknown outcome: takes the slot if free
	release                        // release ok: the client must hold the slot
	maybeRelease                   // release of unknown outcome
	verifyHeld                     // verify ok, held: the slot exists and the client holds it
	verifyLost                     // verify ok, not held
	create                         // an admin created the slot (A queue declared)
	remove                         // an admin deleted the slot (A queue deleted)
	lost                           // a fault cost the holder its connection
	seeHeld                        // a quiescent acquire failed full: the slot was held
	seeMissing                     // a quiescent acquire failed: the slot did not exist
	seeTaken                       // the mutex was held
	createFirst                    // a create that succeeded made slot 1: the semaphore did not exist before
	beyondCount                    // a create that succeeded left the slot above its count: it does not exist
	seeUnavailable                 // a quiescent acquire failed unavailable: the slot was missing or held
	releaseLost                    // release ok after a fault may have cost the hold: of the slot if still held, else of nothing
)

// slotOp is the input of a porcupine operation on one slot.
type slotOp struct {
	kind   slotKind
	proc   int   // the incarnation (who) acting, or for lost the process
	immune int64 // lost: holds taken by an acquire begun at or after this survive
	src    *op   // the history operation, nil for lost
	fault  *fault
}

type tri int8

const (
	unknownYet tri = iota // not yet observed: the history may begin with the slot in place or not
	yes
	no
)

// slotState is one slot: whether its A queue exists and who holds its B
// queue (an incarnation, 0 for no one) since when. A holder whose verify
// answered not held has relinquished the slot (the spec's
// "lock-relinquished"): it may hold nothing from then on, though its B
// queue may stay until it lets go (a client that keeps it until its
// release) or be gone already (a tidy client that deleted it on finding its
// slot gone). So another client may take the slot, and the holder may still
// release it, but no verify of the holder's may say held again.
type slotState struct {
	exists       tri
	relinquished bool
	holder       int
	since        int64
}

// free says whether the slot may be taken: no one holds it, or its holder
// relinquished it.
func (s slotState) free() bool { return s.holder == 0 || s.relinquished }

// stepSlot applies o to s; ok is false when the history cannot have done it.
func stepSlot(s slotState, o *slotOp, call int64) (bool, slotState) {
	switch o.kind {
	case create, remove, seeHeld, seeMissing, createFirst, beyondCount, seeUnavailable:
		return stepExistence(s, o)
	}
	return stepHold(s, o, call)
}

// stepHold applies o, an operation on who holds the slot, to s.
func stepHold(s slotState, o *slotOp, call int64) (bool, slotState) {
	switch o.kind {
	case take:
		if s.exists == no || !s.free() {
			return false, s
		}
		return true, slotState{exists: yes, holder: o.proc, since: call}
	case maybeTake:
		if s.exists != no && s.free() {
			return true, slotState{exists: yes, holder: o.proc, since: call}
		}
	case release:
		// A holder that relinquished the slot may still delete the B
		// queue it kept.
		if s.holder != o.proc {
			return false, s
		}
		s.holder, s.relinquished = 0, false
	case maybeRelease, releaseLost:
		// releaseLost: RabbitMQ answers a delete of a queue that is gone
		// with ok, so a release after its client lost the slot to a fault
		// lets go of nothing and answers ok all the same.
		if s.holder == o.proc {
			s.holder, s.relinquished = 0, false
		}
	case verifyHeld:
		if s.exists == no || s.holder != o.proc || s.relinquished {
			return false, s
		}
		s.exists = yes
	case verifyLost:
		// The hold ends here: the slot was gone (nothing else makes a
		// holder's verify say not held when no fault excuses it).
		if s.holder == o.proc && !s.relinquished {
			if s.exists == yes {
				return false, s
			}
			s.exists, s.relinquished = no, true
		}
	case lost:
		if procOf(s.holder) == o.proc && s.since < o.immune {
			s.holder, s.relinquished = 0, false
		}
	case seeTaken:
		// Held by anyone: even by the same process, on a connection it has
		// since replaced, which a history does not show.
		if s.holder == 0 {
			return false, s
		}
	}
	return true, s
}

// stepExistence applies o, an operation that sees or changes whether the
// slot exists, to s.
func stepExistence(s slotState, o *slotOp) (bool, slotState) {
	switch o.kind {
	case create:
		s.exists = yes
	case remove:
		s.exists = no
	case seeHeld:
		if s.exists == no || s.holder == 0 {
			return false, s
		}
		s.exists = yes
	case seeMissing:
		if s.exists == yes {
			return false, s
		}
		s.exists = no
	case createFirst:
		if s.exists == yes {
			return false, s
		}
		s.exists = yes
	case beyondCount:
		if s.exists == yes {
			return false, s
		}
		s.exists = no
	case seeUnavailable:
		if s.holder == 0 {
			if s.exists == yes {
				return false, s
			}
			s.exists = no
		}
	}
	return true, s
}

var slotModel = porcupine.Model{
	Init: func() any { return slotState{} },
	Step: func(state, input, _ any) (bool, any) {
		in := input.(*slotCall)
		s := state.(slotState)
		ok, next := stepSlot(s, in.op, in.call)
		if next == s {
			return ok, state // the same state, without boxing it again
		}
		return ok, next
	},
	Equal: func(a, b any) bool { return a.(slotState) == b.(slotState) },
	Hash: func(s any) uint64 {
		st := s.(slotState)
		h := uint64(st.exists) | uint64(st.holder)<<3 | uint64(st.since)<<20
		if st.relinquished {
			h |= 4
		}
		return h
	},
}

// slotCall pairs a slot operation with its invoke time (the hold's start).
type slotCall struct {
	op   *slotOp
	call int64
}

// slotPartitions builds the operations of every slot of a semaphore. With
// quiescent set, quiescent acquires that failed add what they observed
// (acquire-exact); otherwise those are left out (slot-exclusive).
func slotPartitions(lh *lockHistory, quiescent map[*op][]slotObs) map[int][]porcupine.Operation {
	parts := slotParts{m: map[int][]porcupine.Operation{}}
	held := slotHolds{}
	var effects []slotEffect
	lastTake := map[int]int64{} // process -> invoke of its latest acquire that may have taken a slot
	for _, o := range lh.ops {
		if o.f == histories.Acquire && (o.typ == histories.Ok || o.unknown()) {
			lastTake[o.proc] = o.call
		}
		switch o.f {
		case histories.Acquire:
			parts.addAcquire(lh, o, quiescent, held)
		case histories.Release:
			parts.addRelease(o, lossOf(lh, o, lastTake[o.proc]))
		case histories.Verify:
			if o.typ == histories.Ok && (*o.res.Held || !faultExcuses(lh, o, lastTake[o.proc])) {
				k := verifyLost
				if *o.res.Held {
					k = verifyHeld
				}
				parts.add(*o.arg.Slot, o, slotOp{kind: k, proc: o.who, src: o})
			}
		case histories.Create, histories.Change, histories.Destroy:
			effects = adminEffects(effects[:0], lh, o)
			for _, e := range effects {
				parts.add(e.slot, o, slotOp{kind: e.kind, proc: o.who, src: o})
			}
		}
	}
	parts.addLost(lh, held)
	for slot, ops := range parts.m {
		numberLost(ops, maxClient(lh.ops))
		parts.m[slot] = ops
	}
	return parts.m
}

// slotParts holds the operations of each slot of a semaphore, by slot, and
// makes their inputs.
type slotParts struct {
	m     map[int][]porcupine.Operation
	calls slotCalls
}

// slotHolds says since when each process may hold each slot: slot ->
// process -> earliest take call. It is a map of its own (not a field
// beside slotParts) so that it stays off the heap.
type slotHolds map[int]map[int]int64

// add adds so, the slot operation of o, to slot's operations.
func (parts *slotParts) add(slot int, o *op, so slotOp) {
	ops := parts.m[slot]
	if ops == nil {
		ops = make([]porcupine.Operation, 0, 8) // spares a slot's first few appends their growth
	}
	parts.m[slot] = append(ops, porcupine.Operation{
		ClientId: o.client, Call: o.call, Return: o.ret,
		Input: parts.calls.new(so, o.call),
	})
}

// note records that proc may hold slot from call on (the earliest wins).
func (held slotHolds) note(slot, proc int, call int64) {
	if held[slot] == nil {
		held[slot] = map[int]int64{}
	}
	if t, ok := held[slot][proc]; !ok || call < t {
		held[slot][proc] = call
	}
}

// addAcquire adds acquire o: a take of its slot if ok, a possible take of
// every slot if its outcome is unknown (each noted in held), and, with
// quiescent set, what a quiescent failed acquire observed.
func (parts *slotParts) addAcquire(lh *lockHistory, o *op, quiescent map[*op][]slotObs, held slotHolds) {
	switch {
	case o.typ == histories.Ok:
		s := *o.res.Slot
		parts.add(s, o, slotOp{kind: take, proc: o.who, src: o})
		held.note(s, o.proc, o.call)
	case o.unknown():
		for s := 1; s <= lh.max; s++ {
			parts.add(s, o, slotOp{kind: maybeTake, proc: o.who, src: o})
			held.note(s, o.proc, o.call)
		}
	case quiescent != nil:
		for _, ob := range quiescent[o] {
			parts.add(ob.slot, o, slotOp{kind: ob.kind, proc: o.who, src: o})
		}
	}
}

// addRelease adds release o, if it did not fail: a release of its slot, or
// a possible one if its outcome is unknown. loss, a fault that may have
// cost o's process the slot before o ended, makes an ok release one of the
// slot if it is still held, else of nothing (releaseLost).
func (parts *slotParts) addRelease(o *op, loss *fault) {
	switch {
	case o.typ == histories.Ok && loss != nil:
		parts.add(*o.arg.Slot, o, slotOp{kind: releaseLost, proc: o.who, src: o, fault: loss})
	case o.typ == histories.Ok:
		parts.add(*o.arg.Slot, o, slotOp{kind: release, proc: o.who, src: o})
	case o.unknown():
		parts.add(*o.arg.Slot, o, slotOp{kind: maybeRelease, proc: o.who, src: o})
	}
}

// addLost adds what faults may cost: a fault may cost each process
// whatever it held, so a lost operation, from the fault's start with no
// known end, in every slot held says the process may have held since
// before the fault's immunity.
func (parts *slotParts) addLost(lh *lockHistory, held slotHolds) {
	// In order of slot and process, not a map's: the lost operations'
	// order numbers them (numberLost) and orders porcupine's search, and
	// so what an explanation or an excuse names first.
	for _, slot := range slices.Sorted(maps.Keys(held)) {
		procs := held[slot]
		for _, proc := range slices.Sorted(maps.Keys(procs)) {
			since := procs[proc]
			for _, f := range lh.faultsOf(proc) {
				if since >= f.immune {
					continue
				}
				parts.m[slot] = append(parts.m[slot], porcupine.Operation{
					ClientId: -1, Call: f.call, Return: never,
					Input: parts.calls.new(slotOp{kind: lost, proc: proc, immune: f.immune, fault: f}, f.call),
				})
			}
		}
	}
}

// numberLost gives each lost operation a client id of its own.
func numberLost(ops []porcupine.Operation, next int) {
	for i := range ops {
		if ops[i].ClientId == -1 {
			ops[i].ClientId = next
			next++
		}
	}
}

type slotEffect struct {
	slot int
	kind slotKind
}

// adminEffects are what an admin operation does to each slot: an ok
// operation's from/to values say which slots it created or deleted; one of
// unknown outcome may have created or deleted any of the slots it could
// have touched (and, being of unknown outcome, at any time after its
// invoke). They are appended to es (a buffer its callers use again).
func adminEffects(es []slotEffect, lh *lockHistory, o *op) []slotEffect {
	span := func(lo, hi int, k slotKind) {
		for s := max(lo, 1); s <= hi; s++ {
			es = append(es, slotEffect{s, k})
		}
	}
	switch {
	case o.typ == histories.Ok && o.f == histories.Create:
		// The semaphore did not exist (or create would have failed
		// exists) and now has exactly the slots it asked for.
		es = append(es, slotEffect{1, createFirst})
		span(2, *o.arg.Slots, create)
		span(*o.arg.Slots+1, lh.max, beyondCount)
	case o.typ == histories.Ok && o.f == histories.Change:
		from, to := *o.res.From, *o.res.To
		span(from+1, to, create)
		span(to+1, from, remove)
	case o.typ == histories.Ok && o.f == histories.Destroy:
		span(1, *o.res.From, remove)
	case o.unknown() && o.f == histories.Create:
		span(1, *o.arg.Slots, create)
	case o.unknown() && o.f == histories.Change && *o.arg.Delta > 0:
		span(1, lh.max, create)
	case o.unknown():
		span(1, lh.max, remove)
	}
	return es
}

func (k slotKind) String() string {
	return [...]string{"take", "maybe-take", "release", "maybe-release", "verify-held", "verify-lost",
		"create", "delete", "lost", "see-held", "see-missing", "see-taken",
		"create-first", "beyond-count", "see-unavailable", "release-after-loss"}[k]
}

func (s slotState) describe(procs []string) string {
	e := map[tri]string{unknownYet: "not yet seen", yes: "exists", no: "missing"}[s.exists]
	switch {
	case s.holder == 0:
		return e + ", free"
	case s.relinquished:
		return fmt.Sprintf("%s, relinquished by %s (its verify said not held)", e, procs[procOf(s.holder)-1])
	}
	return fmt.Sprintf("%s, held by %s", e, procs[procOf(s.holder)-1])
}

// faultExcuses reports whether a fault on o's process may have cost it the
// hold taken at since before o ended. A client then rightly says it holds
// nothing, while the broker may still keep its B queue for a while (a few
// milliseconds after a closed socket, up to three heartbeats after silence):
// such an answer says nothing about the slot.
func faultExcuses(lh *lockHistory, o *op, since int64) bool {
	return lossOf(lh, o, since) != nil
}

// lossOf is the first fault on o's process that may have cost it the hold
// taken at since before o ended, or nil.
func lossOf(lh *lockHistory, o *op, since int64) *fault {
	for _, f := range lh.faultsOf(o.proc) {
		if f.call <= o.ret && since < f.immune {
			return f
		}
	}
	return nil
}
