package report

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

// page renders the testdata history name as lockprover check would judge
// it, about its first failed verdict (if any).
func render(t *testing.T, name string, edit func(*Counterexample)) string {
	t.Helper()
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", name))
	if err != nil {
		t.Fatal(err)
	}
	r := model.Check(h, model.Options{})
	cx := Counterexample{Verdicts: r.Verdicts, History: h, Lock: h[0].Lock,
		Plan: []byte(`{"version":1,"lock":"sem"}`), Summary: "summary", Replay: "lockprover replay out/plan.json", Timeline: "history.html"}
	for _, v := range r.Verdicts {
		if v.Status == verdict.Fail {
			cx.Property, cx.Lock = v.Property, v.Lock
			break
		}
	}
	if edit != nil {
		edit(&cx)
	}
	var b bytes.Buffer
	if err := Write(&b, cx); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// element is the markup of the element with the given id, up to its
// closing tag.
func element(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element %s in the page", id)
	}
	start := strings.LastIndex(page[:i], "<")
	tag := strings.Fields(page[start+1 : i])[0]
	end := strings.Index(page[i:], "</"+tag+">")
	if end < 0 {
		t.Fatalf("element %s is not closed", id)
	}
	return page[start : i+end]
}

func TestHeaderSaysWhatWhereAndWhy(t *testing.T) {
	p := render(t, "20-double-holder.jsonl", nil)
	for _, want := range []string{
		"<title>lockprover: slot-exclusive violated in semaphore &#34;sem&#34;, slot 1</title>",
		`<h1 id="headline">slot-exclusive violated</h1>`,
		`in <strong>semaphore &#34;sem&#34;, slot 1</strong>`,
		// The explanation, with its operation numbers linked to their bars.
		`slot 1: c2 acquire -&gt; ok slot 1 (<a class="ref" href="#op-4" data-ref="op-4">#4</a>) took slot 1 while c1 held it`,
		`(c1 acquire -&gt; ok slot 1 (<a class="ref" href="#op-2" data-ref="op-2">#2</a>))`,
		`<pre class="replay" id="replay">lockprover replay out/plan.json</pre>`,
		`<a id="porcupine" href="history.html">`,
		"<pre class=\"plan\" id=\"plan\">{\n  &#34;version&#34;: 1,\n  &#34;lock&#34;: &#34;sem&#34;\n}</pre>",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

func TestNamedOperationsAreHighlighted(t *testing.T) {
	p := render(t, "20-double-holder.jsonl", nil)
	for id, want := range map[string]string{
		"op-4": `class="op culprit"`, // the acquire that cannot happen
		"op-2": `class="op cited"`,   // the hold it breaks
		"op-0": `class="op"`,
	} {
		if got := element(t, p, id); !strings.Contains(got, want) {
			t.Errorf("%s: want %s in %s", id, want, got)
		}
	}
	if got := element(t, p, "op-4"); !strings.Contains(got, ">#4 acquire -&gt; ok slot 1</text>") {
		t.Errorf("the bar of #4 is not labelled with its operation and result: %s", got)
	}
}

func TestFaultsAreMarked(t *testing.T) {
	for _, c := range []struct {
		history, id, label string
	}{
		{"03-pause-zombie.jsonl", "op-4", "#4 pause c1 30s, until resume #8"},
		{"04-partition-heal.jsonl", "op-4", "#4 partition c1 15s, until heal #8"},
		{"02-kill-holder.jsonl", "op-5", "#5 kill c1"},
		{"05-force-close.jsonl", "", "force-close c1"},
		{"07-drop-reply.jsonl", "", "drop-reply"},
		{"30-restart-loses-slots.jsonl", "op-4", "#4 restart-broker"},
	} {
		p := render(t, c.history, nil)
		if c.id == "" {
			if !strings.Contains(p, `<g class="fault"`) || !strings.Contains(p, c.label) {
				t.Errorf("%s: no fault marked %q", c.history, c.label)
			}
			continue
		}
		if got := element(t, p, c.id); !strings.Contains(got, `class="fault"`) || !strings.Contains(got, ">"+c.label+"</text>") {
			t.Errorf("%s: want a fault labelled %q, got %s", c.history, c.label, got)
		}
	}
	// A resume or a heal ends a window: it is no fault of its own.
	if p := render(t, "03-pause-zombie.jsonl", nil); strings.Contains(p, `id="op-8"`) {
		t.Error("the resume is drawn as a fault")
	}
	// A kill lasts until the process runs again, or to the end.
	p := render(t, "02-kill-holder.jsonl", nil)
	if !strings.Contains(element(t, p, "op-5"), "it never runs again") {
		t.Error("the kill's window does not say that c1 never ran again")
	}
}

// A restart of the broker strikes every process: its window spans every row.
func TestBrokerFaultSpansEveryRow(t *testing.T) {
	h, _ := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "30-restart-loses-slots.jsonl"))
	tl := layout(h, "sem", nil)
	if len(tl.Faults) != 1 || tl.Faults[0].Y != top || tl.Faults[0].H != len(tl.Rows)*rowHeight {
		t.Errorf("want one fault over all %d rows, got %+v", len(tl.Rows), tl.Faults)
	}
}

// A bar is wide enough for its label, and no bar of a row overlaps the
// next.
func TestBarsHoldTheirLabels(t *testing.T) {
	h, _ := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "10-several-locks.jsonl"))
	tl := layout(h, "jobs", nil)
	last := map[int]int{}
	for _, b := range tl.Bars {
		if b.W < textWidth(b.Label) {
			t.Errorf("%s: %d wide for %q", b.ID, b.W, b.Label)
		}
		if b.X < last[b.Y] {
			t.Errorf("%s starts at %d, before the row's last bar ends (%d)", b.ID, b.X, last[b.Y])
		}
		last[b.Y] = b.X + b.W
	}
	if !strings.Contains(render(t, "10-several-locks.jsonl", nil), "[batch] ") {
		t.Error("with several locks, bars do not name their lock")
	}
}

// Everything from a history, a plan or a summary is data: a hostile name
// comes out escaped, never as markup.
func TestHostileNamesAreEscaped(t *testing.T) {
	const evil = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	var h []histories.Event
	add := func(proc string, typ histories.Type, f string, v histories.Value) {
		lock := evil
		if proc == "nemesis" {
			lock = ""
		}
		h = append(h, histories.Event{Index: len(h), Time: int64(len(h)) * 1000, Process: proc, Type: typ, F: f, Lock: lock, Value: v})
	}
	add("admin"+evil, histories.Invoke, "create", &amqpcheck.Value{Slots: histories.Int(1)})
	add("admin"+evil, histories.Ok, "create", nil)
	add("c1", histories.Invoke, "acquire", nil)
	add("nemesis", histories.Invoke, "kill", &histories.Fault{Process: "c1"})
	add("nemesis", histories.Info, "kill", &histories.Fault{Process: "c1"})
	add("c2", histories.Invoke, "acquire", nil)
	add("c2", histories.Fail, "acquire", &amqpcheck.Value{Reason: evil})
	vs := []verdict.Verdict{{Lock: evil, Property: model.SlotExclusive + evil, Status: verdict.Fail, Ops: []int{5}, Detail: evil + " (#5)"}}
	var b bytes.Buffer
	err := Write(&b, Counterexample{Property: model.SlotExclusive + evil, Lock: evil, Verdicts: vs, History: h,
		Plan: []byte(`{"lock":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`), Summary: evil, Replay: "lockprover replay " + evil, Timeline: evil})
	if err != nil {
		t.Fatal(err)
	}
	p := b.String()
	if n := strings.Count(p, "<script"); n != 1 {
		t.Errorf("want only the page's own script, found %d", n)
	}
	for _, bad := range []string{"<img", "alert(1)</script>"} {
		if strings.Contains(p, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	if !strings.Contains(p, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile name is not shown escaped")
	}
	// A hostile link stays inside its attribute, and a script URL is not
	// followed.
	if !strings.Contains(p, `href="%22%3e%3cscript%3ealert%281%29`) {
		t.Error("the timeline link is not escaped as a URL")
	}
	b.Reset()
	if err := Write(&b, Counterexample{Property: model.SlotExclusive, Lock: "sem", History: h, Timeline: "javascript:alert(3)"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `href="javascript`) || !strings.Contains(b.String(), `href="#ZgotmplZ"`) {
		t.Error("a javascript: link is kept")
	}
}

var external = regexp.MustCompile(`(?i)(src|href|action|xmlns|url)\s*[=(]\s*["']?\s*(https?:)?//`)

// The page loads nothing: no external URL anywhere, and the only links are
// to its own elements and to porcupine's page beside it. A URL in the
// replay command (a broker's) stays text.
func TestNothingExternal(t *testing.T) {
	for _, name := range []string{"20-double-holder.jsonl", "24-zombie-verifies-held.jsonl", "36-two-locks-one-bad.jsonl", "01-turns.jsonl"} {
		p := render(t, name, func(cx *Counterexample) {
			cx.Replay = "lockprover replay --target rabbitmq --amqp-url https://broker.invalid/ out/plan.json"
		})
		replay := element(t, p, "replay")
		rest := strings.Replace(p, replay, "", 1)
		if strings.Contains(rest, "http://") || strings.Contains(rest, "https://") || external.MatchString(rest) {
			t.Errorf("%s: an external URL outside the replay command", name)
		}
		if strings.Contains(p, " src=") || strings.Contains(p, "@import") {
			t.Errorf("%s: the page loads something", name)
		}
		for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(p, -1) {
			if !strings.HasPrefix(m[1], "#op-") && m[1] != "history.html" {
				t.Errorf("%s: a link to %q", name, m[1])
			}
		}
		if !strings.Contains(replay, "https://broker.invalid/") {
			t.Errorf("%s: the replay command lost its URL: %s", name, replay)
		}
	}
}

// A history that broke nothing still renders: the timeline, no verdict.
func TestNoViolation(t *testing.T) {
	p := render(t, "01-turns.jsonl", nil)
	if !strings.Contains(p, `<h1 id="headline">no property violated</h1>`) || strings.Contains(p, `id="explanation"`) {
		t.Error("a passing history is shown as a violation")
	}
}

// With several locks, the page is about the failed lock's verdict; the
// other lock's operations stay on the timeline, dimmed.
func TestSeveralLocks(t *testing.T) {
	p := render(t, "36-two-locks-one-bad.jsonl", nil)
	for _, want := range []string{
		`<h1 id="headline">slot-exclusive violated</h1>`,
		`in <strong>semaphore &#34;b&#34;, slot 1</strong>`,
		`<p class="explanation" id="explanation">slot 1: c3 acquire`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(element(t, p, "verdicts"), "<li"); n != 9 {
		t.Errorf("want lock b's 9 verdicts, got %d", n)
	}
	for id, want := range map[string]string{"op-4": `class="op elsewhere"`, "op-6": `class="op cited"`, "op-8": `class="op culprit"`} {
		if got := element(t, p, id); !strings.Contains(got, want) {
			t.Errorf("%s: want %s in %s", id, want, got)
		}
	}
}

// Each process has a row, clients first by number, and its operations are
// drawn on it; a process that only a fault names has a row too.
func TestRows(t *testing.T) {
	ev := func(i int, proc string, typ histories.Type, f, target string) histories.Event {
		e := histories.Event{Index: i, Time: int64(i), Process: proc, Type: typ, F: f, Lock: "sem"}
		if proc == "nemesis" {
			e.Lock, e.Value = "", &histories.Fault{Process: target}
		}
		return e
	}
	h := []histories.Event{
		ev(0, "admin", histories.Invoke, "count", ""), ev(1, "admin", histories.Ok, "count", ""),
		ev(2, "c10", histories.Invoke, "acquire", ""), ev(3, "c2", histories.Invoke, "acquire", ""),
		ev(4, "nemesis", histories.Invoke, "kill", "c3"), ev(5, "nemesis", histories.Info, "kill", "c3"),
	}
	tl := layout(h, "sem", nil)
	var names []string
	for _, r := range tl.Rows {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, " "); got != "c2 c3 c10 admin" {
		t.Errorf("rows %s, want c2 c3 c10 admin", got)
	}
	rowOf := map[string]int{"op-0": 3, "op-2": 2, "op-3": 0}
	for _, b := range tl.Bars {
		if r := tl.Rows[rowOf[b.ID]]; b.Y < r.Y || b.Y+b.H > r.Y+rowHeight {
			t.Errorf("%s is drawn at y %d, outside row %s (%d)", b.ID, b.Y, r.Name, r.Y)
		}
	}
	if len(tl.Faults) != 1 || tl.Faults[0].Y != tl.Rows[1].Y {
		t.Errorf("the kill of c3 is not on c3's row: %+v", tl.Faults)
	}
}

// What a process said went wrong is in its operation's tooltip.
func TestErrorInTooltip(t *testing.T) {
	h := []histories.Event{
		{Index: 0, Time: 1, Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "sem"},
		{Index: 1, Time: 2, Process: "c1", Type: histories.Info, F: "acquire", Lock: "sem", Error: "connection reset"},
	}
	if tl := layout(h, "sem", nil); len(tl.Bars) != 1 || !strings.HasSuffix(tl.Bars[0].Title, "\nerror: connection reset") {
		t.Errorf("the error is not in the tooltip: %+v", tl.Bars)
	}
}

// TestExcusesAndNotesAreShown checks that the page lists what each verdict
// let through (a kill that may have ended c1's hold, an unknown outcome it
// excuses), linked to the operations, and what an import did.
func TestExcusesAndNotesAreShown(t *testing.T) {
	p := render(t, "02-kill-holder.jsonl", func(cx *Counterexample) {
		cx.Notes = []string{"2 ops have a :time earlier than the op written before them"}
	})
	ex := element(t, p, "excuses")
	for _, want := range []string{"<strong>slot-exclusive</strong>", "excused only because kill c1", `href="#op-5"`, "<strong>available</strong>", "an unknown outcome, excused by kill c1"} {
		if !strings.Contains(ex, want) {
			t.Errorf("excuses lack %q:\n%s", want, ex)
		}
	}
	if notes := element(t, p, "notes"); !strings.Contains(notes, "2 ops have a :time earlier") {
		t.Errorf("notes: %s", notes)
	}
	if p := render(t, "01-turns.jsonl", nil); strings.Contains(p, `id="excuses"`) || strings.Contains(p, `id="notes"`) {
		t.Error("a history with nothing excused and no import shows excuses or notes")
	}
}
