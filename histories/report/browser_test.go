package report_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/report"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
)

// browser starts one headless Chromium for a test, or skips the test
// saying how to install one.
func browser(t *testing.T) context.Context {
	quick.Skip(t, "Chromium")
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no Chromium on PATH: install it (Debian: apt-get install -y chromium) to render the report in a browser")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1400, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts it
		t.Fatalf("starting %s: %v", bin, err)
	}
	return ctx
}

// dom is what the page shows once a browser has rendered it.
type dom struct {
	Title, Headline, Where, Explanation, Replay, Porcupine string
	Refs                                                   []string
	Faults                                                 []faultBox
	Ops                                                    []opBox
	RowHeight                                              float64
}

type faultBox struct {
	ID, Label  string
	Named      bool
	X, W, H    float64
	Fill       string
	LabelWidth float64
}

type opBox struct {
	ID, Class, Label     string
	Row                  string // the process name beside it
	X, W, TextW          float64
	Stroke, StrokeWidth  string
	LabelInside, Visible bool
}

const collect = `(() => {
  const q = s => document.querySelector(s);
  const text = s => q(s) ? q(s).innerText : "";
  const box = el => el.getBoundingClientRect();
  const names = [...document.querySelectorAll("text.name")].map(n => ({name: n.textContent, y: box(n).top + box(n).height / 2}));
  return {
    Title: document.title,
    Headline: text("#headline"),
    Where: text("#where"),
    Explanation: text("#explanation"),
    Replay: text("#replay"),
    Porcupine: q("#porcupine") ? q("#porcupine").href : "",
    Refs: [...document.querySelectorAll("#explanation a.ref")].map(a => a.dataset.ref),
    Faults: [...document.querySelectorAll("g.fault")].map(g => {
      const r = g.querySelector("rect"), b = box(r);
      return {ID: g.id, Label: g.querySelector("text").textContent, Named: g.classList.contains("named"),
        X: b.x, W: b.width, H: b.height, Fill: getComputedStyle(r).fill,
        LabelWidth: g.querySelector("text").getComputedTextLength()};
    }),
    Ops: [...document.querySelectorAll("g.op")].map(g => {
      const r = g.querySelector("rect"), t = g.querySelector("text"), b = box(r), tb = box(t);
      const row = names.find(n => n.y >= b.top && n.y <= b.bottom);
      return {ID: g.id, Class: g.getAttribute("class"), Label: t.textContent, Row: row ? row.name : "", X: b.x, W: b.width,
        TextW: t.getComputedTextLength(), Stroke: getComputedStyle(r).stroke, StrokeWidth: getComputedStyle(r).strokeWidth,
        LabelInside: tb.left >= b.left && tb.right <= b.right, Visible: b.width > 0 && b.height > 0};
    }),
    RowHeight: (() => { const s = q("rect.stripe"); return s ? box(s).height : 0; })(),
  };
})()`

// load opens path in ctx's browser and returns what it rendered, failing
// the test on a script error or on any request for something other than
// the page itself.
func load(t *testing.T, ctx context.Context, path string) dom {
	t.Helper()
	var mu sync.Mutex
	var requests, errs []string
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := chromedp.Listen(lctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			errs = append(errs, fmt.Sprintf("%s (line %d)", ev.ExceptionDetails.Text, ev.ExceptionDetails.LineNumber))
		}
	})
	if err != nil {
		t.Fatalf("starting the browser: %v", err)
	}
	url := "file://" + path
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("rendering %s: %v", path, err)
	}
	d, err := chromedp.Run(ctx, chromedp.Evaluate[dom](collect))
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range requests {
		if r != url {
			t.Errorf("the page asked for %s", r)
		}
	}
	if len(errs) > 0 {
		t.Errorf("script errors: %v", errs)
	}
	return d
}

// silentReconnect replays a real counterexample (mutant silent-reconnect,
// found by prove --seed 1 and shrunk: a kill, a force-close, and c2
// verifying a slot that c1 has since taken and released) and writes it
// into a fresh directory as prove would.
func silentReconnect(t *testing.T) (*prover.Counterexample, *verdict.Verdict, string) {
	t.Helper()
	p, err := amqprun.ReadPlan(filepath.Join("testdata", "silent-reconnect.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := amqprun.Simulator{}.Run(context.Background(), p, amqprun.ImplFor(p))
	if err != nil {
		t.Fatal(err)
	}
	cx := &prover.Counterexample{Plan: p, Result: res, Report: prover.Judge(res, model.Options{}), Impl: "mutant " + p.Mutant}
	var v *verdict.Verdict
	for i, vd := range cx.Report.Verdicts {
		if vd.Status == verdict.Fail && v == nil {
			v, cx.Property = &cx.Report.Verdicts[i], vd.Property
		}
	}
	if v == nil || v.Property != model.SlotExclusive || len(v.Ops) < 2 {
		t.Fatalf("the plan no longer breaks slot-exclusive with an explanation naming two operations: %+v", cx.Report.Verdicts)
	}
	dir := t.TempDir()
	if err := cx.Write(dir); err != nil {
		t.Fatal(err)
	}
	return cx, v, dir
}

// Every counterexample prove writes has its report, beside porcupine's
// timeline.
func TestCounterexampleHasReport(t *testing.T) {
	_, v, dir := silentReconnect(t)
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<h1 id="headline">slot-exclusive violated</h1>`, `href="history.html"`, `id="op-` + fmt.Sprint(v.Ops[0]) + `"`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "history.html")); err != nil {
		t.Error(err)
	}
}

// A real counterexample (mutant silent-reconnect, found by prove --seed 1
// and shrunk: a kill, a force-close, and c2 verifying a slot c1 had since
// taken and released) renders in Chromium as the report promises: the
// title, the violated property and its explanation, a mark for each fault,
// and the operations the explanation names highlighted. Then a history
// with a pause: the pause's window covers what happened during it.
func TestReportInABrowser(t *testing.T) {
	ctx := browser(t)
	start := time.Now()
	cx, v, dir := silentReconnect(t)
	res := cx.Result
	d := load(t, ctx, filepath.Join(dir, "index.html"))

	where := fmt.Sprintf("semaphore %q, slot %d", res.Evidence.Lock, v.Slot)
	if want := "lockprover: slot-exclusive violated in " + where; d.Title != want {
		t.Errorf("title %q, want %q", d.Title, want)
	}
	if d.Headline != "slot-exclusive violated" || d.Where != "in "+where {
		t.Errorf("headline %q %q, want slot-exclusive violated in %s", d.Headline, d.Where, where)
	}
	if d.Explanation != v.Detail {
		t.Errorf("explanation %q, want lockprover's %q", d.Explanation, v.Detail)
	}
	if want := "lockprover replay " + filepath.Join(dir, "plan.json"); d.Replay != want {
		t.Errorf("replay %q, want %q", d.Replay, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.html")); err != nil || d.Porcupine != "file://"+filepath.Join(dir, "history.html") {
		t.Errorf("porcupine's timeline: link %q (%v)", d.Porcupine, err)
	}

	// A mark for every fault the history records, labelled with what it
	// was and whom it struck, shaded over its process's row.
	var faults []string
	for _, e := range res.History {
		if e.Process == "nemesis" && e.Type == histories.Invoke {
			faults = append(faults, fmt.Sprintf("op-%d #%d %s %s", e.Index, e.Index, e.F, histories.FaultOf(&e).Process))
		}
	}
	var marked []string
	for _, f := range d.Faults {
		marked = append(marked, f.ID+" "+f.Label)
		if f.W <= 0 || f.H < d.RowHeight || f.Fill == "none" || f.Fill == "rgba(0, 0, 0, 0)" {
			t.Errorf("fault %s is not shaded over its row: %+v (row %v)", f.ID, f, d.RowHeight)
		}
	}
	if len(faults) < 2 || !slices.Equal(marked, faults) {
		t.Errorf("faults marked %q, want %q", marked, faults)
	}

	// The operations the explanation names are highlighted, the one that
	// cannot happen apart from those it cites, and their numbers in the
	// explanation link to them.
	want := map[string]string{}
	for i, n := range v.Ops {
		want[fmt.Sprintf("op-%d", n)] = map[bool]string{true: "culprit", false: "cited"}[i == 0]
	}
	styles := map[string]string{}
	process := map[string]string{}
	for _, e := range res.History {
		process[fmt.Sprintf("op-%d", e.Index)] = e.Process
	}
	for _, o := range d.Ops {
		if o.Row != process[o.ID] {
			t.Errorf("%s (%s) is on the row of %q, not %q", o.ID, o.Label, o.Row, process[o.ID])
		}
		if !o.Visible || !o.LabelInside || o.TextW > o.W {
			t.Errorf("%s: its label %q (%.0f px) does not fit its bar (%.0f px)", o.ID, o.Label, o.TextW, o.W)
		}
		kind := "plain"
		for _, k := range []string{"culprit", "cited"} {
			if strings.Contains(o.Class, k) {
				kind = k
			}
		}
		if want[o.ID] != "" && want[o.ID] != kind || want[o.ID] == "" && kind != "plain" {
			t.Errorf("%s (%s) is drawn %s, want %s", o.ID, o.Label, kind, cmp.Or(want[o.ID], "plain"))
		}
		styles[kind] = o.Stroke + " " + o.StrokeWidth
	}
	if styles["culprit"] == styles["plain"] || styles["cited"] == styles["plain"] || styles["culprit"] == styles["cited"] {
		t.Errorf("highlighted operations do not look different: %v", styles)
	}
	var refs []string
	for _, n := range v.Ops {
		refs = append(refs, fmt.Sprintf("op-%d", n))
	}
	if !slices.Equal(d.Refs, refs) {
		t.Errorf("explanation links to %v, want %v", d.Refs, refs)
	}
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const a = document.querySelector("#explanation a.ref");
		a.dispatchEvent(new MouseEvent("mouseenter")); return document.getElementById(a.dataset.ref).classList.contains("focus"); })()`))
	if err != nil || !focused {
		t.Errorf("hovering over an operation number does not outline its bar (%v)", err)
	}

	// A pause: its window, labelled with its length, covers the acquire
	// that c2 made while c1 was paused.
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "24-zombie-verifies-held.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r := model.Check(h, model.Options{})
	var b bytes.Buffer
	if err := report.Write(&b, report.Counterexample{Property: model.SlotExclusive, Lock: "sem", Verdicts: r.Verdicts, History: h}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "pause.html")
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	d = load(t, ctx, page)
	i := slices.IndexFunc(d.Ops, func(o opBox) bool { return o.ID == "op-6" })
	if len(d.Faults) != 1 || i < 0 {
		t.Fatalf("want one fault and c2's acquire #6, got %+v", d)
	}
	f, acq := d.Faults[0], d.Ops[i]
	if f.Label != "#4 pause c1 30s, until resume #8" || f.X > acq.X || f.X+f.W < acq.X+acq.W {
		t.Errorf("the pause (%q, %.0f+%.0f px) does not cover c2's acquire (%.0f+%.0f px)", f.Label, f.X, f.W, acq.X, acq.W)
	}
	t.Logf("rendered two reports in %v", time.Since(start).Round(time.Millisecond))
}
