// Package report renders a counterexample as one HTML page a person can
// read without lockprover at hand: what was violated, in which lock and
// slot, and why, in the words lockprover prints; a timeline of the history
// with the processes on the rows, each operation a bar from its invoke to
// its completion, the faults shaded where they were in force, and the
// operations the explanation names highlighted; the minimal plan; and the
// command that replays it.
//
// The page is self-contained: its style, its timeline (SVG) and its few
// lines of script are inline, and it loads nothing, so that it opens
// offline from a CI artifact as well as from the disk it was written to.
// Everything that comes from a history or a plan is escaped by
// html/template: lock names and reasons are data, never markup.
//
// The timeline places events in the order the history records them, not to
// scale: a history spends microseconds on an operation and seconds waiting
// for a heartbeat, and on a time scale the operations an explanation is
// about would be a pixel wide. Each bar's tooltip gives its times.
// Porcupine's own view of the check (its linearizations and the states
// they reach) stays beside the report and is linked from it.
package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"strconv"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// A Counterexample is what a report shows: a history, the verdicts on it,
// which of them the report is about, and how to get the history again.
type Counterexample struct {
	// Property and Lock are the violated property and the lock it was
	// violated on; the verdict for them is the one the page is about.
	Property, Lock string
	// Verdicts are the history's verdicts, as model.Check gives them.
	Verdicts []verdict.Verdict
	// History is the history judged, as histories.Read gives it.
	History []histories.Event
	// Plan is the plan that gave the history, as JSON; nil for none.
	Plan []byte
	// Summary is what lockprover printed about the counterexample.
	Summary string
	// Replay is the command that replays the plan; "" for none.
	Replay string
	// Timeline is a link, relative to the page, to porcupine's view of the
	// check; "" for none.
	Timeline string
	// Notes say what an import did to the history (histories.Imported's
	// notes): operations left out, times put in the file's order.
	Notes []string
}

// Write writes cx's page to w.
func Write(w io.Writer, cx Counterexample) error {
	var b bytes.Buffer
	if err := page.Execute(&b, build(cx)); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// view is what the template shows.
type view struct {
	Title       string
	Headline    string // "slot-exclusive violated"
	Where       string // `semaphore "lp", slot 1`
	Explanation []segment
	Others      []failure // the other failed or undecided verdicts
	Verdicts    []verdict.Verdict
	Replay      string
	Summary     string
	Plan        string
	Timeline    string
	TL          *timeline
	Notes       []string
	Excuses     []excuse // the excuses of the page's lock's verdicts
}

// An excuse is what a verdict let through, and why.
type excuse struct {
	Property string
	Why      []segment
}

// A failure is one failed verdict other than the page's.
type failure struct {
	Lock, Property, Status string
	Detail                 []segment
}

// A segment is a piece of an explanation: text, or a reference to an
// operation (#12) that links to its bar.
type segment struct {
	Text string
	Ref  string // the element id it refers to, or ""
}

func build(cx Counterexample) *view {
	v := &view{Replay: cx.Replay, Summary: cx.Summary, Timeline: cx.Timeline, Notes: cx.Notes}
	var main *verdict.Verdict
	for i := range cx.Verdicts {
		vd := &cx.Verdicts[i]
		if vd.Lock == cx.Lock && vd.Property == cx.Property && main == nil {
			main = vd
		}
	}
	tl := layout(cx.History, cx.Lock, main)
	v.TL = tl

	kind := histories.Semaphore
	for _, e := range cx.History {
		if e.Lock == cx.Lock && e.Kind != "" {
			kind = e.Kind
		}
	}
	v.Where = fmt.Sprintf("%s %q", kind, cx.Lock)
	switch {
	case main == nil && cx.Property == "":
		v.Headline = "no property violated"
	case main == nil:
		v.Headline = cx.Property + " violated"
	case main.Status == verdict.Inconclusive:
		v.Headline = cx.Property + " could not be decided"
	case main.Status == verdict.Fail:
		v.Headline = cx.Property + " violated"
	default:
		v.Headline = cx.Property + " " + main.Status.String()
	}
	if main != nil {
		if main.Slot > 0 {
			v.Where += fmt.Sprintf(", slot %d", main.Slot)
		}
		v.Explanation = refs(main.Detail, tl.ids)
	}
	v.Title = "lockprover: " + v.Headline + " in " + v.Where
	for i := range cx.Verdicts {
		vd := &cx.Verdicts[i]
		if vd == main || (vd.Status != verdict.Fail && vd.Status != verdict.Inconclusive) {
			continue
		}
		v.Others = append(v.Others, failure{vd.Lock, vd.Property, vd.Status.String(), refs(vd.Detail, tl.ids)})
	}
	for _, vd := range cx.Verdicts {
		if vd.Lock == cx.Lock {
			v.Verdicts = append(v.Verdicts, vd)
			for _, e := range vd.Excuses {
				v.Excuses = append(v.Excuses, excuse{vd.Property, refs(e.Why, tl.ids)})
			}
		}
	}
	if cx.Plan != nil {
		var p bytes.Buffer
		if json.Indent(&p, cx.Plan, "", "  ") == nil {
			v.Plan = p.String()
		} else {
			v.Plan = string(cx.Plan)
		}
	}
	return v
}

var opRef = regexp.MustCompile(`#[0-9]+`)

// refs splits text at the operation numbers it mentions (#12), linking
// those that have an element on the timeline.
func refs(text string, ids map[int]bool) []segment {
	var out []segment
	last := 0
	for _, m := range opRef.FindAllStringIndex(text, -1) {
		n, err := strconv.Atoi(text[m[0]+1 : m[1]])
		if err != nil || !ids[n] {
			continue
		}
		if m[0] > last {
			out = append(out, segment{Text: text[last:m[0]]})
		}
		out = append(out, segment{Text: text[m[0]:m[1]], Ref: opID(n)})
		last = m[1]
	}
	if last < len(text) {
		out = append(out, segment{Text: text[last:]})
	}
	return out
}

func opID(index int) string { return "op-" + strconv.Itoa(index) }

//go:embed page.html
var pageText string

var page = template.Must(template.New("page").Parse(pageText))
