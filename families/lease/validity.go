package lease

import (
	"fmt"
	"time"

	"github.com/lockprover/lockprover/model"
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
// own measure, on a clock no fault here moves.
func (h *history) validitySound() model.Verdict {
	v := model.Verdict{Property: ValiditySound, Status: model.Pass}
	for _, o := range h.ops {
		if !o.ok() || o.res == nil || o.res.ValidityMs == nil || (o.f != Acquire && o.f != Refresh) {
			continue
		}
		v.Judged++
		claim := int64(*o.res.ValidityMs) * int64(time.Millisecond)
		bound := o.call + h.shrink(o.ttl())
		switch {
		case claim < 0:
			v.Status, v.Ops = model.Fail, []int{o.index}
			v.Detail = fmt.Sprintf("%s granted a lease with no validity left (validity_ms %d): the grant should have failed", describeOp(o), *o.res.ValidityMs)
			return v
		case o.ret+claim > bound:
			v.Status, v.Ops = model.Fail, []int{o.index}
			v.Detail = fmt.Sprintf("%s claims the lease valid until %s (its return plus validity_ms %d), past its invoke plus ttl(1-drift), %s: the time the grant took (%s) or the drift was not subtracted",
				describeOp(o), seconds(o.ret+claim), *o.res.ValidityMs, seconds(bound), ms(o.ret-o.call))
			return v
		}
	}
	if v.Judged == 0 {
		v.Status, v.Detail = model.NotJudged, "no grant said its validity"
	}
	return v
}
