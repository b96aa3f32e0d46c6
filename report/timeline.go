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
	"github.com/lockprover/lockprover/model"
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
func layout(h []histories.Event, lock string, verdict *model.Verdict) *timeline {
	tl := &timeline{ids: map[int]bool{}}
	culprit, cited := -1, map[int]bool{}
	if verdict != nil {
		for i, n := range verdict.Ops {
			if i == 0 {
				culprit = n
			} else {
				cited[n] = true
			}
		}
	}
	locks := map[string]bool{}
	for _, e := range h {
		if e.Lock != "" {
			locks[e.Lock] = true
		}
	}

	// Rows: clients by number, then the others (admins, the probe) in the
	// order they appear; a process only faults name gets a row too.
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
		if e.Process == "nemesis" && e.Value != nil {
			add(e.Value.Process)
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
	rowOf := map[string]int{}
	names := 0
	for i, p := range procs {
		rowOf[p] = i
		names = max(names, len(p))
	}
	x0 := int(float64(names)*charWidth) + 2*nameGap

	// Pair each invoke with its completion (the next event of the same
	// process, or of the nemesis with the same f and target), and find
	// each fault's window.
	type span struct {
		inv, done, end int // positions in h; -1 for none
		row            int // -1 for every row
		label, title   string
		fault          bool
	}
	var spans []*span
	byInvoke := map[int]*span{} // by position of the invoke
	byDone := map[int]*span{}   // by position of the completion
	t0 := int64(0)
	if len(h) > 0 {
		t0 = h[0].Time
	}
	at := func(pos int) string {
		return time.Duration(h[pos].Time - t0).Round(time.Microsecond).String()
	}
	closed := map[int]bool{} // resumes and heals that end a window
	for i, e := range h {
		if e.Type != histories.Invoke {
			continue
		}
		s := &span{inv: i, done: -1, end: -1, row: -1}
		target := ""
		if e.Value != nil {
			target = e.Value.Process
		}
		for j := i + 1; j < len(h); j++ {
			f := h[j]
			if f.Process != e.Process {
				continue
			}
			if e.Process != "nemesis" {
				if f.Type != histories.Invoke {
					s.done = j
				}
				break
			}
			if f.F == e.F && f.Type != histories.Invoke && (f.Value == nil && target == "" || f.Value != nil && f.Value.Process == target) {
				s.done = j
				break
			}
		}
		if e.Process == "nemesis" {
			s.fault = true
			if target != "" {
				s.row = rowOf[target]
			}
			s.end = s.done
			s.label, s.title = faultText(h, i, s.done, target, at, func(end int, healer int) {
				s.end = end
				if healer >= 0 {
					closed[healer] = true
				}
			})
		} else {
			s.row = rowOf[e.Process]
			s.label, s.title = opText(h, i, s.done, len(locks) > 1, at)
		}
		spans = append(spans, s)
		byInvoke[i] = s
		if s.done >= 0 {
			byDone[s.done] = s
		}
	}

	// Place the events.
	xs := make([]int, len(h)+1)
	barEnd := make([]int, len(procs)) // where each row's last fault label ends
	for i := range len(h) {
		x := x0
		if i > 0 {
			x = xs[i-1] + gap
			if time.Duration(h[i].Time-h[i-1].Time) >= longPause {
				x += 2 * gap
			}
		}
		if s := byInvoke[i]; s != nil && s.fault && !closed[i] {
			for r := range procs {
				if s.row < 0 || s.row == r {
					x = max(x, barEnd[r]+gap/2)
				}
			}
			for r := range procs {
				if s.row < 0 || s.row == r {
					barEnd[r] = x + textWidth(s.label)
				}
			}
		}
		if s := byDone[i]; s != nil {
			if s.fault {
				x = max(x, xs[s.inv]+minFault)
			} else {
				x = max(x, xs[s.inv]+textWidth(s.label))
			}
		}
		xs[i] = x
	}
	last := x0
	if len(h) > 0 {
		last = xs[len(h)-1] + gap
	}
	for _, s := range spans {
		if s.done < 0 && !s.fault {
			last = max(last, xs[s.inv]+textWidth(s.label)+gap)
		}
	}
	for r := range procs {
		last = max(last, barEnd[r]+gap)
	}
	xs[len(h)] = last

	for r, p := range procs {
		y := top + r*rowHeight
		tl.Rows = append(tl.Rows, row{Name: p, Y: y, TextY: y + bandH + barH/2 + 5, Alternate: r%2 == 1})
	}
	tl.Width = last + gap
	tl.NameX, tl.RowH = x0-nameGap, rowHeight
	tl.Height = top + len(procs)*rowHeight + axisH
	for i := 1; i < len(h); i++ {
		if d := time.Duration(h[i].Time - h[i-1].Time); d >= longPause {
			tl.Pauses = append(tl.Pauses, pause{X: xs[i] - gap - gap/2, Y1: top, Y2: top + len(procs)*rowHeight + 4,
				TextY: top + len(procs)*rowHeight + 16, Label: "+" + d.Round(100*time.Millisecond).String()})
		}
	}
	for _, s := range spans {
		e := h[s.inv]
		x := xs[s.inv]
		if s.fault {
			if closed[s.inv] {
				continue
			}
			end := s.end
			if end < 0 {
				end = len(h)
			}
			w := max(xs[end]-x, minFault)
			y, hh := top, len(procs)*rowHeight
			if s.row >= 0 {
				y, hh = top+s.row*rowHeight, rowHeight
			}
			class := "fault"
			if e.Index == culprit || cited[e.Index] {
				class += " named"
			}
			tl.Faults = append(tl.Faults, mark{ID: opID(e.Index), X: x, Y: y, W: w, H: hh,
				Bottom: y + bandH, TextX: x + 4, TextY: y + 13, Label: s.label, Title: s.title, Class: class})
			tl.ids[e.Index] = true
			continue
		}
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
		case e.Index == culprit:
			class += " culprit"
		case cited[e.Index]:
			class += " cited"
		}
		y := top + s.row*rowHeight + bandH
		tl.Bars = append(tl.Bars, bar{ID: opID(e.Index), X: x, Y: y, W: xs[end] - x, H: barH, Bottom: y + barH,
			TextX: x + labelPad/2, TextY: y + barH/2 + 4, Label: s.label, Title: s.title, Class: class})
		tl.ids[e.Index] = true
	}
	return tl
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
	if a := e.Value.Text(); a != "" {
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
			if c.Value != nil && c.Value.Reason != "" {
				b.WriteString(" " + c.Value.Reason)
			}
		default:
			b.WriteString("ok")
			if r := c.Value.Text(); r != "" {
				b.WriteString(" " + r)
			}
		}
		if c.Value != nil && c.Value.Patched {
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
	healer := map[string]string{histories.Pause: histories.Resume, histories.Partition: histories.Heal}[e.F]
	switch {
	case healer != "":
		for j := after + 1; j < len(h); j++ {
			f := h[j]
			if f.Process == "nemesis" && f.Type == histories.Invoke && f.F == healer && f.Value != nil && f.Value.Process == target {
				end := j
				for k := j + 1; k < len(h); k++ {
					if g := h[k]; g.Process == "nemesis" && g.F == healer && g.Type != histories.Invoke && g.Value != nil && g.Value.Process == target {
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
