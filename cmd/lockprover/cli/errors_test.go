package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A value a flag cannot take is refused as the flag is parsed, naming the
// flag, the value and what is wrong with it, for every verb and for the
// families' flags alike: a duration without its unit, a number that is
// none.
func TestBadValuesSayWhatIsWrong(t *testing.T) {
	plan := filepath.Join("..", "..", "..", "testdata", "plans", "zombie.json")
	hist := filepath.Join("..", "..", "..", "testdata", "histories", "01-turns.jsonl")
	unit := ": a duration needs a unit (5s, 500ms, 2m)"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--time", "5"}, "prove: --time 5" + unit},
		{[]string{"prove", "--timeout", "5"}, "prove: --timeout 5" + unit},
		{[]string{"prove", "--exhaustive", "--sleep", "10"}, "prove: --sleep 10" + unit},
		{[]string{"replay", plan, "--timeout", "60"}, "replay: --timeout 60" + unit},
		{[]string{"check", "--timeout", "1", hist}, "check: --timeout 1" + unit},
		{[]string{"explore", "--shrink-time", "5"}, "explore: --shrink-time 5" + unit},
		{[]string{"validate-impl", "--impl", "true", "--init-timeout", "20"}, "validate-impl: --init-timeout 20" + unit},
		{[]string{"prove", "--kind", "redlock", "--ttl", "100"}, "prove: --ttl 100" + unit},
		{[]string{"prove", "--heartbeat", "5"}, "prove: --heartbeat 5" + unit},
		{[]string{"conform", "--shrink-time", "60"}, "conform: --shrink-time 60" + unit},
		{[]string{"check", "--lease-ttl", "100", hist}, "check: --lease-ttl 100" + unit},
		{[]string{"prove", "--time", "soon"}, "prove: --time soon: want a duration with its unit (5s, 500ms, 2m)"},
		{[]string{"prove", "--kind", "redlock", "--servers", "two"}, "prove: --servers two: want a whole number"},
		{[]string{"prove", "--kind", "redlock", "--limit", "1.5"}, "prove: --limit 1.5: want a whole number"},
		{[]string{"bench", "--kind", "redlock", "--servers", "x"}, "bench: --servers x: want a whole number"},
		{[]string{"bench", "--slots", "many"}, "bench: --slots many: want a whole number"},
		{[]string{"conform", "--retries", "x"}, "conform: --retries x: want a whole number"},
		{[]string{"prove", "--runs", "lots"}, "prove: --runs lots: want a whole number"},
		{[]string{"prove", "--seed", "-1"}, "prove: --seed -1: want a whole number, 0 or more"},
		{[]string{"prove", "--clients", "99999999999999999999"}, "prove: --clients 99999999999999999999: out of range"},
		{[]string{"prove", "--speedup", "fast"}, "prove: --speedup fast: want a number"},
		{[]string{"check", "--drift", "x", hist}, "check: --drift x: want a number"},
		{[]string{"prove", "--quiet=maybe"}, "prove: --quiet=maybe: want true or false (or the flag alone, for true)"},
	} {
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want+"\n") || !strings.Contains(errOut, "(lockprover help "+tc.args[0]+" shows its flags)") {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	// A family's number and duration flags, given right, are taken as
	// before, and an empty one is the flag not given.
	code, out, errOut := lockprover("prove", "--kind", "redlock", "--servers", "2", "--limit", "1", "--ttl", "100ms", "--runs", "2", "--seed", "1", "--quiet")
	if code != exitOK {
		t.Errorf("prove --kind redlock --servers 2 --limit 1 --ttl 100ms: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := lockprover("prove", "--kind", "redlock", "--ttl", "", "--runs", "1", "--seed", "1", "--quiet"); code != exitOK {
		t.Errorf("prove --kind redlock --ttl '': exit %d\n%s%s", code, out, errOut)
	}
}

// replay given a history, or a counterexample's directory, says what it
// was given and what to run instead.
func TestReplayOfAHistory(t *testing.T) {
	root := filepath.Join("..", "..", "..", "testdata", "histories")
	for _, name := range []string{"13-concurrent-spurious-full.jsonl", "90-jepsen-partition-double-hold.edn", "94-jepsen-array.json", "96-jepsen-register.edn"} {
		path := filepath.Join(root, name)
		code, _, errOut := lockprover("replay", path)
		if code != exitUsage || !strings.Contains(errOut, "replay: "+path+" is ") || !strings.Contains(errOut, "not a plan: replay runs a plan again; to judge a history, lockprover check "+path+"\n") {
			t.Errorf("replay %s: exit %d, %q; want exit 2, and lockprover check named", name, code, errOut)
		}
	}
	dir := t.TempDir()
	if code, _, errOut := lockprover("replay", dir); code != exitUsage || !strings.Contains(errOut, dir+" is a directory, not a plan file") {
		t.Errorf("replay DIR: exit %d, %q", code, errOut)
	}
	os.WriteFile(filepath.Join(dir, "plan.json"), nil, 0o644)
	if code, _, errOut := lockprover("replay", dir); code != exitUsage || !strings.Contains(errOut, dir+" is a directory: replay the plan in it, lockprover replay "+filepath.Join(dir, "plan.json")) {
		t.Errorf("replay DIR with a plan.json: exit %d, %q", code, errOut)
	}
}

// An implementation that fails to start with --kind not given is told the
// kind it was proved as, the default, and the others: the lock may be
// another kind's.
func TestProveImplNamesTheDefaultedKind(t *testing.T) {
	code, _, errOut := lockprover("prove", "--impl", "true", "--init-timeout", "5s", "--runs", "1", "--out", t.TempDir())
	want := "prove: --kind not given: proved as semaphore (amqp-locks, the default); give --kind for another kind of lock: mutex, "
	if code != exitUsage || !strings.Contains(errOut, want) || !strings.Contains(errOut, "redlock") {
		t.Errorf("prove --impl true: exit %d, %q; want 2 and %q", code, errOut, want)
	}
	code, _, errOut = lockprover("prove", "--kind", "semaphore", "--impl", "true", "--init-timeout", "5s", "--runs", "1", "--out", t.TempDir())
	if code != exitUsage || strings.Contains(errOut, "--kind not given") {
		t.Errorf("prove --kind semaphore --impl true: exit %d, %q; want 2 and no word of a default", code, errOut)
	}
}
