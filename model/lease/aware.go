package lease

import (
	"fmt"

	"github.com/lockprover/lockprover/histories/verdict"
)

// Aware is the property of a lease lock whose holders can ask whether they
// still hold (verify {token} -> ok {held}): a verify that answers held
// must be one the lease may still have been valid for. Consul's semaphore
// recipe has it (issue 23: a holder that keeps answering held through
// renew failures, Consul #18271, is what it catches).
const Aware = "aware"

// WithVerify lists the lease properties, aware among them, in report
// order, for a family whose holders verify.
var WithVerify = []string{LeaseExclusive, NoRevival, AcquireExact, Fencing, Recovers, Available, Aware}

// isVerify says whether o is a verify.
func (o *op) isVerify() bool { return o.f == Verify }

// aware judges aware: a verify answered held (ok {held: true}) must have
// been invoked while its lease may still have been valid (before its last
// grant's return plus k·ttl(1+r), and before an ok release of it
// returned), or have returned after a grant of it that may have revived
// it: the answer must have been true at some moment the verify ran.
// Clock faults in force stretch the lease by their amount, as for
// no-revival. A verify of a token no acquire the history shows ok granted
// is not judged (its lease's life is unknown). A holder may answer not held
// at any time: it may have lost its lease early (pruned, or asked the
// backend late); what it must never do is believe it holds a lease that
// is certainly gone.
func (h *history) aware() verdict.Verdict {
	v := verdict.Verdict{Property: Aware, Status: verdict.Pass}
	for _, vf := range h.verifies {
		o, l := vf.o, vf.l
		if !o.ok() || o.res == nil || o.res.Held == nil || !*o.res.Held || l == nil || l.acq == nil {
			continue
		}
		v.Judged++
		slack, fs := h.clockSlack(l.acq.call, o.ret)
		if mayValidDuring(l, o.call-slack, o.ret) {
			continue
		}
		v.Status, v.Ops = verdict.Fail, []int{o.index, l.acq.index}
		v.Detail = fmt.Sprintf("%s answered held, yet %s could not be valid at any moment from its invoke at %s to its return at %s: %s",
			describeOp(o), l.name(), seconds(o.call), seconds(o.ret), h.goneWhy(l))
		if len(fs) > 0 {
			v.Detail += fmt.Sprintf(" (even with %s stretching it)", describeFaults(fs))
		}
		return v
	}
	if v.Judged == 0 {
		v.Status, v.Detail = verdict.NotJudged, "no verify answered held for a lease the history shows granted"
	}
	return v
}

// mayValidDuring says whether l may have been valid at some moment of
// [from, to], and not yet released.
func mayValidDuring(l *lease, from, to int64) bool {
	if from >= l.held.to {
		return false
	}
	for _, s := range l.may {
		if s.from <= to && from < s.to {
			return true
		}
	}
	return false
}

// goneWhy says how l had ended: released, or expired at the end of its
// last span.
func (h *history) goneWhy(l *lease) string {
	end := int64(0)
	for _, s := range l.may {
		end = max(end, s.to)
	}
	if l.held.to < end {
		return fmt.Sprintf("a release of it reported ok returned at %s", seconds(l.held.to))
	}
	return fmt.Sprintf("it may have been valid only until %s (its last grant's return plus %s)", seconds(end), h.horizon())
}
