package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/quick"
)

// prove --kind redlock proves the reference on the simulated Redis servers;
// a mutant's counterexample is written, and its printed replay fails the
// same way, on the reference passes; explore writes its table.
func TestProveRedlock(t *testing.T) {
	quick.Skip(t, "private redis-servers")
	t.Parallel()
	code, out, errOut := lockprover("prove", "--kind", "redlock", "--runs", "300", "--seed", "1", "--quiet")
	if code != exitOK || !strings.Contains(out+errOut, "every property held") {
		t.Fatalf("the reference: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	code, out, errOut = lockprover("prove", "--kind", "redlock", "--mutant", "no-drift", "--runs", "300", "--seed", "1", "--quiet", "--out", dir)
	if code != exitViolation || !strings.Contains(out+errOut, "validity-sound FAIL") {
		t.Fatalf("mutant no-drift: exit %d\n%s%s", code, out, errOut)
	}
	plan := filepath.Join(dir, "plan.json")
	if data, err := os.ReadFile(plan); err != nil || !strings.Contains(string(data), `"kind": "redlock"`) {
		t.Fatalf("the counterexample's plan: %v\n%s", err, data)
	}
	if code, out, errOut := lockprover("replay", plan); code != exitViolation || !strings.Contains(out+errOut, "validity-sound") {
		t.Errorf("replay: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := lockprover("replay", "--mutant", "reference", plan); code != exitOK {
		t.Errorf("replay on the reference: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("explore", "--kind", "redlock", "--plans", "30", "--seed", "1", "--out", t.TempDir())
	if code == exitUsage || !strings.Contains(out, "| N=3, fsync always |") {
		t.Errorf("explore: exit %d\n%s%s", code, out, errOut)
	}
}

// prove --kind redlock --target redis proves on real redis-servers each
// plan starts; a mutant's counterexample is replayed there with the
// printed command, which says in how many of three runs it failed again.
func TestProveRedlockOnRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	// Safety only: beside the suite with two busy loops a round timed out
	// with no fault in force, failing available (see adapters/runners/redlockrun's
	// tests).
	code, out, errOut := lockprover("prove", "--kind", "redlock", "--target", "redis", "--runs", "4", "--seed", "1", "--quiet",
		"--properties", "lease-exclusive,no-revival,acquire-exact,fencing,validity-sound")
	skipWithoutRedis(t, code, errOut)
	if code != exitOK || !strings.Contains(out, "every property held") {
		t.Fatalf("the reference on Redis: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	code, out, errOut = lockprover("prove", "--kind", "redlock", "--target", "redis", "--mutant", "no-drift", "--runs", "10", "--seed", "1", "--quiet", "--out", dir)
	replay := "lockprover replay --target redis --times 3 " + filepath.Join(dir, "plan.json")
	if code != exitViolation || !strings.Contains(out, "validity-sound FAIL") || !strings.Contains(out, replay) {
		t.Fatalf("no-drift on Redis: exit %d, want the replay %q\n%s%s", code, replay, out, errOut)
	}
	code, out, errOut = lockprover("replay", "--target", "redis", "--times", "3", filepath.Join(dir, "plan.json"))
	if code != exitViolation || !strings.Contains(out+errOut, "failed in 3 of 3 runs") {
		t.Errorf("replay: exit %d\n%s%s", code, out, errOut)
	}
}

// prove --kind priority-redlock --target redis proves the priority
// reference on real redis-servers each plan starts; a mutant's
// counterexample is replayed there with the printed command. A mutant
// with --impl is refused, naming the flag, and serve-reference refuses a
// mutant of the other kind.
func TestProvePriorityRedlockOnRedis(t *testing.T) {
	t.Parallel()
	code, _, errOut := lockprover("prove", "--kind", "priority-redlock", "--impl", "true", "--mutant", "equal-steals")
	if code != exitUsage || !strings.Contains(errOut, "--mutant: a mutant is a variant of the reference; it cannot run with --impl") {
		t.Errorf("--impl with --mutant: exit %d\n%s", code, errOut)
	}
	code, _, errOut = lockprover("serve-reference", "--kind", "priority-redlock", "--mutant", "plain-del-release")
	if code != exitUsage || !strings.Contains(errOut, `no mutant named "plain-del-release" (see lockprover mutants --kind priority-redlock)`) {
		t.Errorf("serve-reference of a Redlock mutant as a priority one: exit %d\n%s", code, errOut)
	}
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	code, out, errOut := lockprover("prove", "--kind", "priority-redlock", "--target", "redis", "--runs", "2", "--seed", "1", "--quiet",
		"--properties", "lease-exclusive,no-revival,fencing,validity-sound,steal-order,steal-exact")
	skipWithoutRedis(t, code, errOut)
	if code != exitOK || !strings.Contains(out, "every property held") {
		t.Fatalf("the priority reference on Redis: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	// The safety properties only, as above: at load 30 a drawn plan's
	// refresh on real Redis once ran out of its timeout with no fault,
	// and available failed before steal-order could.
	code, out, errOut = lockprover("prove", "--kind", "priority-redlock", "--target", "redis", "--mutant", "equal-steals", "--runs", "20", "--seed", "1", "--quiet", "--out", dir,
		"--shrink-time", "1s", // each try of a smaller plan runs in real time
		"--properties", "lease-exclusive,no-revival,fencing,validity-sound,steal-order,steal-exact")
	replay := "lockprover replay --target redis --times 3 --properties lease-exclusive,no-revival,fencing,validity-sound,steal-order,steal-exact " + filepath.Join(dir, "plan.json")
	if code != exitViolation || !strings.Contains(out, "steal-order FAIL") || !strings.Contains(out, replay) {
		t.Fatalf("equal-steals on Redis: exit %d, want the replay %q\n%s%s", code, replay, out, errOut)
	}
	code, out, errOut = lockprover("replay", "--target", "redis", "--times", "3", "--properties", "lease-exclusive,no-revival,fencing,validity-sound,steal-order,steal-exact", filepath.Join(dir, "plan.json"))
	// The printed command runs and says in how many of three runs it
	// failed again: a steal of equals needs two acquires at once, which
	// real time may not repeat (0 of 3 once in a dry run).
	if code != exitViolation && code != exitOK || !strings.Contains(out+errOut, "of 3 runs") {
		t.Errorf("replay: exit %d\n%s%s", code, out, errOut)
	}
}

// skipWithoutRedis skips the test when prove said, with exit 2, that this
// machine has no redis-server (as the private servers' backend finds it).
func skipWithoutRedis(t *testing.T, code int, errOut string) {
	t.Helper()
	if code == exitUsage && strings.Contains(errOut, "no redis-server on this machine") {
		t.Skipf("skipped: %s", strings.TrimSpace(errOut))
	}
}
