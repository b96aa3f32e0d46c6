package amqpcheck

import (
	"fmt"
	"slices"
	"sort"

	"github.com/lockprover/lockprover/histories"

	"github.com/anishathalye/porcupine"
)

func slotModelFor(lh *lockHistory) porcupine.Model {
	m := slotModel
	if lh.fresh {
		m.Init = func() any { return slotState{exists: no} }
	}
	m.DescribeOperation = func(in, _ any) string { return describeSlotCall(lh, in.(*slotCall)) }
	m.DescribeState = func(s any) string { return s.(slotState).describe(lh.procs) }
	return m
}

func mutexModel(lh *lockHistory) porcupine.Model {
	m := slotModelFor(lh)
	m.Init = func() any { return slotState{exists: yes} }
	return m
}

func describeSlotCall(lh *lockHistory, c *slotCall) string {
	if c.op.kind == lost {
		return fmt.Sprintf("%s may lose what it holds after %s", lh.procs[c.op.proc-1], describeFault(c.op.fault, lh.procs))
	}
	d := describeOp(c.op.src)
	switch c.op.kind {
	case seeHeld:
		return d + ": the slot was held"
	case seeMissing:
		return d + ": the slot was missing"
	case seeUnavailable:
		return d + ": the slot was missing or held"
	case createFirst:
		return d + ": the semaphore did not exist, so slot 1 was missing before it"
	case beyondCount:
		return d + ": above its count, so the slot does not exist"
	case create, remove:
		return d + ": " + c.op.kind.String()
	}
	return d
}

// explain finds why a partition has no linearization: it replays the
// longest consistent prefix porcupine found, then names the operation that
// cannot follow it (the earliest to complete among the rest) and why.
func explain(lh *lockHistory, m porcupine.Model, ops []porcupine.Operation, partials [][]int, slot int) (string, int, []int, bool) {
	var best []int // empty when not even one operation could go first
	if len(partials) > 0 {
		// The longest, and of as long ones the first in order of their
		// operations: porcupine hands them over in no fixed order (a map),
		// and the same history must be explained the same way every time.
		sort.Slice(partials, func(i, j int) bool {
			if len(partials[i]) != len(partials[j]) {
				return len(partials[i]) > len(partials[j])
			}
			return slices.Compare(partials[i], partials[j]) < 0
		})
		best = partials[0]
	}
	done := make([]bool, len(ops))
	for _, id := range best {
		done[id] = true
	}
	culprit := -1
	for i, o := range ops {
		if !done[i] && o.Return != never && (culprit < 0 || o.Return < ops[culprit].Return) {
			culprit = i
		}
	}
	if culprit < 0 {
		return "", 0, nil, false
	}
	switch ops[culprit].Input.(type) {
	case *slotCall:
		return explainSlot(lh, m, ops, best, culprit, slot)
	case *countCall:
		return explainCount(ops, best, culprit)
	}
	state := m.Init()
	for _, id := range best {
		_, state = m.Step(state, ops[id].Input, nil)
	}
	c := ops[culprit].Input.(*strictCall)
	return fmt.Sprintf("%s cannot happen when the semaphore is: %s", describeOp(c.o), m.DescribeState(state)), 0, []int{c.o.index}, true
}

// cause is the operation that last changed part of a slot's state.
type cause struct {
	text  string
	index int // -1 for none
}

func explainSlot(lh *lockHistory, m porcupine.Model, ops []porcupine.Operation, best []int, culprit, slot int) (string, int, []int, bool) {
	st := replaySlot(lh, m, ops, best)
	c := ops[culprit].Input.(*slotCall)
	o := c.op.src
	why, cited := st.why(lh, c, slot)
	idx := []int{o.index}
	for _, k := range cited {
		if k.index != o.index {
			idx = append(idx, k.index)
		}
	}
	if lh.kind != histories.Mutex {
		why = fmt.Sprintf("slot %d: %s", slot, why)
	}
	return why, slot, idx, true
}

// A slotStory is a slot's state after the longest linearizable prefix,
// and the operations that last made it exist (or not), held and
// relinquished.
type slotStory struct {
	state                       slotState
	existed, held, relinquished cause
}

// replaySlot steps the slot's model through best, the longest prefix.
func replaySlot(lh *lockHistory, m porcupine.Model, ops []porcupine.Operation, best []int) slotStory {
	st := slotStory{state: m.Init().(slotState)}
	for _, id := range best {
		c := ops[id].Input.(*slotCall)
		before := st.state
		_, st.state = stepSlot(st.state, c.op, c.call)
		if st.state.exists != before.exists || c.op.kind == create || c.op.kind == remove {
			st.existed = causeOf(lh, c)
		}
		if st.state.holder != before.holder {
			st.held = causeOf(lh, c)
		}
		if st.state.relinquished && !before.relinquished {
			st.relinquished = causeOf(lh, c)
		}
	}
	return st
}

// why says why c cannot follow the story, and the causes it cites.
func (st slotStory) why(lh *lockHistory, c *slotCall, slot int) (why string, cited []cause) {
	state, existed, held, relinquished := st.state, st.existed, st.held, st.relinquished
	o := c.op.src
	who := func(holder int) string { return lh.procs[procOf(holder)-1] }
	cite := func(k cause, def string) string {
		if k.text == "" {
			return def
		}
		cited = append(cited, k)
		return k.text
	}
	what := fmt.Sprintf("slot %d", slot)
	if lh.kind == histories.Mutex {
		what = "the mutex"
	}
	switch c.op.kind {
	case take:
		if state.exists == no {
			why = fmt.Sprintf("%s took %s, which did not exist: %s", describeOp(o), what, cite(existed, "it was never created"))
		} else if lh.keepHolds {
			why = fmt.Sprintf("%s took %s while %s held it (%s); no release freed it in between (as in Knossos's mutex model, no fault ends a hold)", describeOp(o), what, who(state.holder), cite(held, "?"))
		} else {
			why = fmt.Sprintf("%s took %s while %s held it (%s); no release, and no fault on %s, freed it in between", describeOp(o), what, who(state.holder), cite(held, "?"), who(state.holder))
		}
	case release:
		why = fmt.Sprintf("%s released %s, which %s did not hold (%s)", describeOp(o), what, o.name, cite(held, "no acquire of it"))
	case verifyHeld:
		switch {
		case state.exists == no:
			why = fmt.Sprintf("%s said held, but %s had been deleted: %s", describeOp(o), what, cite(existed, "?"))
		case state.holder == 0:
			why = fmt.Sprintf("%s said held, but %s did not hold %s (%s)", describeOp(o), o.name, what, cite(held, "it never acquired it"))
		case state.relinquished && state.holder == c.op.proc:
			why = fmt.Sprintf("%s said held, but %s had relinquished %s: %s said not held, and no acquire took it again", describeOp(o), o.name, what, cite(relinquished, "its verify said not held"))
		default:
			why = fmt.Sprintf("%s said held, but %s held %s (%s)", describeOp(o), who(state.holder), what, cite(held, "?"))
		}
	case verifyLost:
		why = fmt.Sprintf("%s said not held, but %s still held %s (%s) and the slot existed (%s); no fault on %s could have cost it the hold", describeOp(o), o.name, what, cite(held, "?"), cite(existed, "as the acquire found it"), o.name)
	case seeHeld:
		if state.exists == no {
			why = fmt.Sprintf("%s ran alone and failed, but %s did not exist (%s): it should have failed differently", describeOp(o), what, cite(existed, "?"))
		} else {
			why = fmt.Sprintf("%s ran alone and failed full, but %s was free (%s)", describeOp(o), what, cite(held, "no one had taken it"))
		}
	case seeMissing:
		why = fmt.Sprintf("%s ran alone and failed, but %s existed (%s)", describeOp(o), what, cite(existed, "as an earlier acquire found it"))
	case seeUnavailable:
		why = fmt.Sprintf("%s ran alone and failed unavailable, but %s existed and was free (%s)", describeOp(o), what, cite(held, cite(existed, "no one had taken it")))
	case createFirst:
		why = fmt.Sprintf("%s succeeded, so the semaphore did not exist, but %s did (%s)", describeOp(o), what, cite(existed, "?"))
	case beyondCount:
		why = fmt.Sprintf("%s succeeded with %d slots, but %s, above them, existed (%s)", describeOp(o), *o.arg.Slots, what, cite(existed, "?"))
	case seeTaken:
		why = fmt.Sprintf("%s failed held, but the mutex was free (%s)", describeOp(o), cite(held, "no one had taken it"))
	default:
		why = fmt.Sprintf("%s cannot follow; the slot %s", describeOp(o), state.describe(lh.procs))
	}
	return why, cited
}

func causeOf(lh *lockHistory, c *slotCall) cause {
	if c.op.kind == lost {
		return cause{fmt.Sprintf("%s lost it after %s", lh.procs[c.op.proc-1], describeFault(c.op.fault, lh.procs)), c.op.fault.index}
	}
	return cause{describeOp(c.op.src), c.op.src.index}
}

func explainCount(ops []porcupine.Operation, best []int, culprit int) (string, int, []int, bool) {
	c := ops[culprit].Input.(*countCall)
	state := countModel.Init().(countRange)
	var last *op
	for _, id := range best {
		in := ops[id].Input.(*countCall)
		_, state = stepCount(state, in)
		last = in.o
	}
	o := c.o
	saw := "slots"
	n := 0
	switch o.f {
	case histories.Count:
		n = *o.res.Slots
	case histories.Change, histories.Destroy:
		saw, n = "slots before it", *o.res.From
	case histories.Create:
		saw = "slots before it (it succeeded, so the semaphore did not exist)"
	}
	want := countModel.DescribeState(state)
	if last == nil {
		return fmt.Sprintf("%s found %d %s, but nothing before it leaves %s", describeOp(o), n, saw, want), 0, []int{o.index}, true
	}
	return fmt.Sprintf("%s found %d %s, but the admin operations leave %s (last: %s)", describeOp(o), n, saw, want, describeOp(last)), 0, []int{o.index, last.index}, true
}
