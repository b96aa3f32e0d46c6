package lease

import (
	"cmp"
	"slices"

	"github.com/lockprover/lockprover/histories"
)

// A revival is a refresh, or a release reported ok, invoked when the
// lease had certainly expired (or been released): end is when it may have
// been valid until.
type revival struct {
	o   *op
	end int64
}

// grant is an acquire or refresh that did not fail: it may have set the
// lease's deadline to its effect plus its ttl.
type grant struct {
	call, ret int64 // ret is never for an unknown outcome
	sttl      int64 // the ttl shrunk by the drift bound
}

// spans computes where l is certainly valid, where it may be valid and
// where it may be held.
func (h *history) spans(l *lease) {
	l.certain = h.certainSpans(l)
	l.may, l.held = h.maySpans(l, 0)
}

// certainSpans: l is certainly valid at x when its acquire has returned, no
// release that may have taken effect was invoked yet, and every deadline
// the grants may have set exceeds x. The last grant to take effect before
// x took effect after b, the latest invoke of the grants certainly in
// effect (returned ok by x), and after its own invoke; so the deadline is
// at least min over the grants g invoked before x of max(b, g.call) +
// g.ttl(1-r). The minimum is kept with a prefix minimum (grants invoked by
// b) and a sliding-window minimum (grants invoked between b and x).
func (h *history) certainSpans(l *lease) []span {
	if l.acq == nil && len(l.ops) == 0 {
		return nil
	}
	gs, clip := h.grantsOf(l)
	pts := breakpoints(gs)
	prefix := make([]int64, len(gs)) // min sttl of grants 0..i
	prefixMins(prefix, gs)
	var out []span
	b, jb := int64(-1), -1 // b, the last grant invoked by b
	var window []int       // indexes in (jb, the last invoked by x], increasing call+sttl
	for k := 0; k < len(pts); k++ {
		p := pts[k]
		if p.ret {
			b = max(b, gs[p.g].call)
			jb = lastInvokedBy(gs, jb, b)
			window = dropThrough(window, jb)
		} else if jx := p.g; jx > jb {
			window = dropNotBelow(window, gs, gs[jx].call+gs[jx].sttl)
			window = append(window, jx)
		}
		if k+1 < len(pts) && pts[k+1].t == p.t {
			continue // take every breakpoint at this instant first
		}
		if b < 0 {
			continue // the acquire has not returned: not yet certain
		}
		next := int64(never)
		if k+1 < len(pts) {
			next = pts[k+1].t
		}
		to, byTTL := certainTo(certainDeadline(gs, prefix, window, b, jb), next, clip)
		if p.t < to {
			out = extendSpans(out, span{p.t, to, byTTL})
		}
		if clip <= next {
			break
		}
	}
	return out
}

// grantsOf returns l's grants (its acquire, and its refreshes that did
// not fail) in invoke order, and clip, the invoke of the first release
// that may have taken effect or its lost mark, the earlier (never if
// none).
func (h *history) grantsOf(l *lease) (gs []grant, clip int64) {
	clip = min(l.lost, l.killed) // a lease its holder marked lost ends there, as at a release, and one whose holder was killed, where kills end leases
	if l.acq != nil {
		gs = append(gs, grant{l.acq.call, l.acq.ret, h.shrink(l.acq.ttl())})
	}
	for _, o := range l.ops {
		switch {
		case o.failed():
		case o.f == Release:
			clip = min(clip, o.call)
		default:
			gs = append(gs, grant{o.call, o.ret, h.shrink(o.ttl())})
		}
	}
	slices.SortStableFunc(gs, func(a, b grant) int { return cmp.Compare(a.call, b.call) })
	return gs, clip
}

// A grantPoint is a breakpoint of certainSpans' sweep: the invoke of grant
// gs[g] (a new candidate deadline), or its ok return (b moves on).
type grantPoint struct {
	t   int64
	ret bool
	g   int
}

// breakpoints returns the breakpoints of the grants gs in time order: every
// invoke, and every return that is not of an unknown outcome.
func breakpoints(gs []grant) []grantPoint {
	pts := make([]grantPoint, 0, 2*len(gs))
	for i, g := range gs {
		pts = append(pts, grantPoint{g.call, false, i})
		if g.ret != never {
			pts = append(pts, grantPoint{g.ret, true, i})
		}
	}
	slices.SortStableFunc(pts, func(a, b grantPoint) int { return cmp.Compare(a.t, b.t) })
	return pts
}

// prefixMins sets prefix[i] to the smallest sttl of the grants gs[0..i].
func prefixMins(prefix []int64, gs []grant) {
	for i, g := range gs {
		prefix[i] = g.sttl
		if i > 0 {
			prefix[i] = min(prefix[i], prefix[i-1])
		}
	}
}

// lastInvokedBy moves jb on to the last of the grants gs (in invoke order)
// invoked by b.
func lastInvokedBy(gs []grant, jb int, b int64) int {
	for jb+1 < len(gs) && gs[jb+1].call <= b {
		jb++
	}
	return jb
}

// dropThrough drops from the front of window the grants invoked by b (an
// index at most jb): the prefix minimum covers them now.
func dropThrough(window []int, jb int) []int {
	for len(window) > 0 && window[0] <= jb {
		window = window[1:]
	}
	return window
}

// dropNotBelow drops from the back of window the grants whose call+sttl is
// at least v, which a grant with v, invoked later, makes redundant: the
// window's call+sttl stays increasing.
func dropNotBelow(window []int, gs []grant, v int64) []int {
	for len(window) > 0 && gs[window[len(window)-1]].call+gs[window[len(window)-1]].sttl >= v {
		window = window[:len(window)-1]
	}
	return window
}

// certainDeadline is the earliest deadline the grants may have set, given
// b and jb: the prefix minimum's over the grants invoked by b, or the
// window's front (the smallest call+sttl of the later ones) if earlier.
func certainDeadline(gs []grant, prefix []int64, window []int, b int64, jb int) int64 {
	deadline := b + prefix[jb]
	if len(window) > 0 {
		w := gs[window[0]]
		deadline = min(deadline, w.call+w.sttl)
	}
	return deadline
}

// certainTo is where a certain span from a breakpoint ends: at the next
// breakpoint next, at the deadline if sooner (byTTL), or at clip, a
// release's invoke, if sooner still.
func certainTo(deadline, next, clip int64) (to int64, byTTL bool) {
	to, byTTL = min(next, deadline), deadline <= next
	if clip <= to {
		to, byTTL = clip, false
	}
	return to, byTTL
}

// extendSpans appends s to out, or extends out's last span with it if that
// ends where s starts.
func extendSpans(out []span, s span) []span {
	if n := len(out); n > 0 && out[n-1].to == s.from {
		out[n-1].to, out[n-1].byTTL = s.to, s.byTTL
		return out
	}
	return append(out, s)
}

// maySpans: l may be valid from its acquire's invoke until its acquire's
// return plus ttl(1+r); a refresh invoked while it may be valid took effect
// while it was (else it revived it) and stretches that to min(its return,
// the end so far) plus its ttl(1+r); a release that returned ok ends it at
// its return. A refresh reported ok though invoked after that end revived
// the lease: from its invoke it may be valid again (no-revival condemns it).
// A refresh of unknown outcome invoked after that end is taken to have had
// no effect: if it had, it revived the lease, which no-revival forbids.
// held is where l may be held, expiry ignored: from the acquire's invoke
// until an ok release returned.
//
// horizon is a later end a steal may give the acquire (stealHorizon).
func (h *history) maySpans(l *lease, horizon int64) ([]span, span) {
	if l.acq == nil {
		return nil, span{}
	}
	held := span{l.acq.call, never, false}
	cur := span{l.acq.call, max(l.acq.ret+h.stretch(l.acq.ttl()), horizon), true}
	var out []span
	restarts, ttl := h.keptRestarts(), l.acq.ttl()
	for _, o := range sortedOps(l.ops) {
		for len(restarts) > 0 && restarts[0].call <= o.call {
			cur, restarts = h.restarted(cur, restarts[0], ttl), restarts[1:]
		}
		if !o.failed() && o.f != Release {
			ttl = o.ttl()
		}
		switch {
		case o.failed():
		case o.f == Release && o.ok():
			held.to = min(held.to, o.ret)
			if o.call >= cur.to {
				l.revivals = append(l.revivals, revival{o, cur.to})
			}
			if o.call < cur.to && o.ret < cur.to {
				cur.to, cur.byTTL = o.ret, false
			}
		case o.f == Release:
		case o.call < cur.to:
			if o.ok() {
				cur.to = max(cur.to, min(o.ret, cur.to)+h.stretch(o.ttl()))
			} else {
				cur.to = max(cur.to, cur.to+h.stretch(o.ttl()))
			}
			cur.byTTL = true
		case !o.ok():
			l.ghosts = append(l.ghosts, o)
		default:
			l.revivals = append(l.revivals, revival{o, cur.to})
			out = append(out, cur)
			cur = span{o.call, o.ret + h.stretch(o.ttl()), true}
		}
	}
	for _, f := range restarts {
		cur = h.restarted(cur, f, ttl)
	}
	return append(out, cur), held
}

// keptRestarts are the restarts of the backend, in invoke order, where a
// restart keeps the leases and renews them (Options.RestartKeeps); none
// otherwise.
func (h *history) keptRestarts() []*fault {
	if !h.restartKeeps {
		return nil
	}
	var out []*fault
	for _, f := range h.faults {
		if h.atClient(f) {
			continue
		}
		switch {
		case f.f == histories.RestartBroker && (len(h.elections) == 0 || slices.Contains(h.elections, f.target)):
			out = append(out, f)
		case f.f == histories.Pause || f.f == histories.Kill:
			if slices.Contains(h.elections, f.target) {
				out = append(out, f)
			}
		case f.f == histories.Partition:
			if h.electionCut(f.cut) {
				out = append(out, f)
			}
		}
	}
	return out
}

// electionCut says whether cut (a partition of a cluster's links) cuts a
// link between two of its servers (Options.Elections).
func (h *history) electionCut(cut string) bool {
	v := histories.Fault{Cut: cut}
	for _, d := range v.Directions() {
		if slices.Contains(h.elections, d[0]) && slices.Contains(h.elections, d[1]) {
			return true
		}
	}
	return false
}

// restarted is cur after restart f, which renewed a lease of ttl that may
// still have been valid when it struck: until f's completion (for ever if
// it never completed) plus ttl stretched, plus the grace.
func (h *history) restarted(cur span, f *fault, ttl int64) span {
	if f.call >= cur.to {
		return cur
	}
	to := int64(never)
	if back := max(f.end, f.over); f.end != never && f.over != never {
		// A restart is over once back; a partition or a pause of a
		// cluster's node once healed or resumed (Options.Elections).
		to = back + h.stretch(ttl) + h.restartGrace
	}
	if to > cur.to {
		cur.to, cur.byTTL = to, true
	}
	return cur
}
