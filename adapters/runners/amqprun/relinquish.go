package amqprun

import (
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// RelinquishPlan is a scripted plan in which c1's slot is removed (change
// -1), c1's verify finds it gone, the slot is created again (change +1),
// c2 takes it (unless c1 kept its B queue), and c1 verifies and releases
// after that. Its steps are gapMs apart, so that on a real broker, where
// processes start late and calls take time, they keep this order.
func RelinquishPlan(o Options, gapMs int) *Plan {
	gap := Step{Op: Sleep, Ms: gapMs}
	return &Plan{Version: PlanVersion, Kind: histories.Semaphore, Lock: "lp-relinquish", Slots: 1, Options: o,
		Admins: [][]Step{{gap, {Op: histories.Change, Delta: -1}, gap, gap, {Op: histories.Change, Delta: +1}}},
		Clients: [][]Step{
			{{Op: histories.Acquire}, gap, gap, {Op: histories.Verify}, gap, gap, gap, {Op: histories.Verify}, {Op: histories.Release}},
			{gap, gap, gap, gap, {Op: histories.Acquire}, {Op: histories.Verify}, gap, gap, {Op: histories.Release}},
		}}
}

// Relinquish is how a run of RelinquishPlan went.
type Relinquish struct {
	// Lost says c1's first verify said not held.
	Lost bool
	// Cost is what that verify cost.
	Cost broker.Cost
	// Taken says c2's acquire took the slot.
	Taken bool
	// Scripted says the steps ran in the plan's order, as a loaded machine
	// may not let them: c1's first verify ended before the slot was created
	// again, that creation ended before c2's acquire began, and c2's
	// acquire had an outcome (ok or fail, not info) before c1's release
	// began (until then c1 keeps its B queue, untidy), and no fault struck
	// (the plan has none: one in the history is the broker's or the
	// machine's own, a connection whose heartbeats lapsed, say).
	Scripted bool
}

// Relinquished says how a run of RelinquishPlan went.
func Relinquished(res *prover.Result) Relinquish {
	var r Relinquish
	open := map[string]histories.Event{}
	verifiedAt, createdAt, c2Outcome, struck := int64(-1), int64(-1), false, false
	// Each step's order is judged at its own invoke: c2's acquire may
	// begin before the admin's create does (at load 38 it began 1.3 s
	// before it), and a later step must not make that right.
	createdAfterVerify, acquiredAfterCreate := false, false
	// c1's release began, and c2's acquire ended before it: the fifteenth
	// clean clone's load held c2's acquire past c1's release, and c2 then
	// rightly took the slot that an untidy c1 had kept until then.
	released, acquiredBeforeRelease := false, false
	for _, e := range res.History {
		if e.Process == "nemesis" {
			struck = true
			continue
		}
		if e.Type == histories.Invoke {
			open[e.Process] = e
			switch {
			case e.Process == "admin" && e.F == histories.Change && grows(e):
				createdAfterVerify = verifiedAt >= 0
			case e.Process == "c2" && e.F == histories.Acquire:
				acquiredAfterCreate = createdAt >= 0
			case e.Process == "c1" && e.F == histories.Release:
				released = true
			}
			continue
		}
		switch {
		case e.Process == "c1" && e.F == histories.Verify && verifiedAt < 0:
			verifiedAt = e.Time
			v := amqpcheck.ValueOf(&e)
			r.Lost = e.Type == histories.Ok && v != nil && v.Held != nil && !*v.Held
			r.Cost = res.Evidence.Family.(*amqpcheck.Evidence).Costs[open[e.Process].Index]
		case e.Process == "admin" && e.F == histories.Change && grows(open["admin"]) && e.Type == histories.Ok:
			createdAt = e.Time
		case e.Process == "c2" && e.F == histories.Acquire:
			r.Taken = e.Type == histories.Ok
			c2Outcome = e.Type != histories.Info
			acquiredBeforeRelease = !released
		}
	}
	r.Scripted = createdAfterVerify && acquiredAfterCreate && c2Outcome && acquiredBeforeRelease && !struck
	return r
}

// grows says whether e is a change that adds slots.
func grows(e histories.Event) bool {
	v := amqpcheck.ValueOf(&e)
	return e.F == histories.Change && v != nil && v.Delta != nil && *v.Delta > 0
}
