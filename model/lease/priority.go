package lease

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories/verdict"
)

// The properties of priority leases (docs/lease.md, "Priority leases").
// Steal-safe, the thief acting only once its victim knows, is
// lease-exclusive: a lease ends at its holder's lost notice, not before.
const (
	// StealOrder: a steal (a lost notice) whose thief's priority is not
	// strictly higher than its victim's is wrong.
	StealOrder = "steal-order"
	// StealExact: an acquire that ran alone while only leases of lower
	// priority may have been valid must not fail full: it should have
	// taken the lock.
	StealExact = "steal-exact"
)

// WithPriority lists the properties of a priority Redlock in report order:
// WithValidity's, then the steal properties.
var WithPriority = append(append([]string(nil), WithValidity...), StealOrder, StealExact)

// priorities says whether some acquire says its priority or some lease
// was lost.
func (h *history) priorities() bool {
	if len(h.notices) > 0 {
		return true
	}
	for _, o := range h.ops {
		if o.f == Acquire && o.arg != nil && o.arg.Priority != nil {
			return true
		}
	}
	return false
}

// attachNotices finds the leases each lost notice names (the latest lease
// of the token whose acquire was invoked before the notice), and ends each
// victim's lease at its first notice.
func (h *history) attachNotices(byToken map[string][]*lease) {
	latest := func(token string, before int64) *lease {
		var out *lease
		for _, l := range byToken[token] {
			if l.acq.call < before {
				out = l
			}
		}
		return out
	}
	for _, n := range h.notices {
		n.victim, n.by = latest(n.token, n.at), latest(n.thief, n.at)
		if l := n.victim; l != nil && n.at < l.lost {
			l.lost, l.lostBy = n.at, n
		}
	}
}

// priorityOf is an acquire's priority, and whether it says one.
func priorityOf(o *op) (int, bool) {
	if o == nil || o.arg == nil || o.arg.Priority == nil {
		return 0, false
	}
	return *o.arg.Priority, true
}

// victimAcquire is the acquire whose lease a notice says was lost: the
// victim's, or (a lease whose acquire did not return ok: a thief robbed
// while it waited for its own victims) the latest acquire its process
// invoked before the notice.
func (h *history) victimAcquire(n *notice) *op {
	if n.victim != nil {
		return n.victim.acq
	}
	var out *op
	for _, o := range h.byProc[n.proc] {
		if o.f == Acquire && o.call <= n.at {
			out = o
		}
	}
	return out
}

// stealOrder judges steal-order: each lost notice whose thief's acquire
// the history shows granted, and whose victim's priority it shows, must
// name a thief of strictly higher priority.
func (h *history) stealOrder() verdict.Verdict {
	v := verdict.Verdict{Property: StealOrder, Status: verdict.Pass}
	unjudged := 0
	for _, n := range h.notices {
		va := h.victimAcquire(n)
		vp, vok := priorityOf(va)
		var ta *op
		if n.by != nil {
			ta = n.by.acq
		}
		tp, tok := priorityOf(ta)
		if !vok || !tok {
			unjudged++
			continue
		}
		v.Judged++
		if tp > vp {
			continue
		}
		v.Status, v.Ops = verdict.Fail, []int{n.index, ta.index, va.index}
		v.Detail = fmt.Sprintf("%s's lost notice (#%d) says its lease %s was taken by %s, of priority %d, not strictly above the victim's %d (%s): an equal or lower priority must never steal",
			n.proc, n.index, n.token, describeOp(ta), tp, vp, describeOp(va))
		return v
	}
	switch {
	case v.Judged == 0 && len(h.notices) == 0:
		v.Status, v.Detail = verdict.NotJudged, "no lease was lost to a thief"
	case v.Judged == 0:
		v.Status, v.Detail = verdict.NotJudged, fmt.Sprintf("%d lost notice(s), none judged: the thief's acquire never returned its token, or an acquire said no priority", unjudged)
	case unjudged > 0:
		v.Detail = fmt.Sprintf("%d lost notice(s) not judged: the thief's acquire never returned its token, or an acquire said no priority", unjudged)
	}
	return v
}

// stealExact judges steal-exact: an acquire that failed full and ran alone
// (as acquire-exact judges them), while some lease may have been held but
// every lease that may have been valid then (its expiry plus Margin, as
// recovers counts; until its lost notice if it was stolen) was of strictly
// lower priority, should have taken the lock. Where no lease may have
// been valid, recovers judges it; where none may have been held,
// acquire-exact.
func (h *history) stealExact() verdict.Verdict {
	v := verdict.Verdict{Property: StealExact, Status: verdict.Pass}
	var excused []string
	for _, a := range h.alone() {
		p, ok := priorityOf(a)
		if a.reason() != Full || !ok {
			continue
		}
		lower, higher := h.validAgainst(a, p, int64(Margin))
		if len(lower) == 0 && !higher {
			continue // recovers' or acquire-exact's
		}
		v.Judged++
		if higher {
			continue
		}
		// A clock set back may have kept a lease of a priority as high
		// alive beyond its ttl, as recovers allows.
		slack, fs := h.clockSlack(a.call-h.longestTTL(), a.ret)
		if _, higher := h.validAgainst(a, p, int64(Margin)+slack); slack > 0 && higher {
			excused = append(excused, fmt.Sprintf("%s, of priority %d, failed full alone while only leases of lower priority may have been valid (%s), unless %s kept one of a priority as high alive", describeOp(a), p, h.leaseNames(lower), describeFaults(fs)))
			continue
		}
		v.Status, v.Ops = verdict.Fail, []int{a.index}
		names := make([]string, len(lower))
		for i, l := range lower {
			lp, _ := priorityOf(l.acq)
			names[i] = fmt.Sprintf("%s, priority %d", l.name(), lp)
			v.Ops = append(v.Ops, l.acq.index)
		}
		v.Detail = fmt.Sprintf("%s, of priority %d, ran alone (%s to %s) and failed full, yet every lease that may have been valid then was of lower priority: %s; it should have taken the lock from them",
			describeOp(a), p, seconds(a.call), seconds(a.ret), strings.Join(names, "; "))
		return v
	}
	if v.Judged == 0 {
		v.Status, v.Detail = verdict.NotJudged, "no acquire of a priority that ran alone failed full while a lease may have been valid"
	}
	clockExcuses(&v, excused)
	return v
}

// validAgainst returns the leases of priority below p that may have been
// valid while a ran (their expiry stretched by extra), and whether one of
// priority p or above (or of none) may have been.
func (h *history) validAgainst(a *op, p int, extra int64) (lower []*lease, higher bool) {
	for _, l := range h.leases {
		if l.acq == nil || !l.mayBeValid(a.call, a.ret, extra) {
			continue
		}
		if lp, ok := priorityOf(l.acq); ok && lp < p {
			lower = append(lower, l)
		} else {
			higher = true
		}
	}
	return lower, higher
}

// mayBeValid says whether l may have been valid at some instant of
// [from, to], each expiry stretched by extra (Margin, as recovers counts
// it), and not yet marked lost.
func (l *lease) mayBeValid(from, to, extra int64) bool {
	if l.lost <= from {
		return false
	}
	for _, s := range l.may {
		end := s.to
		if s.byTTL && end < never-extra {
			end += extra
		}
		if s.from <= to && end > from {
			return true
		}
	}
	return false
}

// stealNote says, of leases certainly valid at once, which of them took
// another before its holder marked it lost (or with no mark at all): the
// thief acted before its victim knew (steal-safe).
func (h *history) stealNote(ls []*lease) string {
	var notes []string
	for _, thief := range ls {
		for _, victim := range ls {
			if victim == thief || victim.acq == nil || thief.acq == nil {
				continue
			}
			for _, n := range h.notices {
				if n.by == thief && n.victim == victim {
					returned, marked := apart(thief.acq.ret, n.at)
					notes = append(notes, fmt.Sprintf("%s returned at %s, before %s's holder marked it lost (#%d, at %s)", thief.name(), returned, victim.name(), n.index, marked))
				}
			}
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; the thief acted before its victim knew (steal-safe): " + strings.Join(notes, "; ")
}

// stealHorizon is how long a priority lease may be valid for having taken
// the lock from acquires of lower priority: a steal keeps the key alive
// until the victim's deadline where that is later than the thief's ttl
// (so that nobody else takes it before), and a thief robbed in turn
// passes that on. So the thief's lease may be valid as long as any lease
// of lower priority that may have been valid while its acquire ran (lost
// or not: its key lives on), any failed acquire of lower priority that
// returned less than its ttl(1+r) before (it may have set a key, and been
// robbed of it), or any of unknown outcome invoked before its return (its
// ttl(1+r) from that return). 0 for a lease of no priority.
func (h *history) stealHorizon(l *lease) int64 {
	p, ok := priorityOf(l.acq)
	if !ok {
		return 0
	}
	var end int64
	for _, o := range h.ops {
		op, ok := priorityOf(o)
		if o == l.acq || o.f != Acquire || !ok || op >= p || o.call >= l.acq.ret {
			continue
		}
		switch v := o.lease; {
		case o.ok() && v != nil && len(v.may) > 0:
			if last := v.may[len(v.may)-1]; v.may[0].from <= l.acq.ret && last.to > l.acq.call {
				end = max(end, last.to)
			}
		case o.failed():
			if e := o.ret + h.stretch(o.ttl()); e > l.acq.call {
				end = max(end, e)
			}
		case o.unknown():
			// Its key, if any, was set before the steal, by l's return.
			end = max(end, l.acq.ret+h.stretch(o.ttl()))
		}
	}
	return end
}

// stealSpans stretches where each priority lease may be valid by its
// stealHorizon, once every lease's spans are known, in the order of their
// acquires' invokes, so that a thief's thief inherits the first victim's
// deadline through it (a chain); twice, for a victim whose acquire was
// invoked after its thief's.
func (h *history) stealSpans() {
	if !h.priorities() {
		return
	}
	ls := make([]*lease, 0, len(h.leases))
	for _, l := range h.leases {
		if l.acq != nil {
			ls = append(ls, l)
		}
	}
	slices.SortStableFunc(ls, func(a, b *lease) int { return cmp.Compare(a.acq.call, b.acq.call) })
	for range 2 {
		for _, l := range ls {
			if hz := h.stealHorizon(l); len(l.may) > 0 && hz > l.may[0].to {
				l.revivals, l.ghosts = nil, nil
				l.may, l.held = h.maySpans(l, hz)
			}
		}
	}
}
