package lease

import (
	"fmt"
	"time"

	"github.com/lockprover/lockprover/histories/verdict"
)

// ValiditySound is the property of a lease lock whose grants say how long
// they are valid for (Redlock's validity): a grant's claimed validity is
// not negative and ends no later than the grant's invoke plus ttl(1-r).
const ValiditySound = "validity-sound"

// WithValidity lists the lease properties, validity-sound among them, in
// report order, for a family whose grants say their validity.
var WithValidity = []string{LeaseExclusive, NoRevival, AcquireExact, Fencing, ValiditySound, Recovers, Available}

// validitySound judges validity-sound: an acquire or refresh that returned
// ok with validity_ms v claims the lease is valid until its return plus v.
// The lease is certainly valid only until the grant's invoke plus
// ttl(1-r), the time the grant took and the drift bound subtracted; a
// claim past that lets its holder act after another may hold the lease.
// A claim of less than none (v < 0; 0 is less than a millisecond, as
// validity_ms is rounded down) on an ok grant is wrong too: the grant
// should have failed. No fault excuses it: the validity is the client's
// own measure, on a clock no fault here moves. A grant that says when the
// library it wraps started (started_ms after the invoke, no later than its
// return) is judged from there instead: a claim past the invoke's bound
// but within that start's passes, with an excuse that says so.
func (h *history) validitySound() verdict.Verdict {
	v := verdict.Verdict{Property: ValiditySound, Status: verdict.Pass}
	var excused []verdict.Excuse
	for _, o := range h.ops {
		if !o.ok() || o.res == nil || o.res.ValidityMs == nil || (o.f != Acquire && o.f != Refresh) {
			continue
		}
		v.Judged++
		if detail, excuse := h.claimSound(o); detail != "" {
			v.Status, v.Ops, v.Detail = verdict.Fail, []int{o.index}, detail
			return v
		} else if excuse != "" {
			excused = append(excused, verdict.Excuse{Ops: []int{o.index}, Why: excuse})
		}
	}
	if v.Judged == 0 {
		v.Status, v.Detail = verdict.NotJudged, "no grant said its validity"
	}
	if len(excused) > 0 {
		v.Excuses = excused
		v.Detail = fmt.Sprintf("passed only counted from the library's own start (started_ms) on %d grant(s): %s", len(excused), excused[0].Why)
	}
	return v
}

// claimSound judges one grant's claim: why it is unsound, or, if it is
// sound only counted from the start its started_ms says, the excuse.
func (h *history) claimSound(o *op) (unsound, excuse string) {
	claim := int64(*o.res.ValidityMs) * int64(time.Millisecond)
	bound := o.call + h.shrink(o.ttl())
	var started int64
	if o.res.StartedMs != nil {
		started = int64(*o.res.StartedMs) * int64(time.Millisecond)
	}
	switch {
	case claim < 0:
		return fmt.Sprintf("%s granted a lease with no validity left (validity_ms %d): the grant should have failed", describeOp(o), *o.res.ValidityMs), ""
	case started > o.ret-o.call:
		return fmt.Sprintf("%s says its library started %d ms after the invoke (started_ms), after the grant returned (%s): no start can be", describeOp(o), *o.res.StartedMs, ms(o.ret-o.call)), ""
	case o.ret+claim > bound+started && started > 0:
		return fmt.Sprintf("%s claims the lease valid until %s (its return plus validity_ms %d), past its library's start (started_ms %d after the invoke) plus ttl(1-drift), %s: the time the grant took (%s) or the drift was not subtracted",
			describeOp(o), seconds(o.ret+claim), *o.res.ValidityMs, *o.res.StartedMs, seconds(bound+started), ms(o.ret-o.call)), ""
	case o.ret+claim > bound+started:
		return fmt.Sprintf("%s claims the lease valid until %s (its return plus validity_ms %d), past its invoke plus ttl(1-drift), %s: the time the grant took (%s) or the drift was not subtracted",
			describeOp(o), seconds(o.ret+claim), *o.res.ValidityMs, seconds(bound), ms(o.ret-o.call)), ""
	case o.ret+claim > bound:
		return "", fmt.Sprintf("%s claims the lease valid until %s, %s past its invoke plus ttl(1-drift) (%s), within its library's own start, %d ms after the invoke (started_ms), plus ttl(1-drift), as the implementation says",
			describeOp(o), seconds(o.ret+claim), ms(o.ret+claim-bound), seconds(bound), *o.res.StartedMs)
	}
	return "", ""
}
