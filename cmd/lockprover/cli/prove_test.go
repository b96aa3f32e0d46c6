package cli

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/quick"
)

func lockprover(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestProveReferenceHolds(t *testing.T) {
	code, out, errOut := lockprover("prove", "--runs", "300", "--seed", "3")
	if code != exitOK || !strings.Contains(out, "300 plans") || !strings.Contains(out, "every property held") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// A mutant is caught, written out, and its plan replays to the same
// history and the same verdict.
func TestProveMutantThenReplay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := lockprover("prove", "--runs", "500", "--seed", "1", "--mutant", "trust-scan", "--out", dir, "--shrink-time", "2s", "--timeout", "20s", "--properties", "slot-exclusive,no-leak")
	if code != exitViolation || !strings.Contains(out, "slot-exclusive violated") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"plan.json", "history.jsonl", "history.html", "summary.txt", "index.html"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The report shows the replay command prove printed, with its flags
	// (those of the check, and the properties asked for).
	_, printed, _ := strings.Cut(out, "replay: ")
	printed, _, _ = strings.Cut(printed, "\n")
	if !strings.Contains(printed, "--timeout 20s") || !strings.Contains(printed, "--properties slot-exclusive,no-leak") {
		t.Errorf("the printed replay lacks prove's --timeout or --properties: %q", printed)
	}
	if page, _ := os.ReadFile(filepath.Join(dir, "index.html")); !strings.Contains(string(page), html.EscapeString(printed)) {
		t.Errorf("index.html lacks the printed replay command %q", printed)
	}
	again := filepath.Join(t.TempDir(), "again.jsonl")
	code, out, errOut = lockprover("replay", "--history", again, filepath.Join(dir, "plan.json"))
	if code != exitViolation || !strings.Contains(out, "slot-exclusive  FAIL") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("replay gave a different history")
	}
	// The same plan on the reference holds.
	if code, out, _ := lockprover("replay", "--mutant", "reference", filepath.Join(dir, "plan.json")); code != exitOK {
		t.Errorf("the reference on the mutant's plan: exit %d\n%s", code, out)
	}
	// A second counterexample does not overwrite the first.
	code, out, _ = lockprover("prove", "--runs", "500", "--seed", "1", "--mutant", "trust-scan", "--out", dir, "--shrink-time", "1s")
	if code != exitViolation || !strings.Contains(out, filepath.Join(dir, "counterexample-2")) {
		t.Errorf("second counterexample: exit %d\n%s", code, out)
	}
}

// An implementation that cannot start is refused before the first plan,
// with exit 2 and what it said; its server is checked before it (without
// one here, the case is skipped with what prove said of the server).
func TestProveImplPreflight(t *testing.T) {
	for _, kind := range []string{"semaphore", "redlock"} {
		t.Run(kind, func(t *testing.T) {
			code, _, errOut := lockprover("prove", "--kind", kind, "--impl", "echo no config >&2; exit 3")
			if code == exitUsage && (strings.Contains(errOut, "cannot use the broker") || strings.Contains(errOut, "no redis-server on this machine")) {
				t.Skipf("skipped: %s", strings.TrimSpace(errOut))
			}
			if want := "the implementation failed its preflight: probe did not start: exited (exit status 3)"; code != exitUsage || !strings.Contains(errOut, want) {
				t.Errorf("exit %d, %q; want exit 2 and %q", code, errOut, want)
			}
		})
	}
}

func TestProveUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--faults", "meteor"}, `unknown fault "meteor"`},
		{[]string{"prove", "--mutant", "nope"}, `no mutant named "nope"`},
		{[]string{"prove", "--kind", "lock"}, "--kind must be semaphore or mutex or consul-semaphore or db-semaphore"},
		{[]string{"prove", "--kind", "db-semaphore", "--target", "rabbitmq"}, "--kind db-semaphore runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)"},
		{[]string{"prove", "--kind", "db-semaphore", "--heartbeat", "1s"}, "--heartbeat is for amqp-locks"},
		{[]string{"prove", "--kind", "db-semaphore", "--faults", "admin-crash"}, `unknown fault "admin-crash" for --kind db-semaphore`},
		{[]string{"prove", "--kind", "db-semaphore", "--mutant", "trust-scan"}, `no db-semaphore mutant named "trust-scan"`},
		{[]string{"prove", "--kind", "db-semaphore", "--options", "design=ring"}, `--options: design: want master-row or row-per-slot`},
		{[]string{"prove", "--kind", "db-semaphore", "--properties", "slot-exclusive"}, `unknown property "slot-exclusive"`},
		{[]string{"mutants", "--kind", "consul"}, "--kind must be semaphore or consul-semaphore or db-semaphore or pg-advisory or priority-redlock or redlock"},
		{[]string{"prove", "--kind", "redlock", "--target", "mariadb"}, "--kind redlock runs on the simulated Redis servers (--target sim) or real redis-servers (--target redis)"},
		{[]string{"prove", "--kind", "redlock", "--servers", "10"}, `--servers: want 0 (drawn) to 9, got "10"`},
		{[]string{"prove", "--kind", "redlock", "--servers", "3x"}, `--servers 3x: want a whole number`},
		{[]string{"prove", "--kind", "redlock", "--servers", "10"}, `--servers: want 0 (drawn) to 9, got "10"`},
		{[]string{"prove", "--kind", "redlock", "--persistence", "aof"}, `--persistence: want none or always, got "aof"`},
		{[]string{"prove", "--kind", "redlock", "--ttl", "5ms"}, "--ttl: want a duration of whole milliseconds, at least 10ms"},
		{[]string{"prove", "--kind", "redlock", "--faults", "force-close"}, `unknown fault "force-close" for --kind redlock`},
		{[]string{"prove", "--kind", "redlock", "--mutant", "trust-scan"}, `no redlock mutant named "trust-scan"`},
		{[]string{"prove", "--shard", "3/2"}, "want i/n with 1 <= i <= n"},
		{[]string{"prove", "--properties", "fast"}, `unknown property "fast"`},
		{[]string{"prove", "extra"}, `unexpected argument "extra"`},
		{[]string{"prove", "--parallel", "-1"}, "--parallel must not be negative, not -1"},
		{[]string{"replay"}, "want exactly one plan file"},
		{[]string{"replay", "no-such-plan.json"}, "no-such-plan.json"},
		{[]string{"explore", "--plans", "0"}, "--plans must be at least 1"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestReplayRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "h.jsonl")
	os.WriteFile(existing, []byte("mine\n"), 0o644)
	code, _, errOut := lockprover("replay", "--history", existing, filepath.Join("..", "..", "..", "testdata", "plans", "zombie.json"))
	if code != exitUsage || !strings.Contains(errOut, "not overwriting") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(existing); string(b) != "mine\n" {
		t.Error("the user's file was overwritten")
	}
}

func TestMutantsList(t *testing.T) {
	code, out, _ := lockprover("mutants", "-v")
	if code != exitOK || strings.Count(out, "\n") < 24 || !strings.Contains(out, "b-not-exclusive            slot-exclusive") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestExploreTable(t *testing.T) {
	quick.Skip(t, "a run of many seconds")
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "explore")
	code, out, errOut := lockprover("explore", "--plans", "40", "--out", dir, "--shrink-time", "0")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "| spec defaults | holds (40 plans) |") || !strings.Contains(out, "**cheap-verify**") {
		t.Errorf("table:\n%s", out)
	}
}

// A rate under one a second keeps two significant digits (a cluster's
// plans take seconds each), any other one decimal.
func TestPerSecond(t *testing.T) {
	for r, want := range map[float64]string{0.0452996: "0.045", 0.5: "0.5", 0: "0.0", 1: "1.0", 3295.94: "3295.9"} {
		if got := perSecond(r); got != want {
			t.Errorf("perSecond(%v) = %q, want %q", r, got, want)
		}
	}
}
