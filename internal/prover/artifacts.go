package prover

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/report"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// writeArtifacts writes plan.json, history.jsonl, summary.txt, index.html
// (the report a person reads) and, where a linearizability check of the
// lock gives porcupine's timeline, history.html into dir. A family whose
// checker runs no such check (lease locks sweep intervals) gets no
// history.html, and index.html links none: an empty page is no view.
func writeArtifacts(dir string, cx *Counterexample) error {
	var plan, hist, page bytes.Buffer
	if err := cx.Plan.Write(&plan); err != nil {
		return err
	}
	if err := histories.Write(&hist, cx.Result.History); err != nil {
		return err
	}
	// The timeline of the property that broke, as the run judged it; when
	// that one is not a linearizability check, the lock's first that is
	// (slot-exclusive for amqp-locks), judged again as the run judged (its
	// model and time budget) but keeping what the timeline needs.
	lock := cx.Result.Evidence.Lock
	if err := visualize(&page, cx.Report, func(v *verdict.Verdict) bool { return v.Property == cx.Property && v.Lock == lock }); err != nil {
		return err
	}
	if page.Len() == 0 {
		o := cx.judged
		o.Visualize = true
		if err := visualize(&page, model.Check(cx.Result.History, o), func(v *verdict.Verdict) bool { return v.Lock == lock }); err != nil {
			return err
		}
	}
	replay := cx.Replay
	if replay == "" {
		replay = "lockprover replay " + filepath.Join(dir, "plan.json")
	}
	timeline := "history.html"
	if page.Len() == 0 {
		timeline = ""
	}
	var index bytes.Buffer
	if err := report.Write(&index, report.Counterexample{Property: cx.Property, Lock: cx.Result.Evidence.Lock,
		Verdicts: cx.Report.Verdicts, History: cx.Result.History, Plan: plan.Bytes(), Summary: cx.Summary(),
		Replay: replay, Timeline: timeline}); err != nil {
		return err
	}
	files := map[string][]byte{
		"index.html":    index.Bytes(),
		"plan.json":     plan.Bytes(),
		"history.jsonl": hist.Bytes(),
		"summary.txt":   []byte(cx.Summary()),
	}
	if timeline != "" {
		files[timeline] = page.Bytes()
	}
	if t := cx.Result.Evidence.Trace; len(t) > 0 {
		files["trace.txt"] = []byte(strings.Join(t, "\n") + "\n")
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// visualize writes porcupine's view of the first verdict of r that which
// picks and that kept one.
func visualize(w *bytes.Buffer, r *verdict.Report, which func(*verdict.Verdict) bool) error {
	for i := range r.Verdicts {
		if v := &r.Verdicts[i]; which(v) {
			if ok, err := v.Visualize(w); ok || err != nil {
				return err
			}
		}
	}
	return nil
}
