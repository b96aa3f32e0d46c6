package prover

import (
	"io"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
)

type briefPlan struct{ JudgedBy }

func (briefPlan) Write(io.Writer) error { return nil }
func (briefPlan) Brief() string         { return "a plan" }

// A counterexample's summary lists every failed verdict, and marks those
// of properties the search was not asked to count (--properties), which
// neither the headline nor the exit status follow.
func TestSummaryMarksUncountedFailures(t *testing.T) {
	rep := &verdict.Report{Verdicts: []verdict.Verdict{
		{Property: "lease-exclusive", Status: verdict.Fail, Detail: "two holders"},
		{Property: "no-revival", Status: verdict.Fail, Detail: "a refresh revived"},
		{Property: "available", Status: verdict.Pass},
	}}
	cx := &Counterexample{Plan: &briefPlan{}, Report: rep, Property: "lease-exclusive", counted: []string{"lease-exclusive", "available"}}
	got := cx.Summary()
	for _, want := range []string{
		"lease-exclusive violated\n",
		"lease-exclusive FAIL: two holders\n",
		"no-revival FAIL (not counted: not among the properties asked for): a refresh revived\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	cx.counted = nil
	if got := cx.Summary(); !strings.Contains(got, "no-revival FAIL: a refresh revived\n") {
		t.Errorf("with every property counted, no-revival is marked:\n%s", got)
	}
}
