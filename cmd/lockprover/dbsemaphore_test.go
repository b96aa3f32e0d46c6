package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// prove --kind db-semaphore proves the database semaphore's reference on
// the simulated database, in both designs.
func TestProveDBSemaphore(t *testing.T) {
	for _, opts := range []string{"", "design=row-per-slot,fencing"} {
		args := []string{"prove", "--kind", "db-semaphore", "--runs", "600", "--seed", "7"}
		if opts != "" {
			args = append(args, "--options", opts)
		}
		code, out, errOut := lockprover(args...)
		if code != exitOK || !strings.Contains(out, "on the simulated database, seed 7") ||
			!strings.Contains(out, "600 plans") || !strings.Contains(out, "every property held") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// A mutant is caught by its property, its counterexample replays to the
// same violation, --mutant reference replays it against the reference, and
// mutants --kind db-semaphore lists the catalogue.
func TestDBSemaphoreMutantAndReplay(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := lockprover("prove", "--kind", "db-semaphore", "--mutant", "count-without-lock", "--runs", "2000", "--seed", "1", "--out", dir)
	if code != exitViolation || !strings.Contains(out, "lease-exclusive violated") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	plan := filepath.Join(dir, "plan.json")
	code, out, errOut = lockprover("replay", plan)
	if code != exitViolation || !strings.Contains(out, "lease-exclusive FAIL") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("replay", "--mutant", "reference", plan)
	if code != exitOK {
		t.Fatalf("replay --mutant reference: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = lockprover("replay", "--target", "rabbitmq", plan)
	if code != exitUsage || !strings.Contains(errOut, "runs on the simulated database only") {
		t.Fatalf("replay --target rabbitmq: exit %d, %s", code, errOut)
	}
	data, _ := os.ReadFile(plan)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(strings.Replace(string(data), `"max": 1`, `"max": 0`, 1)), 0o644)
	code, _, errOut = lockprover("replay", bad)
	if code != exitUsage || !strings.Contains(errOut, "bad.json:") || !strings.Contains(errOut, "max: want 1 to 1000, got 0") {
		t.Fatalf("replay of a bad plan: exit %d, %s", code, errOut)
	}
	code, out, _ = lockprover("mutants", "--kind", "db-semaphore")
	if code != exitOK || !strings.Contains(out, "count-without-lock") || !strings.Contains(out, "ambiguous-commit-retry") || strings.Contains(out, "trust-scan") {
		t.Fatalf("mutants --kind db-semaphore: exit %d\n%s", code, out)
	}
}
