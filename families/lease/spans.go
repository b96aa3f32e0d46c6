package lease

import "sort"

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
	l.may, l.held = h.maySpans(l)
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
	clip := int64(never) // the first release that may have taken effect
	var gs []grant
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
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].call < gs[j].call })
	// Breakpoints: every invoke (a new candidate) and every ok return (b
	// moves on).
	type point struct {
		t   int64
		ret bool
		g   int
	}
	var pts []point
	for i, g := range gs {
		pts = append(pts, point{g.call, false, i})
		if g.ret != never {
			pts = append(pts, point{g.ret, true, i})
		}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
	prefix := make([]int64, len(gs)) // min sttl of grants 0..i
	for i, g := range gs {
		prefix[i] = g.sttl
		if i > 0 {
			prefix[i] = min(prefix[i], prefix[i-1])
		}
	}
	var out []span
	b, jb, jx := int64(-1), -1, -1 // b, the last grant invoked by b, the last invoked by x
	var window []int               // indexes in (jb, jx], increasing call+sttl
	for k := 0; k < len(pts); k++ {
		p := pts[k]
		if p.ret {
			b = max(b, gs[p.g].call)
			for jb+1 < len(gs) && gs[jb+1].call <= b {
				jb++
			}
			for len(window) > 0 && window[0] <= jb {
				window = window[1:]
			}
		} else {
			jx = p.g
			if jx > jb {
				v := gs[jx].call + gs[jx].sttl
				for len(window) > 0 && gs[window[len(window)-1]].call+gs[window[len(window)-1]].sttl >= v {
					window = window[:len(window)-1]
				}
				window = append(window, jx)
			}
		}
		if k+1 < len(pts) && pts[k+1].t == p.t {
			continue // take every breakpoint at this instant first
		}
		if b < 0 {
			continue // the acquire has not returned: not yet certain
		}
		deadline := b + prefix[jb]
		if len(window) > 0 {
			w := gs[window[0]]
			deadline = min(deadline, w.call+w.sttl)
		}
		next := int64(never)
		if k+1 < len(pts) {
			next = pts[k+1].t
		}
		to, byTTL := min(next, deadline), deadline <= next
		if clip <= to {
			to, byTTL = clip, false
		}
		if p.t < to {
			if n := len(out); n > 0 && out[n-1].to == p.t {
				out[n-1].to, out[n-1].byTTL = to, byTTL
			} else {
				out = append(out, span{p.t, to, byTTL})
			}
		}
		if clip <= next {
			break
		}
	}
	return out
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
func (h *history) maySpans(l *lease) ([]span, span) {
	if l.acq == nil {
		return nil, span{}
	}
	held := span{l.acq.call, never, false}
	cur := span{l.acq.call, l.acq.ret + h.stretch(l.acq.ttl()), true}
	var out []span
	for _, o := range sortedOps(l.ops) {
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
	return append(out, cur), held
}
