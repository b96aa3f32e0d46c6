package prover

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/report"
)

// writeArtifacts writes plan.json, history.jsonl, history.html,
// summary.txt and index.html (the report a person reads) into dir.
func writeArtifacts(dir string, cx *Counterexample) error {
	var plan, hist, page bytes.Buffer
	if err := cx.Plan.Write(&plan); err != nil {
		return err
	}
	if err := histories.Write(&hist, cx.Result.History); err != nil {
		return err
	}
	// The timeline of the property that broke, or of slot-exclusive when
	// that one is not a linearizability check.
	r := model.Check(cx.Result.History, model.Options{Visualize: true})
	for _, prop := range []string{cx.Property, model.SlotExclusive} {
		for i := range r.Verdicts {
			v := &r.Verdicts[i]
			if v.Property != prop || v.Lock != cx.Result.Lock || page.Len() > 0 {
				continue
			}
			if _, err := v.Visualize(&page); err != nil {
				return err
			}
		}
	}
	replay := cx.Replay
	if replay == "" {
		replay = "lockprover replay " + filepath.Join(dir, "plan.json")
	}
	var index bytes.Buffer
	if err := report.Write(&index, report.Counterexample{Property: cx.Property, Lock: cx.Result.Lock,
		Verdicts: cx.Report.Verdicts, History: cx.Result.History, Plan: plan.Bytes(), Summary: cx.Summary(),
		Replay: replay, Timeline: "history.html"}); err != nil {
		return err
	}
	files := map[string][]byte{
		"index.html":    index.Bytes(),
		"plan.json":     plan.Bytes(),
		"history.jsonl": hist.Bytes(),
		"history.html":  page.Bytes(),
		"summary.txt":   []byte(cx.Summary()),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
