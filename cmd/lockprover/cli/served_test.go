package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An implementation (the reference's trust-scan mutant, served over the
// protocol) runs on the simulator served on the wire with no --target and
// no broker: its violation is found, the plan written logs each process's
// steps, and replay --times gives the same history, times and all, in
// every run.
func TestImplOnTheServedSimulator(t *testing.T) {
	t.Parallel()
	impl := builtBinary(t) + " serve-reference --mutant trust-scan"
	dir := t.TempDir()
	code, out, errOut := lockprover("prove", "--impl", impl, "--runs", "30", "--seed", "2", "--out", dir)
	if code != exitViolation || !strings.Contains(out, "on the simulator") || !strings.Contains(out, "slot-exclusive FAIL") {
		t.Fatalf("prove: exit %d\n%s%s", code, out, errOut)
	}
	plan := filepath.Join(dir, "plan.json")
	raw, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Wire map[string][]string }
	if err := json.Unmarshal(raw, &p); err != nil || len(p.Wire["c1"]) == 0 {
		t.Fatalf("the plan logs no steps (%v): %.300s", err, raw)
	}
	code, out, errOut = lockprover("replay", "--impl", impl, "--times", "3", plan)
	if code != exitViolation || !strings.Contains(out, "failed in 3 of 3 runs") || !strings.Contains(out, "the first run's history, times and all, in 3 of 3 runs") {
		t.Errorf("replay --times 3: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "served: ") {
		t.Errorf("the replay left its log:\n%s", out)
	}
}

// prove --exhaustive --impl searches an implementation in processes on
// the served simulator: a mutant served over the protocol is caught by
// the shortest counterexample, whose plan logs each process's steps and
// which replay reproduces; the search says it ran choice points, not
// states (none of a process's can be seen, so none is pruned). A scope
// too large is refused with its estimate; a family other than
// amqp-locks, and a target other than sim, are refused.
func TestExhaustiveImpl(t *testing.T) {
	t.Parallel()
	impl := builtBinary(t) + " serve-reference --mutant verify-from-cache"
	dir := t.TempDir()
	code, out, errOut := lockprover("prove", "--exhaustive", "--kind", "mutex", "--impl", impl, "--out", dir)
	if code != exitViolation || !strings.Contains(out, "3 plans, 3 schedules, 0 choice points, 0 pruned") || !strings.Contains(out, "the shortest counterexample: mutex") {
		t.Fatalf("prove --exhaustive --impl: exit %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Wire map[string][]string }
	if err := json.Unmarshal(raw, &p); err != nil || len(p.Wire["probe"]) == 0 {
		t.Fatalf("the plan logs no steps (%v): %.300s", err, raw)
	}
	code, out, errOut = lockprover("replay", "--impl", impl, "--times", "2", filepath.Join(dir, "plan.json"))
	if code != exitViolation || !strings.Contains(out, "failed in 2 of 2 runs") || strings.Contains(out, "served: ") {
		t.Errorf("replay --times 2: exit %d\n%s%s", code, out, errOut)
	}
	// Too large a scope is refused before it starts, with the estimate
	// the reference's search gives (the same tree).
	code, _, errOut = lockprover("prove", "--exhaustive", "--clients", "2", "--impl", builtBinary(t)+" serve-reference")
	if code != exitUsage || !strings.Contains(errOut, "scope too large: about 1.24e+08 schedules to run (9 plans;") {
		t.Errorf("a scope too large: exit %d\n%s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--exhaustive", "--kind", "redlock", "--impl", "true"}, "--exhaustive --impl searches an amqp-locks implementation"},
		{[]string{"prove", "--exhaustive", "--target", "rabbitmq", "--impl", "true"}, "--exhaustive runs on the simulator only"},
	} {
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// --speedup is refused where it bounds nothing, and a value that is not a
// count.
func TestSpeedupRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--speedup", "5", "--runs", "1"}, "--speedup bounds the simulator served on the wire to an implementation: give --impl"},
		{[]string{"prove", "--target", "rabbitmq", "--impl", "true", "--speedup", "5"}, "--speedup bounds the simulator served on the wire"},
		{[]string{"prove", "--impl", "true", "--speedup", "-1"}, "--speedup -1: want a number, 0 or more (0: no bound)"},
		{[]string{"replay", "--speedup", "x", "--impl", "true", "--target", "sim", "../../../testdata/plans/zombie.json"}, "--speedup x: want a number"},
	} {
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// The README's minimal lease lock (examples/minimal/redis_lock.py) runs on
// the simulated Redis servers served on the wire with --impl and no
// --target, on a machine without redis-server (PATH holds nothing): its
// --unsafe-release fails the README's plan in every run, with the same
// history, times and all, but for the tokens it draws; drawn plans of
// the safe release hold.
func TestRedlockImplOnTheServedSimulator(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	t.Setenv("PATH", t.TempDir())
	script := filepath.Join("..", "..", "..", "examples", "minimal", "redis_lock.py")
	plan := filepath.Join("..", "..", "..", "examples", "minimal", "release-after-expiry.json")
	code, out, errOut := lockprover("replay", "--impl", "/usr/bin/python3 "+script+" --unsafe-release", "--times", "3", plan)
	if code != exitViolation || !strings.Contains(out, "failed in 3 of 3 runs") || !strings.Contains(out, "the first run's history, times and all, in 3 of 3 runs (2 of them with the tokens the implementation drew renamed") ||
		!strings.Contains(out, "lease-exclusive FAIL") {
		t.Fatalf("replay --times 3: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("prove", "--kind", "redlock", "--servers", "1", "--impl", "/usr/bin/python3 "+script, "--runs", "5", "--seed", "1", "--properties", "lease-exclusive,no-revival,validity-sound")
	if code != exitOK || !strings.Contains(out, "on the simulated Redis servers, served on the wire") {
		t.Fatalf("prove: exit %d\n%s%s", code, out, errOut)
	}
}
