package familytest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/cmd/lockprover/cli"
	// Jepsen's lock histories are true mutexes, a kind amqp-locks' checker
	// declares (histories.DeclareKind): a program that reads them links it.
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/quick"
	_ "github.com/lockprover/lockprover/model/amqpcheck"
)

// lockprover runs the command line, with only the toy family registered.
func lockprover(args ...string) (int, string, string) {
	var out, errOut strings.Builder
	code := cli.Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// must runs the command line, failing the test unless it exits want, and
// returns what it printed.
func must(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errOut := lockprover(args...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
	}
	return out + errOut
}

// A family the project never heard of, registered in this test package
// alone, goes through prove, replay, check, mutants (list and --detect),
// explore, the report page and --json/--junit with no edit to any shared
// file: every verb asks the registry.
func TestThirdFamilyThroughTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	if out := must(t, 0, "prove", "--kind", "toy-lock", "--runs", "300", "--seed", "1"); !strings.Contains(out, "proving the reference on the toy's simulator") || !strings.Contains(out, "every property held") {
		t.Errorf("prove:\n%s", out)
	}
	cx, sum, junit := filepath.Join(dir, "cx"), filepath.Join(dir, "run.json"), filepath.Join(dir, "run.xml")
	out := must(t, 1, "prove", "--kind", "toy-lock", "--mutant", "takes-held", "--runs", "300", "--seed", "1", "--out", cx, "--json", sum, "--junit", junit)
	if !strings.Contains(out, "toy-exclusive violated") || !strings.Contains(out, "replay: lockprover replay") {
		t.Errorf("prove --mutant:\n%s", out)
	}
	for _, f := range []string{"plan.json", "history.jsonl", "summary.txt", "index.html"} {
		if fi, err := os.Stat(filepath.Join(cx, f)); err != nil || fi.Size() == 0 {
			t.Errorf("counterexample %s: %v", f, err)
		}
	}
	// The toy's checker runs no linearizability check: no porcupine
	// timeline, and no link to an empty page.
	if _, err := os.Stat(filepath.Join(cx, "history.html")); err == nil {
		t.Errorf("an empty history.html was written")
	}
	if page, _ := os.ReadFile(filepath.Join(cx, "index.html")); strings.Contains(string(page), "history.html") {
		t.Errorf("index.html links history.html, which was not written")
	}
	var s struct {
		Result     string `json:"result"`
		Properties []struct {
			Name string `json:"name"`
			Fail int    `json:"fail"`
		} `json:"properties"`
	}
	data, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil || s.Result != "violated" || len(s.Properties) != 1 || s.Properties[0].Name != "toy-exclusive" || s.Properties[0].Fail != 1 {
		t.Errorf("--json: %v %s", err, data)
	}
	if x, err := os.ReadFile(junit); err != nil || !strings.Contains(string(x), "toy-exclusive") {
		t.Errorf("--junit: %v %s", err, x)
	}
	if out := must(t, 1, "replay", filepath.Join(cx, "plan.json")); !strings.Contains(out, "toy-exclusive") || !strings.Contains(out, "FAIL") {
		t.Errorf("replay:\n%s", out)
	}
	must(t, 0, "replay", "--mutant", "reference", filepath.Join(cx, "plan.json"))
	if out := must(t, 1, "check", filepath.Join(cx, "history.jsonl")); !strings.Contains(out, "toy-exclusive") {
		t.Errorf("check:\n%s", out)
	}
	if out := must(t, 0, "mutants", "--kind", "toy-lock", "-v"); !strings.Contains(out, "takes-held") || !strings.Contains(out, "take never looks at the holder") {
		t.Errorf("mutants:\n%s", out)
	}
	if out := must(t, 0, "mutants", "--kind", "toy-lock", "--detect", "3"); !strings.Contains(out, "| takes-held | toy-exclusive | 3/3 |") {
		t.Errorf("mutants --detect:\n%s", out)
	}
	if out := must(t, 0, "explore", "--kind", "toy-lock", "--plans", "100", "--out", filepath.Join(dir, "explore")); !strings.Contains(out, "| the toy | holds (100 plans) |") || !strings.Contains(out, "| takes-held | **toy-exclusive**") {
		t.Errorf("explore:\n%s", out)
	}
	// What the toy does not bring is refused by name, as any family's.
	if out := must(t, 2, "bench", "--kind", "toy-lock"); !strings.Contains(out, "--kind must be") {
		t.Errorf("bench:\n%s", out)
	}
	if out := must(t, 2, "prove", "--kind", "toy-lock", "--target", "rabbitmq"); !strings.Contains(out, "--target must be sim") {
		t.Errorf("a target no family has:\n%s", out)
	}
}

// TestMain lets this test binary be the toy's lockprover: run with
// LOCKPROVER_TOY=1 it is the command line, with only the toy registered,
// so that `serve-reference --kind toy-lock` serves the toy's reference
// over the protocol as a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("LOCKPROVER_TOY") == "1" {
		os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The toy family goes through the process protocol with nothing but its
// descriptor and the generic launcher: its reference served over the
// protocol (serve-reference), validate-impl passing it and failing its
// mutant, and prove --impl proving one and catching the other, with the
// report page, --json and --junit; replay --impl runs the counterexample
// again.
func TestThirdFamilyThroughTheProtocol(t *testing.T) {
	quick.Skip(t, "processes over the protocol")
	dir := t.TempDir()
	serve := "LOCKPROVER_TOY=1 " + family.Quote(os.Args[0]) + " serve-reference --kind toy-lock"
	broken := serve + " --mutant takes-held"
	if out := must(t, 0, "validate-impl", "--kind", "toy-lock", "--impl", serve); !strings.Contains(out, "ok    c2: take -> take_fail {reason:\"held\"}") || !strings.Contains(out, "the implementation follows the protocol") {
		t.Errorf("validate-impl of the toy's reference:\n%s", out)
	}
	if out := must(t, 1, "validate-impl", "--kind", "toy-lock", "--impl", broken); !strings.Contains(out, "FAIL  c2: take -> take_fail {reason:\"held\"}") || !strings.Contains(out, "a lock another client holds is not taken") {
		t.Errorf("validate-impl of the toy's mutant:\n%s", out)
	}
	if out := must(t, 0, "prove", "--kind", "toy-lock", "--impl", serve, "--runs", "30", "--seed", "1"); !strings.Contains(out, "every property held") {
		t.Errorf("prove --impl of the toy's reference:\n%s", out)
	}
	cx, sum, junit := filepath.Join(dir, "cx"), filepath.Join(dir, "run.json"), filepath.Join(dir, "run.xml")
	out := must(t, 1, "prove", "--kind", "toy-lock", "--impl", broken, "--runs", "100", "--seed", "1", "--shrink-time", "10s", "--out", cx, "--json", sum, "--junit", junit)
	if !strings.Contains(out, "toy-exclusive violated") || !strings.Contains(out, "replay: lockprover replay --impl") {
		t.Errorf("prove --impl of the toy's mutant:\n%s", out)
	}
	if page, err := os.ReadFile(filepath.Join(cx, "index.html")); err != nil || !strings.Contains(string(page), "toy-exclusive") {
		t.Errorf("the report page: %v", err)
	}
	var s struct {
		Result         string `json:"result"`
		Implementation string `json:"implementation"`
	}
	if data, err := os.ReadFile(sum); err != nil || json.Unmarshal(data, &s) != nil || s.Result != "violated" || !strings.Contains(s.Implementation, "takes-held") {
		t.Errorf("--json: %v %+v", err, s)
	}
	if x, err := os.ReadFile(junit); err != nil || !strings.Contains(string(x), "toy-exclusive") {
		t.Errorf("--junit: %v %s", err, x)
	}
	if out := must(t, 1, "replay", "--impl", broken, filepath.Join(cx, "plan.json")); !strings.Contains(out, "toy-exclusive") {
		t.Errorf("replay --impl:\n%s", out)
	}
	must(t, 0, "replay", "--impl", serve, filepath.Join(cx, "plan.json"))
	// What the protocol's transport refuses, the toy's server refuses too.
	if out := must(t, 2, "serve-reference", "--kind", "toy-lock", "--mutant", "nonesuch"); !strings.Contains(out, `no toy mutant named "nonesuch"`) {
		t.Errorf("serve-reference --mutant nonesuch:\n%s", out)
	}
}

// check's flags beyond every family's are the families' (family.Flag with
// the Check verb): the toy's reach its checker (Judging), their bad values
// are refused in the toy's words (CheckFlags.Check), and --toy-lens judges
// a Jepsen history through the toy's lens (CheckFlags.Lens); the lease
// families' --drift and --lease-ttl, not linked in here, are no flags of
// check's at all.
func TestCheckTakesTheFamiliesFlags(t *testing.T) {
	h := filepath.Join(t.TempDir(), "toy.jsonl")
	lines := `{"index":0,"time":1000,"process":"c1","type":"invoke","f":"take","lock":"toy","kind":"toy-lock"}
{"index":1,"time":2000,"process":"c1","type":"ok","f":"take","lock":"toy","kind":"toy-lock"}
`
	if err := os.WriteFile(h, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := must(t, 0, "check", "--toy-grace", "3", h); !strings.Contains(out, "judged with grace 3") {
		t.Errorf("--toy-grace does not reach the toy's checker:\n%s", out)
	}
	if out := must(t, 2, "check", "--toy-grace", "x", h); !strings.Contains(out, `check: --toy-grace must be a whole number, not "x"`) {
		t.Errorf("a bad --toy-grace:\n%s", out)
	}
	for _, lease := range []string{"--drift", "--lease-ttl"} {
		if out := must(t, 2, "check", lease, "1", h); !strings.Contains(out, "flag provided but not defined: "+strings.TrimPrefix(lease, "-")) {
			t.Errorf("check takes %s with no lease family linked in:\n%s", lease, out)
		}
	}
	if out := must(t, 0, "check", "-h"); !strings.Contains(out, "\n  --toy-grace ") || !strings.Contains(out, "\n  --toy-lens ") || strings.Contains(out, "\n  --drift ") {
		t.Errorf("check's usage does not list the toy's flags alone:\n%s", out)
	}
	jepsen := filepath.Join("..", "..", "..", "testdata", "histories", "90-jepsen-partition-double-hold.edn")
	out := must(t, 1, "check", "--toy-lens", jepsen)
	for _, want := range []string{"(Jepsen EDN, judged through the toy lens;", "note: seen as the toy lock", "p1 took the lock p3 held"} {
		if !strings.Contains(out, want) {
			t.Errorf("check --toy-lens lacks %q:\n%s", want, out)
		}
	}
	if out := must(t, 2, "check", "--toy-lens", h); !strings.Contains(out, "--toy-lens judges Jepsen histories") {
		t.Errorf("--toy-lens on lockprover's own JSON lines:\n%s", out)
	}
}
