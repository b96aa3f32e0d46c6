package report

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// The timeline's geometry, in pixels. Labels are monospace, so their width
// follows from their length; charWidth is a little over the advance of the
// usual monospace fonts at 12 px, so that a label always fits its bar.
const (
	charWidth = 7.6
	labelPad  = 14
	gap       = 16 // between consecutive events
	rowHeight = 50
	bandH     = 17 // the top of a row, where fault labels go
	barH      = 24
	top       = 8
	nameGap   = 16 // between the process names and the first event
	minFault  = 10 // the narrowest fault window
	axisH     = 24 // below the rows, for the pauses' lengths
)

// A timeline is the SVG view of a history: one row per process.
type timeline struct {
	Width, Height int
	NameX, RowH   int // where the process names end; a row's height
	Rows          []row
	Pauses        []pause // where time stood still for a while
	Bars          []bar
	Faults        []mark
	ids           map[int]bool // the invoke indexes that have an element
}

type row struct {
	Name      string
	Y, TextY  int
	Alternate bool
}

// A pause is a stretch of at least longPause between two events that are
// drawn side by side: a dashed line, and how long it was.
type pause struct {
	X, Y1, Y2, TextY int
	Label            string
}

// longPause is the shortest wait the timeline shows.
const longPause = time.Second

// A bar is an operation; a mark is a fault's window.
type bar struct {
	ID                       string
	X, Y, W, H, TextX, TextY int
	Bottom                   int // where a fault's strike line ends: above the bars
	Label, Title, Class      string
}

type mark = bar

func textWidth(s string) int { return int(math.Ceil(float64(len(s))*charWidth)) + labelPad }

var clientName = regexp.MustCompile(`^c([0-9]+)$`)

// layout places a history's events left to right in their order, each at
// least gap after the one before, and each completion far enough after its
// invoke for the operation's label to fit its bar; a fault's label, in the
// band above its row's bars, must end before the row's next fault begins.
// verdict (nil for none) names the operations to highlight: the first of
// its Ops cannot happen, the others are what the explanation cites.
func layout(h []histories.Event, lock string, vd *verdict.Verdict) *timeline {
	tl := &timeline{ids: map[int]bool{}}
	named := highlightsOf(vd)
	procs := processes(h)
	rowOf, x0 := rowIndex(procs)
	sp := pairSpans(h, rowOf, severalLocks(h))
	xs := sp.place(h, x0, len(procs))
	tl.frame(procs, x0, xs[len(h)])
	tl.addPauses(h, xs, len(procs))
	for _, s := range sp.all {
		if s.fault {
			tl.addFault(h, s, xs, sp.closed, len(procs), named)
		} else {
			tl.addBar(h, s, xs, lock, named)
		}
	}
	return tl
}

// highlights are the operations a verdict names, by index: the culprit
// (-1 for none), the first of its Ops, cannot happen; the others are what
// its explanation cites. The timeline marks both, so that a reader finds
// them.
type highlights struct {
	culprit int
	cited   map[int]bool
}

// highlightsOf returns the operations verdict names (none for a nil
// verdict).
func highlightsOf(vd *verdict.Verdict) highlights {
	hl := highlights{culprit: -1, cited: map[int]bool{}}
	if vd != nil {
		for i, n := range vd.Ops {
			if i == 0 {
				hl.culprit = n
			} else {
				hl.cited[n] = true
			}
		}
	}
	return hl
}

// severalLocks reports whether h's events are on more than one lock, in
// which case an operation's label names its lock.
func severalLocks(h []histories.Event) bool {
	locks := map[string]bool{}
	for _, e := range h {
		if e.Lock != "" {
			locks[e.Lock] = true
		}
	}
	return len(locks) > 1
}

// processes returns the processes that get a row, in the rows' order:
// clients by number, then the others (admins, the probe) in the order they
// appear. A process only faults name gets a row too; the nemesis gets
// none, as its faults are drawn on their targets' rows.
func processes(h []histories.Event) []string {
	var procs []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && p != "nemesis" && !seen[p] {
			seen[p] = true
			procs = append(procs, p)
		}
	}
	for _, e := range h {
		add(e.Process)
		if f := histories.FaultOf(&e); e.Process == "nemesis" && f != nil {
			add(f.Process)
		}
	}
	sort.SliceStable(procs, func(i, j int) bool {
		a, b := clientName.FindStringSubmatch(procs[i]), clientName.FindStringSubmatch(procs[j])
		switch {
		case a != nil && b != nil:
			x, _ := strconv.Atoi(a[1])
			y, _ := strconv.Atoi(b[1])
			return x < y
		default:
			return a != nil && b == nil
		}
	})
	return procs
}

// rowIndex returns each process's row and x0, where the first event goes:
// far enough right for the longest process name to fit before it.
func rowIndex(procs []string) (rowOf map[string]int, x0 int) {
	rowOf = map[string]int{}
	names := 0
	for i, p := range procs {
		rowOf[p] = i
		names = max(names, len(p))
	}
	return rowOf, int(float64(names)*charWidth) + 2*nameGap
}

// A span is what the timeline draws for an invoke: an operation's bar, up
// to its completion, or a fault's mark, over its window.
type span struct {
	inv, done, end int // positions in h; -1 for none
	row            int // -1 for every row
	label, title   string
	fault          bool
}

// spans are a history's spans in the order of their invokes, with what
// placing and drawing them looks up.
type spans struct {
	all      []*span
	byInvoke map[int]*span // by position of the invoke
	byDone   map[int]*span // by position of the completion
	closed   map[int]bool  // resumes and heals that end a window
}

// pairSpans pairs each invoke of h with its completion (the next event of
// the same process, or of the nemesis with the same f and target), labels
// it, and finds each fault's window. rowOf gives the processes' rows;
// several says whether labels must name their lock.
func pairSpans(h []histories.Event, rowOf map[string]int, several bool) *spans {
	sp := &spans{byInvoke: map[int]*span{}, byDone: map[int]*span{}, closed: map[int]bool{}}
	t0 := int64(0)
	if len(h) > 0 {
		t0 = h[0].Time
	}
	at := func(pos int) string {
		return time.Duration(h[pos].Time - t0).Round(time.Microsecond).String()
	}
	for i, e := range h {
		if e.Type != histories.Invoke {
			continue
		}
		s := &span{inv: i, done: -1, end: -1, row: -1}
		target := aimedAt(&e)
		s.done = completion(h, i, target)
		if e.Process == "nemesis" {
			sp.fault(h, s, target, rowOf, at)
		} else {
			s.row = rowOf[e.Process]
			s.label, s.title = opText(h, i, s.done, several, at)
		}
		sp.all = append(sp.all, s)
		sp.byInvoke[i] = s
		if s.done >= 0 {
			sp.byDone[s.done] = s
		}
	}
	return sp
}

// completion returns the position of the event that completes the invoke
// at inv, or -1 if none does: a client's next event, unless it invokes
// again; for the nemesis, which runs faults side by side, the next
// completion of the same f on the same target.
func completion(h []histories.Event, inv int, target string) int {
	e := h[inv]
	for j := inv + 1; j < len(h); j++ {
		f := h[j]
		if f.Process != e.Process || histories.IsNotice(&f) {
			continue // a notice (lost) completes nothing
		}
		if e.Process != "nemesis" {
			if f.Type != histories.Invoke {
				return j
			}
			return -1
		}
		if f.F == e.F && f.Type != histories.Invoke && aimedAt(&f) == target {
			return j
		}
	}
	return -1
}

// fault makes s, the span of a nemesis invoke, a fault on target's row
// (every row when it has no target), labels it and finds its window. The
// resume or heal that ends a window is recorded as closed: it is drawn as
// part of that window, not as a fault of its own.
func (sp *spans) fault(h []histories.Event, s *span, target string, rowOf map[string]int, at func(int) string) {
	s.fault = true
	if target != "" {
		s.row = rowOf[target]
	}
	s.end = s.done
	s.label, s.title = faultText(h, s.inv, s.done, target, at, func(end int, healer int) {
		s.end = end
		if healer >= 0 {
			sp.closed[healer] = true
		}
	})
}

// place returns the x of each event of h, in order from x0 on: each at
// least gap after the one before (and two more after a long pause), each
// completion far enough after its invoke for the operation's label to fit
// its bar (a fault's window, minFault), and each fault far enough right
// for the fault labels before it on its rows (of which there are rows) to
// end first. xs[len(h)] is the right edge of what is drawn.
func (sp *spans) place(h []histories.Event, x0, rows int) []int {
	xs := make([]int, len(h)+1)
	barEnd := make([]int, rows) // where each row's last fault label ends
	for i := range len(h) {
		x := x0
		if i > 0 {
			x = xs[i-1] + gap
			if time.Duration(h[i].Time-h[i-1].Time) >= longPause {
				x += 2 * gap
			}
		}
		if s := sp.byInvoke[i]; s != nil && s.fault && !sp.closed[i] {
			for r := range rows {
				if s.row < 0 || s.row == r {
					x = max(x, barEnd[r]+gap/2)
				}
			}
			for r := range rows {
				if s.row < 0 || s.row == r {
					barEnd[r] = x + textWidth(s.label)
				}
			}
		}
		if s := sp.byDone[i]; s != nil {
			if s.fault {
				x = max(x, xs[s.inv]+minFault)
			} else {
				x = max(x, xs[s.inv]+textWidth(s.label))
			}
		}
		xs[i] = x
	}
	xs[len(h)] = sp.rightEdge(xs[:len(h)], x0, barEnd)
	return xs
}

// rightEdge is where what is drawn ends: a gap past the last event (x0 if
// there is none), the label of an operation that never completed, and the
// last fault label of each row (barEnd), whichever is furthest right.
func (sp *spans) rightEdge(xs []int, x0 int, barEnd []int) int {
	last := x0
	if len(xs) > 0 {
		last = xs[len(xs)-1] + gap
	}
	for _, s := range sp.all {
		if s.done < 0 && !s.fault {
			last = max(last, xs[s.inv]+textWidth(s.label)+gap)
		}
	}
	for r := range barEnd {
		last = max(last, barEnd[r]+gap)
	}
	return last
}

// frame sizes the timeline and gives each process a row, every other one
// shaded; x0 is where the first event goes and last where the drawing
// ends.
func (tl *timeline) frame(procs []string, x0, last int) {
	for r, p := range procs {
		y := top + r*rowHeight
		tl.Rows = append(tl.Rows, row{Name: p, Y: y, TextY: y + bandH + barH/2 + 5, Alternate: r%2 == 1})
	}
	tl.Width = last + gap
	tl.NameX, tl.RowH = x0-nameGap, rowHeight
	tl.Height = top + len(procs)*rowHeight + axisH
}

// addPauses marks each long pause between consecutive events of h with a
// line across the rows, before the later event, and how long it was.
func (tl *timeline) addPauses(h []histories.Event, xs []int, rows int) {
	for i := 1; i < len(h); i++ {
		if d := time.Duration(h[i].Time - h[i-1].Time); d >= longPause {
			tl.Pauses = append(tl.Pauses, pause{X: xs[i] - gap - gap/2, Y1: top, Y2: top + rows*rowHeight + 4,
				TextY: top + rows*rowHeight + 16, Label: "+" + d.Round(100*time.Millisecond).String()})
		}
	}
}

// addFault draws the fault s as a mark over its row (every row for one
// without a target) from its invoke to the end of its window, at least
// minFault wide, named if the verdict names it. A resume or heal that ends
// a window (closed) is drawn as part of it and gets no mark.
func (tl *timeline) addFault(h []histories.Event, s *span, xs []int, closed map[int]bool, rows int, named highlights) {
	if closed[s.inv] {
		return
	}
	e := h[s.inv]
	x := xs[s.inv]
	end := s.end
	if end < 0 {
		end = len(h)
	}
	w := max(xs[end]-x, minFault)
	y, hh := top, rows*rowHeight
	if s.row >= 0 {
		y, hh = top+s.row*rowHeight, rowHeight
	}
	class := "fault"
	if e.Index == named.culprit || named.cited[e.Index] {
		class += " named"
	}
	tl.Faults = append(tl.Faults, mark{ID: opID(e.Index), X: x, Y: y, W: w, H: hh,
		Bottom: y + bandH, TextX: x + 4, TextY: y + 13, Label: s.label, Title: s.title, Class: class})
	tl.ids[e.Index] = true
}

// addBar draws the operation s as a bar on its row from its invoke to its
// completion (to the right edge if it never completed), classed by how it
// ended, whether it is on another lock than the page's and whether the
// verdict names it, so that the page's style tells them apart.
func (tl *timeline) addBar(h []histories.Event, s *span, xs []int, lock string, named highlights) {
	e := h[s.inv]
	x := xs[s.inv]
	end := s.done
	if end < 0 {
		end = len(h)
	}
	class := "op"
	switch {
	case s.done < 0:
		class += " open"
	case h[s.done].Type == histories.Info:
		class += " unknown"
	case h[s.done].Type == histories.Fail:
		class += " failed"
	}
	if e.Lock != lock {
		class += " elsewhere"
	}
	switch {
	case e.Index == named.culprit:
		class += " culprit"
	case named.cited[e.Index]:
		class += " cited"
	}
	y := top + s.row*rowHeight + bandH
	tl.Bars = append(tl.Bars, bar{ID: opID(e.Index), X: x, Y: y, W: xs[end] - x, H: barH, Bottom: y + barH,
		TextX: x + labelPad/2, TextY: y + barH/2 + 4, Label: s.label, Title: s.title, Class: class})
	tl.ids[e.Index] = true
}

// opText is an operation's label ("#12 verify slot 1 -> ok held") and
// tooltip (who, and when).
func opText(h []histories.Event, inv, done int, several bool, at func(int) string) (string, string) {
	e := h[inv]
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", e.Index)
	if several {
		fmt.Fprintf(&b, "[%s] ", e.Lock)
	}
	b.WriteString(e.F)
	if a := histories.TextOf(e.Value); a != "" {
		b.WriteString(" " + a)
	}
	b.WriteString(" -> ")
	when := "invoked at " + at(inv)
	if done < 0 {
		b.WriteString("never completed")
		when += ", never completed"
	} else {
		c := h[done]
		switch c.Type {
		case histories.Info:
			b.WriteString("unknown (info)")
		case histories.Fail:
			b.WriteString("fail")
			if r := histories.Reason(c.Value); r != "" {
				b.WriteString(" " + r)
			}
		default:
			b.WriteString("ok")
			if r := histories.TextOf(c.Value); r != "" {
				b.WriteString(" " + r)
			}
		}
		if histories.IsPatched(c.Value) {
			b.WriteString(" (patched)")
		}
		when += fmt.Sprintf(", completed (#%d) at %s", c.Index, at(done))
		if c.Error != "" {
			when += "\nerror: " + c.Error
		}
	}
	label := b.String()
	return label, fmt.Sprintf("%s, lock %q: %s\n%s", e.Process, e.Lock, label, when)
}

// faultText is a fault's label ("#4 pause c1 30s, until #8") and tooltip,
// and calls window with the position of the event its window ends at
// (-1: the end of the history) and that of the resume or heal that ends
// it, if any. A pause lasts until its resume and a partition until its
// heal; a kill until the process runs again.
func faultText(h []histories.Event, inv, done int, target string, at func(int) string, window func(end, healer int)) (string, string) {
	e := h[inv]
	what := e.F
	if target != "" {
		what += " " + target
	}
	label := fmt.Sprintf("#%d %s", e.Index, what)
	title := what + ", struck at " + at(inv)
	after := inv
	if done >= 0 {
		after = done
	}
	healer := histories.EndOf(e.F)
	switch {
	case healer != "":
		for j := after + 1; j < len(h); j++ {
			f := h[j]
			if f.Process == "nemesis" && f.Type == histories.Invoke && f.F == healer && aims(&f, target) {
				end := j
				for k := j + 1; k < len(h); k++ {
					if g := h[k]; g.Process == "nemesis" && g.F == healer && g.Type != histories.Invoke && aims(&g, target) {
						end = k
						break
					}
				}
				d := time.Duration(f.Time - e.Time).Round(time.Millisecond)
				label += fmt.Sprintf(" %s, until %s #%d", d, healer, f.Index)
				title += fmt.Sprintf(", in force for %s until the %s (#%d) at %s", d, healer, f.Index, at(j))
				window(end, j)
				return label, title
			}
		}
		label += ", never " + map[string]string{histories.Resume: "resumed", histories.Heal: "healed"}[healer]
		title += ", in force to the end of the history"
		window(-1, -1)
	case e.F == histories.Kill && target != "":
		for j := after + 1; j < len(h); j++ {
			if h[j].Process == target && h[j].Type == histories.Invoke {
				title += fmt.Sprintf("; %s runs again at #%d (%s)", target, h[j].Index, at(j))
				window(j, -1)
				return label, title
			}
		}
		title += "; it never runs again"
		window(-1, -1)
	}
	return label, title
}

// aimedAt is the process the fault e is aimed at, "" for none (or for an
// event that is not a fault's).
func aimedAt(e *histories.Event) string {
	if f := histories.FaultOf(e); f != nil {
		return f.Process
	}
	return ""
}

// aims says whether e is a fault's aimed at target.
func aims(e *histories.Event, target string) bool {
	f := histories.FaultOf(e)
	return f != nil && f.Process == target
}
