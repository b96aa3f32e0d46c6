package amqprun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
)

const goodPlan = `{
  "version": 1,
  "kind": "semaphore",
  "lock": "lp",
  "slots": 1,
  "options": {"heartbeat_ms": 0},
  "clients": [[{"op": "acquire"}]],
  "admins": [[]],
  "nemesis": null,
  "schedule": [],
  "schedule_seed": 3
}`

// Plan files are read as strictly as histories: every error names the
// file, the line and column, and the field.
func TestReadPlanStrictly(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "empty.json: empty file"},
		{"blank", " \n\n", "blank.json: empty file"},
		{"not JSON", "{\n  \"version\": 1,\n  kind: 2\n}", "not-JSON.json:3:3: not JSON: invalid character 'k'"},
		{"cut short", "{\n  \"version\": 1,", "cut-short.json:2:16: not JSON: the text ends in the middle of a value"},
		{"array", "[1, 2]", "array.json:1:1: the plan: want an object, got an array"},
		{"wrong type", strings.Replace(goodPlan, `"slots": 1`, `"slots": "one"`, 1), `wrong-type.json:5:12: slots: want an integer, got the string "one"`},
		{"wrong nested type", strings.Replace(goodPlan, `{"op": "acquire"}`, `{"op": 7}`, 1), "wrong-nested-type.json:7:23: clients[0][0].op: want a string, got the number 7"},
		{"fraction", strings.Replace(goodPlan, `"slots": 1`, `"slots": 1.5`, 1), "fraction.json:5:12: slots: want an integer of at most 64 bits, got the number 1.5"},
		{"unknown field", strings.Replace(goodPlan, `"slots": 1`, `"slot": 1`, 1), "unknown-field.json:5:3: slot: unknown field (want one of admins, clients,"},
		{"wrong case", strings.Replace(goodPlan, `"lock": "lp"`, `"lock": "lp", "MUTANT": "trust-scan"`, 1), `wrong-case.json:4:17: MUTANT: unknown field (field names are case-sensitive: did you mean "mutant"?)`},
		{"wrong case nested", strings.Replace(goodPlan, `"heartbeat_ms"`, `"Heartbeat_Ms"`, 1), `wrong-case-nested.json:6:15: options.Heartbeat_Ms: unknown field (field names are case-sensitive: did you mean "heartbeat_ms"?)`},
		{"optional wrong type", strings.Replace(goodPlan, `"heartbeat_ms": 0`, `"heartbeat_ms": "10s"`, 1), `optional-wrong-type.json:6:31: options.heartbeat_ms: want an integer, got the string "10s"`},
		{"twice", strings.Replace(goodPlan, `"lock": "lp"`, `"lock": "lp", "lock": "lq"`, 1), "twice.json:4:17: lock: the field appears twice"},
		{"two values", goodPlan + "\n{}", "two-values.json:13:1: more than one JSON value"},
		{"bad value", strings.Replace(goodPlan, `"nemesis": null`, `"nemesis": [{"at_ms": 5, "fault": "kill", "target": "c7"}]`, 1), `bad-value.json:9:55: nemesis[0].target: no process named "c7" in this plan`},
		{"bad step", strings.Replace(goodPlan, `{"op": "acquire"}`, `{"op": "grab"}`, 1), `bad-step.json:7:23: clients[0][0].op: want acquire, verify, release or sleep, got "grab"`},
		{"missing field", strings.Replace(goodPlan, `"lock": "lp",`, ``, 1), "missing-field.json: lock: missing"},
		{"node not a string", strings.Replace(goodPlan, `"slots": 1,`, `"slots": 1, "cluster": ["n1"], "nodes": {"c1": 1},`, 1), "node-not-a-string.json:5:50: nodes.c1: want a string, got the number 1"},
		{"node twice", strings.Replace(goodPlan, `"slots": 1,`, `"slots": 1, "cluster": ["n1"], "nodes": {"c1": "n1", "c1": "n1"},`, 1), "node-twice.json:5:56: nodes.c1: the field appears twice"},
		{"nodes not an object", strings.Replace(goodPlan, `"slots": 1,`, `"slots": 1, "cluster": ["n1"], "nodes": ["n1"],`, 1), "nodes-not-an-object.json:5:43: nodes: want an object, got an array"},
		{"bad model", strings.Replace(goodPlan, `"slots": 1,`, `"slots": 1, "model": "lenient",`, 1), `bad-model.json:5:24: model: want "standard" or "strict", got "lenient"`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPlan(path)
		if err == nil {
			t.Errorf("%s: read without an error", tc.name)
			continue
		}
		got := strings.TrimPrefix(err.Error(), dir+string(filepath.Separator))
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s...", tc.name, got, tc.want)
		}
	}
}

// Plans written before model and properties were recorded still read; the
// new fields round-trip.
func TestReadPlanOldAndNew(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	os.WriteFile(old, []byte(goodPlan), 0o644)
	p, err := ReadPlan(old)
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "" || p.Properties != nil {
		t.Errorf("an old plan has model %q and properties %v", p.Model, p.Properties)
	}
	p.Model, p.Properties = "strict", []string{"acquire-exact"}
	var b strings.Builder
	p.Write(&b)
	again, err := ParsePlan("new.json", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if again.Model != "strict" || len(again.Properties) != 1 || again.Properties[0] != "acquire-exact" {
		t.Errorf("read back model %q, properties %v", again.Model, again.Properties)
	}
}

// A version 1 plan reads as the version 2 plan that runs the same way:
// its heartbeat_ms 0 (the reference's default) becomes absent and -1
// (none) becomes 0, as the CLI and the process protocol say them; the
// simulator gives both the same history, byte for byte. Version 2 refuses
// version 1's -1.
func TestVersion1PlansReadAsVersion2(t *testing.T) {
	plan := func(version int, hb string) string {
		s := strings.Replace(goodPlan, `"version": 1`, fmt.Sprintf(`"version": %d`, version), 1)
		s = strings.Replace(s, `"heartbeat_ms": 0`, hb, 1)
		// A client killed at once: whether anyone notices depends on the heartbeat.
		return strings.Replace(s, `"nemesis": null`, `"nemesis": [{"at_ms": 0, "after_calls": 8, "fault": "partition", "target": "c1"}]`, 1)
	}
	history := func(text string) string {
		p, err := ParsePlan("p.json", []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		res, err := Simulator{}.Run(context.Background(), p, ImplFor(p))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		histories.Write(&b, res.History)
		return b.String()
	}
	for _, tc := range []struct {
		v1, v2 string
		want   time.Duration
	}{
		{`"heartbeat_ms": 0`, `"heartbeat_ms": 10000`, 10 * time.Second},
		{`"heartbeat_ms": 0`, ``, 10 * time.Second},
		{`"heartbeat_ms": -1`, `"heartbeat_ms": 0`, 0},
		{`"heartbeat_ms": 1500`, `"heartbeat_ms": 1500`, 1500 * time.Millisecond},
	} {
		old, now := plan(1, tc.v1), plan(2, tc.v2)
		p, err := ParsePlan("old.json", []byte(old))
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != 2 || p.Options.Heartbeat() != tc.want {
			t.Errorf("version 1 %s: read as version %d, heartbeat %v; want version 2, %v", tc.v1, p.Version, p.Options.Heartbeat(), tc.want)
		}
		if history(old) != history(now) {
			t.Errorf("version 1 %s and version 2 %s give different histories", tc.v1, tc.v2)
		}
	}
	if hb := history(plan(2, `"heartbeat_ms": 0`)); hb == history(plan(2, ``)) {
		t.Errorf("heartbeats off and the default give the same history: the plan does not tell them apart")
	}
	_, err := ParsePlan("minus.json", []byte(plan(2, `"heartbeat_ms": -1`)))
	if err == nil || !strings.Contains(err.Error(), "options.heartbeat_ms: want 0 (propose none) or more, got -1") {
		t.Errorf("version 2 with heartbeat_ms -1: %v", err)
	}
}
