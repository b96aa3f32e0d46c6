package lease

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// exclusive judges lease-exclusive: at no instant are more leases certainly
// valid than the smallest max among them (each lease was granted under its
// acquire's max, and a holder granted under max m was promised at most m
// holders). An overlap that shrinking the expiries by the clock faults in
// force removes is excused, and the verdict says so.
func (h *history) exclusive() verdict.Verdict {
	v := verdict.Verdict{Property: LeaseExclusive, Status: verdict.Pass}
	maxes := map[int]bool{}
	edges := h.certainEdges(&v, maxes)
	distinct := make([]int, 0, len(maxes))
	for m := range maxes {
		distinct = append(distinct, m)
	}
	sort.Ints(distinct)
	byMax := map[int]int{}
	active := map[*lease]span{}
	var excused []string
	for k, e := range edges {
		if !e.start {
			delete(active, e.l)
			byMax[e.l.max]--
			continue
		}
		active[e.l] = e.s
		byMax[e.l.max]++
		if k+1 < len(edges) && edges[k+1].t == e.t && edges[k+1].start {
			continue // judge once every lease starting now is in
		}
		bound := smallestMax(distinct, byMax)
		if len(active) <= bound {
			continue
		}
		if h.tooMany(&v, active, e.t, bound, &excused) {
			return v
		}
	}
	clockExcuses(&v, excused)
	return v
}

// clockExcuses says, in v's detail (the first three) and one by one in its
// excuses, what clock faults beyond the drift bound excused.
func clockExcuses(v *verdict.Verdict, excused []string) {
	if len(excused) == 0 {
		return
	}
	shown := excused[:min(3, len(excused))]
	v.Detail = "excused by clock faults beyond the drift bound: " + strings.Join(shown, "; ")
	if more := len(excused) - len(shown); more > 0 {
		v.Detail += fmt.Sprintf("; and %d more", more)
	}
	for _, x := range excused {
		var ops []int
		for _, m := range opRef.FindAllStringSubmatch(x, -1) {
			if n, err := strconv.Atoi(m[1]); err == nil && !slices.Contains(ops, n) {
				ops = append(ops, n)
			}
		}
		v.Excuses = append(v.Excuses, verdict.Excuse{Ops: ops, Why: x})
	}
}

// opRef is an operation's index in a description: "(#12)".
var opRef = regexp.MustCompile(`#([0-9]+)`)

// A leaseEdge is where a span in which a lease is certainly valid starts
// or ends.
type leaseEdge struct {
	t     int64
	start bool
	l     *lease
	s     span
}

// certainEdges returns the edges of every lease's certain spans in time
// order (at one instant, ends before starts: spans are half-open). It
// counts in v.Judged the leases that are certainly valid somewhere, and
// sets their maxes in maxes (the caller's, so that it and the list made
// of it can stay on the stack).
func (h *history) certainEdges(v *verdict.Verdict, maxes map[int]bool) []leaseEdge {
	var edges []leaseEdge
	for _, l := range h.leases {
		if len(l.certain) > 0 {
			v.Judged++
			maxes[l.max] = true
		}
		for _, s := range l.certain {
			edges = append(edges, leaseEdge{s.from, true, l, s}, leaseEdge{s.to, false, l, s})
		}
	}
	slices.SortStableFunc(edges, func(a, b leaseEdge) int {
		switch {
		case a.t != b.t:
			return cmp.Compare(a.t, b.t)
		case !a.start && b.start:
			return -1 // ends first: spans are half-open
		case a.start && !b.start:
			return 1
		}
		return 0
	})
	return edges
}

// smallestMax is the smallest of the maxes distinct (increasing) that
// byMax counts a lease of, or 0 if it counts none.
func smallestMax(distinct []int, byMax map[int]int) int {
	for _, m := range distinct {
		if byMax[m] > 0 {
			return m
		}
	}
	return 0
}

// tooMany judges an instant t at which the leases active, each in the
// certain span it has, outnumber bound. If the clock faults in force could
// have expired enough of them early, the overlap is excused (and added to
// excused); otherwise v fails with the overlap
// and tooMany says so.
func (h *history) tooMany(v *verdict.Verdict, active map[*lease]span, t int64, bound int, excused *[]string) bool {
	// Too many. Would the clock faults explain it? Each lease by those that
	// could have moved its end since its first grant (stepSlack): a lease
	// granted after a step of the backend's clock lasts its whole ttl.
	ls := make([]*lease, 0, len(active))
	for l := range active {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *lease) int { return cmp.Compare(a.id, b.id) }) // ids are distinct
	var slack int64                                                               // the most any one lease could have lost
	var fs []*fault
	left, minLeft := 0, 0
	for _, l := range ls {
		s := active[l]
		lslack, lfs := h.stepSlack(min(s.from, l.firstGrant()), t)
		slack = max(slack, lslack)
		for _, f := range lfs {
			if !slices.Contains(fs, f) {
				fs = append(fs, f)
			}
		}
		end := s.to // the expiry its ttl gives; a span a release ends could have expired sooner
		if !s.byTTL {
			end = h.deadlineAt(l, t)
		}
		if end-lslack > t {
			left++
			if minLeft == 0 || l.max < minLeft {
				minLeft = l.max
			}
		}
	}
	what := fmt.Sprintf("at %s, %d leases were certainly valid, max %d: %s%s", seconds(t), len(ls), bound, h.listLeases(ls, active), h.stealNote(ls))
	if slack > 0 && left <= minLeft {
		*excused = append(*excused, fmt.Sprintf("%s; excused by %s: clocks that far off could have expired %d of them early", what, describeFaults(fs), len(ls)-left))
		return false
	}
	failOverlap(v, ls, what, slack, fs)
	return true
}

// deadlineAt is when l is certainly valid until by its ttl alone, as seen
// at t (releases ignored): the earliest deadline the grants invoked by t
// may have set, each taking effect no earlier than its own invoke and the
// latest invoke of the grants returned ok by t (see certainSpans).
func (h *history) deadlineAt(l *lease, t int64) int64 {
	gs, _ := h.grantsOf(l)
	b := int64(-1)
	for _, g := range gs {
		if g.ret != never && g.ret <= t {
			b = max(b, g.call)
		}
	}
	d := int64(never)
	for _, g := range gs {
		if g.call <= t {
			d = min(d, max(b, g.call)+g.sttl)
		}
	}
	return d
}

// failOverlap makes v fail with the overlap what of the leases ls, saying
// how little the clock faults fs in force (slack in all) explain, and
// pointing at the leases' acquires.
func failOverlap(v *verdict.Verdict, ls []*lease, what string, slack int64, fs []*fault) {
	v.Status = verdict.Fail
	v.Detail = what
	if slack > 0 {
		v.Detail += fmt.Sprintf(" (the clock faults in force, %s, explain only %d ms of it)", describeFaults(fs), slack/int64(time.Millisecond))
	}
	if note := disagree(ls); note != "" {
		v.Detail += "; " + note
	}
	for _, l := range ls {
		if l.acq != nil {
			v.Ops = append(v.Ops, l.acq.index)
		}
	}
}

// listLeases describes leases certainly valid at an instant, with the
// span each was certainly valid in.
func (h *history) listLeases(ls []*lease, active map[*lease]span) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		s := active[l]
		until := "until " + seconds(s.to)
		switch {
		case s.byTTL:
			until += " (its last grant's invoke plus ttl(1-drift))"
		case s.to == l.lost:
			until += fmt.Sprintf(" (its holder's lost notice, #%d)", l.lostBy.index)
		case s.to == l.killed:
			until += " (its holder's kill)"
		default:
			until += " (a release's invoke)"
		}
		parts[i] = fmt.Sprintf("%s, max %d, certainly valid from %s %s", l.name(), l.max, seconds(s.from), until)
	}
	return strings.Join(parts, "; ")
}

// disagree notes leases of one lock granted under different maxes.
func disagree(ls []*lease) string {
	m := map[int]bool{}
	for _, l := range ls {
		m[l.max] = true
	}
	if len(m) < 2 {
		return ""
	}
	return "the acquires disagree on max, and each lease is judged against its own (the smallest bounds them all)"
}

// carriedOn is how long l may have lasted, for o, if it lasted until end
// (its end, stretched by a clock fault): a refresh of unknown outcome
// invoked before then, and before o, may have taken effect just before
// end, and carried it on by its own ttl(1+r); carried are those refreshes.
// Without them a lease refreshed by a command whose reply was lost, while
// a server's clock set back kept its key, would look revived by its next
// refresh.
func carriedOn(l *lease, o *op, end int64, stretch func(int64) int64) (int64, []*op) {
	var carried []*op
	for _, g := range l.ghosts {
		if g.call < end && g.call < o.call {
			end += stretch(g.ttl())
			carried = append(carried, g)
		}
	}
	return end, carried
}

// noRevival judges no-revival: a refresh reported ok, or a release reported
// ok, invoked when its lease had certainly expired (after its last grant's
// return plus ttl(1+r)) or been released, is wrong; so is one of a token
// nobody could have granted. Clock faults in force excuse what they
// explain.
func (h *history) noRevival() verdict.Verdict {
	v := verdict.Verdict{Property: NoRevival, Status: verdict.Pass}
	for _, o := range h.ops {
		if o.f != Acquire && !o.isVerify() && o.ok() {
			v.Judged++
		}
	}
	if len(h.orphans) > 0 {
		o := h.orphans[0]
		v.Status, v.Ops = verdict.Fail, []int{o.index}
		v.Detail = fmt.Sprintf("%s names token %s, which no acquire on lock %s granted, and no acquire of unknown outcome was invoked before it returned: a lease that never existed cannot be refreshed or released", describeOp(o), o.token(), h.lock)
		return v
	}
	var excused []string
	var first *revival
	var firstLease *lease
	for _, l := range h.leases {
		for i := range l.revivals {
			rv := &l.revivals[i]
			// It may have taken effect at any time until it returned:
			// a clock fault struck meanwhile counts too.
			to := rv.o.call
			if rv.o.ret != never {
				to = rv.o.ret
			}
			slack, fs := h.clockSlack(l.acq.call, to)
			if end, carried := carriedOn(l, rv.o, rv.end+slack, h.stretch); slack > 0 && rv.o.call < end {
				why := fmt.Sprintf("%s came %s after %s could last, which %s explains", describeOp(rv.o), ms(rv.o.call-rv.end), l.name(), describeFaults(fs))
				for _, g := range carried {
					why += fmt.Sprintf(", if %s, of unknown outcome, refreshed it meanwhile", describeOp(g))
				}
				excused = append(excused, why)
				continue
			}
			if first == nil || rv.o.index < first.o.index {
				first, firstLease = rv, l
			}
		}
	}
	if first != nil {
		l, o := firstLease, first.o
		v.Status, v.Ops = verdict.Fail, []int{o.index, l.acq.index}
		why := "had certainly expired: it may have been valid only until %s (its last grant's return plus " + h.horizon() + ")"
		if l.held.to <= o.call {
			why = "had been released: a release reported ok returned at %s"
		}
		at, end := apart(o.call, first.end)
		v.Detail = fmt.Sprintf("%s was invoked at %s, when %s "+why, describeOp(o), at, l.name(), end)
		for _, g := range l.ghosts {
			if g.call < o.call {
				v.Detail += fmt.Sprintf("; if %s revived it instead, that was as wrong", describeOp(g))
				break
			}
		}
		return v
	}
	clockExcuses(&v, excused)
	return v
}

func ms(d int64) string { return fmt.Sprintf("%d ms", d/int64(time.Millisecond)) }

// fencing judges fencing: where one grant returned before another was
// invoked, the first took effect first, so its fence must be smaller.
// Grants that overlap in time may have taken effect in either order, and
// are not compared.
func (h *history) fencing() verdict.Verdict {
	v := verdict.Verdict{Property: Fencing, Status: verdict.Pass}
	var fenced []*op
	for _, o := range h.ops {
		if o.f == Acquire && o.ok() && o.res.Fence != nil {
			fenced = append(fenced, o)
		}
	}
	v.Judged = len(fenced)
	if len(fenced) == 0 {
		v.Status, v.Detail = verdict.NotJudged, "no acquire returned a fence: the implementation gives no numeric fencing tokens"
		return v
	}
	byRet := append([]*op(nil), fenced...)
	slices.SortStableFunc(byRet, func(a, b *op) int { return cmp.Compare(a.ret, b.ret) })
	byCall := sortedOps(fenced)
	var top *op // the largest fence among the grants returned so far
	k := 0
	for _, b := range byCall {
		for k < len(byRet) && byRet[k].ret < b.call {
			if top == nil || *byRet[k].res.Fence > *top.res.Fence {
				top = byRet[k]
			}
			k++
		}
		if top != nil && *top.res.Fence >= *b.res.Fence {
			v.Status, v.Ops = verdict.Fail, []int{b.index, top.index}
			v.Detail = fmt.Sprintf("%s was invoked after %s returned, so it took effect later, yet its fence %d is not above %d", describeOp(b), describeOp(top), *b.res.Fence, *top.res.Fence)
			return v
		}
	}
	return v
}

// exactAndRecovers judges acquire-exact and recovers on the acquires that
// failed full and ran alone: no other operation on the lock in flight while
// they ran (one of unknown outcome stays in flight while its lease may be
// valid, plus the margin; an acquire of unknown outcome for ever), and no
// fault on their process or on the backend in force. Such an acquire of
// max m is right only if m leases may have been valid at some instant while
// it ran. acquire-exact: counting every lease not yet released (expiry
// ignored), and every acquire of unknown outcome from its invoke on, at
// least m were held. recovers: counting a lease only while it may be valid
// (its last grant's return plus ttl(1+r)) plus Margin, at least m were;
// clock faults in force stretch that by their amount.
func (h *history) exactAndRecovers() (verdict.Verdict, verdict.Verdict) {
	exact := verdict.Verdict{Property: AcquireExact, Status: verdict.Pass}
	rec := verdict.Verdict{Property: Recovers, Status: verdict.Pass}
	margin := int64(Margin)
	var held, live []span
	for _, l := range h.leases {
		if l.acq == nil {
			continue
		}
		held = append(held, l.held)
		for _, s := range l.may {
			live = append(live, span{s.from, s.to + margin, s.byTTL})
		}
	}
	for _, p := range h.phantom {
		held = append(held, span{p.call, never, false})
		live = append(live, span{p.call, never, false})
	}
	heldCover, liveCover := newCover(held), newCover(live)
	alone := h.alone()
	var recExcused []string
	for _, a := range alone {
		if a.reason() != Full {
			continue
		}
		exact.Judged++
		rec.Judged++
		m := a.max()
		if n := heldCover.most(a.call, a.ret); n < m && exact.Status == verdict.Pass {
			exact.Status, exact.Ops = verdict.Fail, []int{a.index}
			exact.Detail = fmt.Sprintf("%s ran alone, yet at most %d lease(s) may have been held while it ran (%s to %s), under its max %d: the others were released, or never granted", describeOp(a), n, seconds(a.call), seconds(a.ret), m)
			continue
		}
		if n := liveCover.most(a.call, a.ret); n < m && rec.Status == verdict.Pass {
			expired := h.expiredHolders(a)
			// A clock fault counts from the earliest last grant of the
			// leases in the way: a backend clock ahead when a deadline was
			// written makes the lease outlast its ttl after the clock is
			// put right.
			from := a.call - h.longestTTL()
			for _, l := range expired {
				from = min(from, l.may[len(l.may)-1].from)
			}
			slack, fs := h.clockSlack(from, a.ret)
			if slack > 0 && h.liveWithSlack(a, slack+margin) >= m {
				if len(recExcused) < 3 {
					who := h.leaseNames(expired) + " may have been valid"
					if len(expired) == 0 {
						who = "no lease may have been valid, but a key may have lived on"
					}
					recExcused = append(recExcused, fmt.Sprintf("%s while %s only with %s", describeOp(a), who, describeFaults(fs)))
				}
				continue
			}
			rec.Status = verdict.Fail
			rec.Ops, rec.Detail = h.notRecovered(a, n, m, expired)
		}
	}
	if exact.Judged == 0 {
		exact.Status, exact.Detail = verdict.NotJudged, "no acquire that ran alone failed full"
		rec.Status, rec.Detail = verdict.NotJudged, "no acquire that ran alone failed full"
	}
	if rec.Status == verdict.Pass {
		clockExcuses(&rec, recExcused)
	}
	return exact, rec
}

// notRecovered explains recovers' failure on a, an acquire of max m that
// failed full alone while at most n leases may have been valid, expired
// being those in the way: the operations concerned and the detail.
func (h *history) notRecovered(a *op, n, m int, expired []*lease) ([]int, string) {
	ops := []int{a.index}
	var names []string
	for _, l := range expired {
		ops = append(ops, l.acq.index)
		last := l.may[len(l.may)-1]
		names = append(names, fmt.Sprintf("%s may have been valid only until %s%s", l.name(), seconds(last.to), h.holderFaults(l, a.call)))
	}
	if len(names) == 0 {
		names = []string{"no lease of the history may have been valid"}
	}
	detail := fmt.Sprintf("%s ran alone at %s, yet at most %d lease(s) may have been valid then, under its max %d: %s; %s and a margin of %v had passed, so the slot should have been free again", describeOp(a), seconds(a.call), n, m, strings.Join(names, "; "), h.horizon(), Margin)
	for _, l := range expired {
		for _, g := range l.ghosts {
			detail += fmt.Sprintf(" (unless %s revived the lease, which no-revival forbids)", describeOp(g))
		}
	}
	return ops, detail
}

// alone returns the acquires that ran alone, in invoke order.
func (h *history) alone() []*op {
	ops := sortedOps(h.ops)
	end := func(o *op) int64 { // until when o may be in flight
		switch {
		case !o.unknown():
			return o.ret
		case o.f == Acquire || o.lease == nil || len(o.lease.may) == 0:
			return never
		}
		e := o.lease.may[len(o.lease.may)-1].to
		if e > never-int64(Margin) {
			return never
		}
		return e + int64(Margin)
	}
	var out []*op
	reach := int64(-1) // the latest end of the operations invoked before
	for i, o := range ops {
		e := end(o)
		solo := reach < o.call && (i+1 == len(ops) || ops[i+1].call > o.ret)
		reach = max(reach, e)
		if solo && o.f == Acquire && !o.unknown() && !h.faulted(o) {
			out = append(out, o)
		}
	}
	return out
}

// faulted reports whether a fault other than a clock fault on o's process
// or on the backend was in force while o ran.
func (h *history) faulted(o *op) bool {
	for _, f := range h.faults {
		if f.clock() || f.f == histories.Resume || f.f == histories.Heal || f.f == histories.ClockReset {
			continue
		}
		if (!h.atClient(f) || f.target == o.proc) && f.call <= o.ret && f.over >= o.call {
			return true
		}
	}
	return false
}

// expiredHolders are the leases held (not released) while a ran, but no
// longer valid, margin included.
func (h *history) expiredHolders(a *op) []*lease {
	var out []*lease
	for _, l := range h.leases {
		if l.acq == nil || l.held.from > a.ret || l.held.to <= a.call {
			continue
		}
		last := l.may[len(l.may)-1]
		if last.to+int64(Margin) <= a.call {
			out = append(out, l)
		}
	}
	return out
}

func (h *history) leaseNames(ls []*lease) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.name()
	}
	return strings.Join(s, ", ")
}

// holderFaults names the faults on a lease's holder before t.
func (h *history) holderFaults(l *lease, t int64) string {
	var fs []*fault
	for _, f := range h.faults {
		if f.target == l.proc && f.call < t && !f.clock() {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return ""
	}
	return " (after " + describeFaults(fs) + ")"
}

// longestTTL is the longest ttl any acquire or refresh asked for, stretched.
func (h *history) longestTTL() int64 {
	var m int64
	for _, o := range h.ops {
		m = max(m, h.stretch(o.ttl()))
	}
	return m
}

// liveWithSlack is how many leases may have been valid at some instant
// while a ran, each lease's expiry stretched by extra.
func (h *history) liveWithSlack(a *op, extra int64) int {
	var ss []span
	for _, l := range h.leases {
		if l.acq == nil {
			continue
		}
		for _, s := range l.may {
			to := s.to
			if s.byTTL {
				to += extra
			}
			ss = append(ss, span{s.from, to, s.byTTL})
		}
	}
	for _, p := range h.phantom {
		ss = append(ss, span{p.call, never, false})
	}
	return newCover(ss).most(a.call, a.ret)
}

// cover is how many spans cover each instant: a step function.
type cover struct {
	t []int64 // from t[i] until t[i+1], n[i] spans
	n []int
}

func newCover(ss []span) *cover {
	type edge struct {
		t int64
		d int
	}
	es := make([]edge, 0, 2*len(ss))
	for _, s := range ss {
		if s.from < s.to {
			es = append(es, edge{s.from, 1}, edge{s.to, -1})
		}
	}
	// The order of edges at the same instant does not matter: they count
	// together.
	slices.SortFunc(es, func(a, b edge) int { return cmp.Compare(a.t, b.t) })
	c := &cover{t: make([]int64, 0, len(es)), n: make([]int, 0, len(es))}
	n := 0
	for i, e := range es {
		n += e.d
		if i+1 < len(es) && es[i+1].t == e.t {
			continue
		}
		c.t = append(c.t, e.t)
		c.n = append(c.n, n)
	}
	return c
}

// most is the largest number of spans covering one instant of [a, b].
func (c *cover) most(a, b int64) int {
	i := sort.Search(len(c.t), func(i int) bool { return c.t[i] > a }) - 1
	best := 0
	if i >= 0 {
		best = c.n[i]
	}
	for j := i + 1; j < len(c.t) && c.t[j] <= b; j++ {
		best = max(best, c.n[j])
	}
	return best
}
