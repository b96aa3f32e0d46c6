package amqpcheck

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
)

// The strict model checks a whole semaphore at once, so that even an
// acquire running among others may fail full only if, at one instant, every
// slot 1..C was held and A[C+1] missing, and a count must be exact at one
// instant. The spec's scan is not atomic, so a correct implementation can
// fail it under concurrency: it is for research, to see how often.

// strictCall is one operation on the whole semaphore.
type strictCall struct {
	o       *op
	slot    int // the slot a client operation names
	kind    slotKind
	effects []slotEffect // an admin operation's
	full    bool         // acquire failed full
	plain   bool         // acquire failed unavailable: full or absent
	count   int          // count ok: the slots it saw, or -1
	lost    *slotOp
}

// strictState packs every slot's slotState into a string: comparable and
// hashable.
type strictState string

const slotBytes = 1 + 4 + 8

func (s strictState) get(i int) slotState {
	b := s[i*slotBytes:]
	return slotState{exists: tri(b[0] & 0xf), relinquished: b[0]&0x10 != 0,
		holder: int(binary.LittleEndian.Uint32([]byte(b[1:5]))), since: int64(binary.LittleEndian.Uint64([]byte(b[5:13])))}
}

func (s strictState) with(i int, st slotState) strictState {
	b := []byte(s)
	b[i*slotBytes] = byte(st.exists)
	if st.relinquished {
		b[i*slotBytes] |= 0x10
	}
	binary.LittleEndian.PutUint32(b[i*slotBytes+1:], uint32(st.holder))
	binary.LittleEndian.PutUint64(b[i*slotBytes+5:], uint64(st.since))
	return strictState(b)
}

func (s strictState) slots() int { return len(s) / slotBytes }

// contiguous is the number of slots as a count sees it: the A queues 1..C
// that exist before the first missing one; unknown ones count as existing
// only if the caller allows.
func stepStrict(s strictState, c *strictCall) (bool, strictState) {
	switch {
	case c.lost != nil:
		for i := 0; i < s.slots(); i++ {
			_, st := stepSlot(s.get(i), c.lost, c.o.call)
			s = s.with(i, st)
		}
		return true, s
	case c.effects != nil:
		for _, e := range c.effects {
			_, st := stepSlot(s.get(e.slot-1), &slotOp{kind: e.kind}, c.o.call)
			s = s.with(e.slot-1, st)
		}
		return true, s
	case c.plain:
		// Full or absent: whichever the state allows; if both do, the
		// state stays as it was (what the acquire saw is then not known).
		okFull, full := stepStrict(s, &strictCall{o: c.o, full: true, count: -1})
		okAbsent, absent := stepStrict(s, &strictCall{o: c.o, slot: 1, kind: seeMissing, count: -1})
		switch {
		case okFull && okAbsent:
			return true, s
		case okFull:
			return true, full
		}
		return okAbsent, absent
	case c.full:
		// Slots 1..C exist and are held, slot C+1 is missing, C >= 1.
		for i := 0; i < s.slots(); i++ {
			st := s.get(i)
			if st.exists == no || (st.exists == unknownYet && i > 0 && st.holder == 0) {
				if i == 0 {
					return false, s
				}
				st.exists = no
				return true, s.with(i, st)
			}
			if st.holder == 0 {
				return false, s
			}
			st.exists = yes
			s = s.with(i, st)
		}
		return false, s
	case c.count >= 0:
		for i := 0; i < s.slots(); i++ {
			st := s.get(i)
			want := i < c.count
			if (want && st.exists == no) || (!want && st.exists == yes) {
				return false, s
			}
			if want {
				st.exists = yes
			} else {
				st.exists = no
			}
			s = s.with(i, st)
			if !want {
				return true, s
			}
		}
		return c.count == s.slots(), s
	}
	ok, st := stepSlot(s.get(c.slot-1), &slotOp{kind: c.kind, proc: c.o.who}, c.o.call)
	return ok, s.with(c.slot-1, st)
}

func strictModel(lh *lockHistory) porcupine.Model {
	n := lh.max + 1
	return porcupine.Model{
		Init: func() any {
			var s strictState = strictState(strings.Repeat("\x00", n*slotBytes))
			for i := 0; lh.fresh && i < n; i++ {
				s = s.with(i, slotState{exists: no})
			}
			return s
		},
		Step: func(s, in, _ any) (bool, any) { return stepStrict(s.(strictState), in.(*strictCall)) },
		Hash: func(s any) uint64 {
			h := uint64(14695981039346656037)
			for _, b := range []byte(s.(strictState)) {
				h = (h ^ uint64(b)) * 1099511628211
			}
			return h
		},
		DescribeOperation: func(in, _ any) string {
			c := in.(*strictCall)
			if c.lost != nil {
				return "lost " + lh.procs[c.lost.proc-1] + " after " + describeFault(c.lost.fault, lh.procs)
			}
			return describeOp(c.o)
		},
		DescribeState: func(s any) string {
			st := s.(strictState)
			var parts []string
			for i := 0; i < st.slots(); i++ {
				parts = append(parts, st.get(i).describe(lh.procs))
			}
			return strings.Join(parts, "; ")
		},
	}
}

// strictOps is every operation of a semaphore on the strict model; judged
// counts its failed acquires and counts.
func strictOps(lh *lockHistory) ([]porcupine.Operation, int) {
	var ops []porcupine.Operation
	judged := 0
	add := func(o *op, c *strictCall) {
		c.o = o
		ops = append(ops, porcupine.Operation{ClientId: o.client, Call: o.call, Return: o.ret, Input: c})
	}
	since := map[int]int64{}
	for _, o := range lh.ops {
		switch {
		case o.f == histories.Acquire && o.typ == histories.Ok:
			add(o, &strictCall{slot: *o.res.Slot, kind: take, count: -1})
			since[o.proc] = min(o.call, sinceOr(since, o.proc, o.call))
		case o.f == histories.Acquire && o.unknown():
			for s := 1; s <= lh.max; s++ {
				add(o, &strictCall{slot: s, kind: maybeTake, count: -1})
			}
			since[o.proc] = min(o.call, sinceOr(since, o.proc, o.call))
		case o.f == histories.Acquire && o.res.Reason == "full":
			add(o, &strictCall{full: true, count: -1})
			judged++
		case o.f == histories.Acquire && o.res.Reason == "unavailable":
			add(o, &strictCall{plain: true, count: -1})
			judged++
		case o.f == histories.Acquire && o.res.Reason == "absent":
			add(o, &strictCall{slot: 1, kind: seeMissing, count: -1})
			judged++
		case o.f == histories.Release && o.typ == histories.Ok && lossOf(lh, o, sinceOr(since, o.proc, o.call)) != nil:
			add(o, &strictCall{slot: *o.arg.Slot, kind: releaseLost, count: -1})
		case o.f == histories.Release && o.typ == histories.Ok:
			add(o, &strictCall{slot: *o.arg.Slot, kind: release, count: -1})
		case o.f == histories.Release && o.unknown():
			add(o, &strictCall{slot: *o.arg.Slot, kind: maybeRelease, count: -1})
		case o.f == histories.Verify && o.typ == histories.Ok && (*o.res.Held || !faultExcuses(lh, o, sinceOr(since, o.proc, o.call))):
			k := verifyLost
			if *o.res.Held {
				k = verifyHeld
			}
			add(o, &strictCall{slot: *o.arg.Slot, kind: k, count: -1})
		case o.f == histories.Count && o.typ == histories.Ok:
			add(o, &strictCall{count: *o.res.Slots})
			judged++
		case o.f == histories.Create || o.f == histories.Change || o.f == histories.Destroy:
			// An admin changes one A queue at a time: each of its effects
			// is an operation of its own over the admin operation's time.
			for _, e := range adminEffects(nil, lh, o) {
				ops = append(ops, porcupine.Operation{ClientId: -1, Call: o.call, Return: o.ret,
					Input: &strictCall{o: o, effects: []slotEffect{e}, count: -1}})
			}
		}
	}
	for _, proc := range slices.Sorted(maps.Keys(since)) { // not a map's order: see addLost
		t := since[proc]
		for _, f := range lh.faultsOf(proc) {
			if t < f.immune {
				ops = append(ops, porcupine.Operation{ClientId: -1, Call: f.call, Return: never,
					Input: &strictCall{o: &op{call: f.call}, count: -1, lost: &slotOp{kind: lost, proc: proc, immune: f.immune, fault: f}}})
			}
		}
	}
	numberLost(ops, maxClient(lh.ops))
	return ops, judged
}

func sinceOr(m map[int]int64, k int, d int64) int64 {
	if v, ok := m[k]; ok {
		return v
	}
	return d
}
