package results

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// shard is a held shard i of n of a search of total plans in batches of
// 10 on the simulator: the batches i-1, i-1+n, ... below total.
func shard(i, n, total int) *Summary {
	s := &Summary{Schema: Schema, Verb: "prove", Target: "sim", Implementation: "the reference", Seed: "7",
		Shard: &Shard{Index: i, Count: n}, Config: map[string]string{"runs": "35", "faults": "all"},
		Result: Held, RequestedPlans: total, BatchSize: 10,
		Timings: Timings{Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ElapsedSeconds: 1}}
	for b := i - 1; b*10 < total; b += n {
		p := min(10, total-b*10)
		s.Batches = append(s.Batches, Batch{Number: b, Plans: p, Digest: "d"})
		s.Plans += p
	}
	s.Properties = []Property{{Name: "slot-exclusive", Status: Pass, Counted: true, Pass: s.Plans}}
	s.ExitCode = ExitCode(s.Result)
	return s
}

func named(ss ...*Summary) []Named {
	var in []Named
	for i, s := range ss {
		in = append(in, Named{File: filepath.Join("shard"+string(rune('a'+i)), "results.json"), Summary: s})
	}
	return in
}

func TestJSONRoundTrip(t *testing.T) {
	s := shard(2, 3, 35)
	s.Counterexample = &Counterexample{Property: "slot-exclusive", Explanation: "two holders", Plan: "out/plan.json", Batch: 1, Index: 4}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := s.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, s)
	}
}

// A file that is not a summary, or one of another format, is named with
// its field.
func TestReadJSONRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"plan", `{"version":1,"lock":"lp"}`, "no \"schema\" field"},
		{"other-version", `{"schema":"lockprover-results/1","verb":"prove","verdict":"held"}`, `field schema is "lockprover-results/1"`},
		{"unknown-field", `{"schema":"lockprover-results/2","verb":"prove","result":"held","exit_code":0,"plnas":3}`, `unknown field "plnas"`},
		{"no-result", `{"schema":"lockprover-results/2","verb":"prove","exit_code":0}`, "field result is missing"},
		{"wrong-exit", `{"schema":"lockprover-results/2","verb":"prove","result":"violated","exit_code":0}`, "field exit_code"},
		{"bad-shard", `{"schema":"lockprover-results/2","verb":"prove","result":"held","exit_code":0,"shard":{"index":4,"count":3}}`, "field shard"},
		{"not-json", `{"schema":`, "not JSON"},
		{"two-values", `{"schema":"lockprover-results/2","verb":"prove","result":"held","exit_code":0} {}`, "after top-level value"},
	} {
		path := filepath.Join(dir, tc.name+".json")
		os.WriteFile(path, []byte(tc.body), 0o644)
		_, err := ReadJSON(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming %s and %q", tc.name, err, path, tc.want)
		}
	}
	_, err := ReadJSON(filepath.Join(dir, "plan.json"))
	if !errors.Is(err, ErrNotSummary) {
		t.Errorf("a plan: %v, want ErrNotSummary", err)
	}
}

// Every shape of JUnit output lockprover writes validates against the
// JUnit schema (testdata/junit.xsd), and the schema does refuse what CI
// systems would not read.
func TestJUnitValidates(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint is not installed (Debian: apt-get install libxml2-utils; .ci/run installs it): the JUnit output is not validated")
	}
	dir := t.TempDir()
	validate := func(path string) error {
		out, err := exec.Command(xmllint, "--noout", "--schema", filepath.Join("testdata", "junit.xsd"), path).CombinedOutput()
		if err != nil {
			return errors.New(string(out))
		}
		return nil
	}
	held := shard(1, 1, 35)
	violated := shard(1, 2, 35)
	violated.Result, violated.ExitCode = Violated, 1
	violated.Properties = append(violated.Properties, Property{Name: "no-leak", Status: Fail, Counted: true, Fail: 1, Explanation: "queue lp.a.3 left <behind> & \"more\"]]>"},
		Property{Name: "cheap-verify", Status: Fail, Counted: false, Fail: 2}, Property{Name: "available", Status: Undecided, Counted: true, Inconclusive: 1})
	violated.Counterexample = &Counterexample{Property: "no-leak", Explanation: "queue lp.a.3 left behind\nsecond line", Dir: "out", Plan: "out/plan.json", Replay: "lockprover replay out/plan.json"}
	check := &Summary{Verb: "check", Result: Violated, Histories: []History{
		{File: "a.jsonl", Format: "jsonl", Result: Violated, Properties: []Property{{Name: "slot-exclusive", Status: Fail, Counted: true, Fail: 1, Explanation: "two holders", Where: "a.jsonl lock sem"}}},
		{File: "b.edn", Format: "jepsen-edn", Result: Held, Properties: []Property{{Name: "no-leak", Status: NotJudged, Counted: true, NotJudged: 1}}},
	}}
	mutants := &Summary{Verb: "mutants", Result: Violated, Mutants: []Mutant{
		{Name: "trust-scan", Property: "slot-exclusive", Seeds: 3, Caught: 3, MedianPlans: 3},
		{Name: "verify-passive", Property: "cheap-verify", Seeds: 3, Caught: 1},
		{Name: "no-admin-mutex", Property: "count-exact", Seeds: 3, Caught: 2, Inconclusive: 1},
	}}
	interrupted := &Summary{Verb: "prove", Result: Interrupted, Plans: 12}
	failed := &Summary{Verb: "replay", Result: Failed, Error: "a plan could not run: boom"}
	for name, s := range map[string]*Summary{"held": held, "violated": violated, "check": check, "mutants": mutants, "interrupted": interrupted, "failed": failed} {
		path := filepath.Join(dir, name+".xml")
		if err := s.WriteJUnit(path, "what it printed\n<&>]]> and more"); err != nil {
			t.Fatal(err)
		}
		if err := validate(path); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		data, _ := os.ReadFile(path)
		text := string(data)
		switch name {
		case "violated":
			for _, want := range []string{`<failure message="queue lp.a.3 left` /* the property's own explanation */, "replay: lockprover replay out/plan.json", `failures="1"`, `errors="1"`, `skipped="1"`} {
				if !strings.Contains(text, want) {
					t.Errorf("%s lacks %q:\n%s", name, want, text)
				}
			}
		case "check":
			if strings.Count(text, "<testsuite ") != 2 || !strings.Contains(text, "a.jsonl lock sem: two holders") {
				t.Errorf("check: want a suite per file, the failure with its lock:\n%s", text)
			}
		case "mutants":
			if !strings.Contains(text, `name="verify-passive caught by cheap-verify"`) || strings.Count(text, "<failure") != 1 || strings.Count(text, "<error") != 1 {
				t.Errorf("mutants: want one failure (verify-passive) and one error (no-admin-mutex):\n%s", text)
			}
		case "interrupted", "failed":
			if !strings.Contains(text, `name="run completes"`) {
				t.Errorf("%s: no test case says the run did not complete:\n%s", name, text)
			}
		}
	}
	// The schema refuses what strict readers refuse: a suite without its
	// hostname, a time-zoned timestamp, a root with attributes.
	data, _ := os.ReadFile(filepath.Join(dir, "held.xml"))
	for what, broken := range map[string]string{
		"no hostname":          strings.Replace(string(data), ` hostname="`, ` host="`, 1),
		"zoned timestamp":      strings.Replace(string(data), `T03:04:05"`, `T03:04:05Z"`, 1),
		"root attribute":       strings.Replace(string(data), `<testsuites>`, `<testsuites tests="9">`, 1),
		"no system-out":        strings.Replace(strings.Replace(string(data), `<system-out>`, `<!--`, 1), `</system-out>`, `-->`, 1),
		"failure and error":    strings.Replace(string(data), `time="0"></testcase>`, `time="0"><failure type="x"/><error type="y"/></testcase>`, 1),
		"failure with no type": strings.Replace(string(data), `time="0"></testcase>`, `time="0"><failure message="x"/></testcase>`, 1),
	} {
		if broken == string(data) {
			t.Fatalf("%s: the output no longer has what this test breaks", what)
		}
		path := filepath.Join(dir, "broken.xml")
		os.WriteFile(path, []byte(broken), 0o644)
		if validate(path) == nil {
			t.Errorf("the schema accepts JUnit with %s", what)
		}
	}
}

func TestMergeShards(t *testing.T) {
	m, err := Merge(named(shard(2, 3, 35), shard(1, 3, 35), shard(3, 3, 35)))
	if err != nil {
		t.Fatal(err)
	}
	var batches []int
	for _, b := range m.Batches {
		batches = append(batches, b.Number)
	}
	if m.Result != Held || m.ExitCode != 0 || m.Plans != 35 || !reflect.DeepEqual(batches, []int{0, 1, 2, 3}) || len(m.Shards) != 3 || m.Properties[0].Pass != 35 {
		t.Errorf("merged: %+v", m)
	}
	// The first counterexample is the one drawn first, whichever shard
	// found it; batches after it need not have run.
	a, b, c := shard(1, 3, 35), shard(2, 3, 35), shard(3, 3, 35)
	a.Result, a.Counterexample = Violated, &Counterexample{Property: "no-leak", Batch: 3, Index: 2}
	a.Batches[1].Plans = 3
	c.Result, c.Counterexample = Violated, &Counterexample{Property: "slot-exclusive", Batch: 2, Index: 7}
	c.Batches[0].Plans = 8
	m, err = Merge(named(a, b, c))
	if err != nil {
		t.Fatal(err)
	}
	if m.Result != Violated || m.ExitCode != 1 || m.Counterexample.Property != "slot-exclusive" || m.Counterexample.Shard.Index != 3 {
		t.Errorf("merged: %s, counterexample %+v; want shard 3's slot-exclusive", m.Result, m.Counterexample)
	}
}

// Shards that do not make one search are refused, naming the file, shard
// or field.
func TestMergeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func() []*Summary
		want string
	}{
		{"missing", func() []*Summary { return []*Summary{shard(1, 3, 35), shard(3, 3, 35)} }, "shard 2/3 is missing"},
		{"twice", func() []*Summary { return []*Summary{shard(1, 2, 35), shard(1, 2, 35), shard(2, 2, 35)} }, "shard 1/2 appears twice: sharda/results.json and shardb/results.json"},
		{"seed", func() []*Summary { s := shard(2, 2, 35); s.Seed = "8"; return []*Summary{shard(1, 2, 35), s} }, "shardb/results.json: seed 8, but sharda/results.json ran seed 7"},
		{"config", func() []*Summary {
			s := shard(2, 2, 35)
			s.Config = map[string]string{"runs": "35", "faults": "kill"}
			return []*Summary{shard(1, 2, 35), s}
		}, "shardb/results.json: config --faults=kill, but sharda/results.json ran --faults=all"},
		{"count", func() []*Summary { return []*Summary{shard(1, 2, 35), shard(2, 3, 35)} }, "shardb/results.json: shard 2/3, but sharda/results.json is shard 1/2"},
		{"unsharded", func() []*Summary { s := shard(2, 2, 35); s.Shard = nil; return []*Summary{shard(1, 2, 35), s} }, "none (not sharded)"},
		{"verb", func() []*Summary { s := shard(1, 1, 35); s.Verb = "check"; return []*Summary{s} }, `verb is "check"`},
		{"error", func() []*Summary {
			s := shard(2, 2, 35)
			s.Result, s.Error = Failed, "a plan could not run"
			return []*Summary{shard(1, 2, 35), s}
		}, "shardb/results.json: shard 2/2 did not run: a plan could not run"},
		{"short batch", func() []*Summary { s := shard(2, 2, 35); s.Batches[0].Plans = 9; return []*Summary{shard(1, 2, 35), s} }, "batch 1 ran 9 plans in shard 2/2 (shardb/results.json), want 10"},
		{"missing batch", func() []*Summary {
			s := shard(2, 2, 35)
			s.Batches = s.Batches[:1]
			return []*Summary{shard(1, 2, 35), s}
		}, "batch 3 (plans 30 to 34 of seed 7) is missing: shard 2/2 (shardb/results.json) did not run it"},
		{"foreign batch", func() []*Summary {
			s := shard(2, 2, 35)
			s.Batches[0].Number = 2
			return []*Summary{shard(1, 2, 35), s}
		}, "batch 2 is not shard 2/2's"},
		{"extra batch", func() []*Summary {
			s := shard(2, 2, 35)
			s.Batches = append(s.Batches, Batch{Number: 5, Plans: 10})
			return []*Summary{shard(1, 2, 35), s}
		}, "batch 5 is past the 35 plans"},
		{"none", func() []*Summary { return nil }, "no results"},
	} {
		_, err := Merge(named(tc.in()...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
