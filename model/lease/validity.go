package lease

import (
	"fmt"
	"strings"
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
// but within that start's passes, with an excuse that says so. A grant
// whose reply was read only after its claim had run out (replied_ms: when
// it replied, after the invoke, no later than its return as recorded) is
// judged at its reply: it should have failed only if no validity was left
// then; its claim's end, v after the return, is judged as any other, and
// the pass shows the excuse.
func (h *history) validitySound() verdict.Verdict {
	v := verdict.Verdict{Property: ValiditySound, Status: verdict.Pass}
	var excused []verdict.Excuse
	kinds := map[string]int{}
	for _, o := range h.ops {
		if !o.ok() || o.res == nil || o.res.ValidityMs == nil || (o.f != Acquire && o.f != Refresh) {
			continue
		}
		v.Judged++
		detail, excuses := h.claimSound(o)
		if detail != "" {
			v.Status, v.Ops, v.Detail = verdict.Fail, []int{o.index}, detail
			return v
		}
		for _, x := range excuses {
			kinds[x.kind]++
			excused = append(excused, verdict.Excuse{Ops: []int{o.index}, Why: x.why})
		}
	}
	if v.Judged == 0 {
		v.Status, v.Detail = verdict.NotJudged, "no grant said its validity"
	}
	if len(excused) > 0 {
		v.Excuses = excused
		var parts []string
		if n := kinds[fromStart]; n > 0 {
			parts = append(parts, fmt.Sprintf("counted from the library's own start (started_ms) on %d grant(s)", n))
		}
		if n := kinds[atReply]; n > 0 {
			parts = append(parts, fmt.Sprintf("judged at the reply, read after its claim ran out (replied_ms), on %d grant(s)", n))
		}
		v.Detail = fmt.Sprintf("passed only %s: %s", strings.Join(parts, ", and "), excused[0].Why)
	}
	return v
}

// The kinds of claimExcuse.
const (
	fromStart = "started"
	atReply   = "replied"
)

// A claimExcuse is what a sound claim needed: kind, fromStart or atReply,
// and why, as the verdict shows it.
type claimExcuse struct{ kind, why string }

// claimSound judges one grant's claim: why it is unsound, or, if it is
// sound only counted from the start its started_ms says or judged at the
// reply its replied_ms says, the excuses.
func (h *history) claimSound(o *op) (unsound string, excuses []claimExcuse) {
	claim := int64(*o.res.ValidityMs) * int64(time.Millisecond)
	bound := o.call + h.shrink(o.ttl())
	var started int64
	if o.res.StartedMs != nil {
		started = int64(*o.res.StartedMs) * int64(time.Millisecond)
	}
	took := o.ret - o.call
	switch {
	case o.res.RepliedMs != nil && int64(*o.res.RepliedMs)*int64(time.Millisecond) > took:
		return fmt.Sprintf("%s says it replied %d ms after the invoke (replied_ms), after its reply was read (%s): no reply can be", describeOp(o), *o.res.RepliedMs, ms(took)), nil
	case claim < 0 && o.res.RepliedMs == nil:
		return fmt.Sprintf("%s granted a lease with no validity left (validity_ms %d): the grant should have failed", describeOp(o), *o.res.ValidityMs), nil
	case claim < 0 && h.leftAtReply(o) <= 0:
		// Both numbers are rounded down: with a millisecond more of
		// validity, nothing at all was left at the reply.
		return fmt.Sprintf("%s granted a lease with no validity left at its reply (validity_ms %d from its reading, %s after its reply, replied_ms %d): the grant should have failed", describeOp(o), *o.res.ValidityMs, ms(took-int64(*o.res.RepliedMs)*int64(time.Millisecond)), *o.res.RepliedMs), nil
	case started > took:
		return fmt.Sprintf("%s says its library started %d ms after the invoke (started_ms), after the grant returned (%s): no start can be", describeOp(o), *o.res.StartedMs, ms(took)), nil
	case o.ret+claim > bound+started && started > 0:
		until, limit := apart(o.ret+claim, bound+started)
		return fmt.Sprintf("%s claims the lease valid until %s (its return plus validity_ms %d), past its library's start (started_ms %d after the invoke) plus ttl(1-drift), %s: the time the grant took (%s) or the drift was not subtracted",
			describeOp(o), until, *o.res.ValidityMs, *o.res.StartedMs, limit, exactly(took)), nil
	case o.ret+claim > bound+started:
		until, limit := apart(o.ret+claim, bound)
		return fmt.Sprintf("%s claims the lease valid until %s (its return plus validity_ms %d), past its invoke plus ttl(1-drift), %s: the time the grant took (%s) or the drift was not subtracted",
			describeOp(o), until, *o.res.ValidityMs, limit, exactly(took)), nil
	}
	if claim < 0 {
		replied := int64(*o.res.RepliedMs) * int64(time.Millisecond)
		excuses = append(excuses, claimExcuse{atReply, fmt.Sprintf("%s replied %d ms after the invoke (replied_ms) claiming validity until %s; its reply was read %s later, %s after that claim ran out (validity_ms %d): the delay of the machine that read it, not the lock's",
			describeOp(o), *o.res.RepliedMs, seconds(o.ret+claim), ms(took-replied), ms(-claim), *o.res.ValidityMs)})
	}
	if o.ret+claim > bound {
		until, limit := apart(o.ret+claim, bound)
		excuses = append(excuses, claimExcuse{fromStart, fmt.Sprintf("%s claims the lease valid until %s, %s past its invoke plus ttl(1-drift) (%s), within its library's own start, %d ms after the invoke (started_ms), plus ttl(1-drift), as the implementation says",
			describeOp(o), until, exactly(o.ret+claim-bound), limit, *o.res.StartedMs)})
	}
	return "", excuses
}

// apart renders two instants that a message says differ, in seconds: to
// the millisecond, as every explanation does, or finer where that shows
// them equal (a claim past its bound by less than a millisecond), so that
// it never shows two equal times as if one were past the other.
// Two equal instants are rendered as seconds renders them.
func apart(a, b int64) (string, string) {
	if a == b || a == never || b == never {
		return seconds(a), seconds(b)
	}
	for digits := 3; digits < 9; digits++ {
		if x, y := fmt.Sprintf("%.*fs", digits, float64(a)/1e9), fmt.Sprintf("%.*fs", digits, float64(b)/1e9); x != y {
			return x, y
		}
	}
	return fmt.Sprintf("%.9fs", float64(a)/1e9), fmt.Sprintf("%.9fs", float64(b)/1e9)
}

// exactly renders a length of time in whole milliseconds, as every
// explanation does, or exactly where it is not a whole number of them (a
// grant that took 200µs did not take "0 ms").
func exactly(d int64) string {
	if d%int64(time.Millisecond) == 0 {
		return ms(d)
	}
	return time.Duration(d).String()
}

// leftAtReply is the most validity o's claim can have had left at its
// reply, given the roundings down of validity_ms and replied_ms: above
// zero for any claim its implementation made with validity left.
func (h *history) leftAtReply(o *op) int64 {
	return int64(*o.res.ValidityMs+1)*int64(time.Millisecond) + (o.ret - o.call) - int64(*o.res.RepliedMs)*int64(time.Millisecond)
}
