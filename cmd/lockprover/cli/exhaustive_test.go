package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An exhaustive search of a scope that holds says so, spelling the scope
// out, with what it ran.
func TestProveExhaustiveHolds(t *testing.T) {
	code, out, errOut := lockprover("prove", "--exhaustive", "--kind", "mutex", "--clients", "1", "--ops", "1", "--quiet")
	if code != exitOK || !strings.Contains(out, "3 plans, 3 schedules") ||
		!strings.Contains(out, "every property holds for every schedule within: mutex, 1 client, each with every script of 1 to 1 operations of acquire, verify, release; no faults (3 plans), under every schedule of the simulator") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// A mutant's shortest counterexample is written as a plan that replay
// reruns to the same history and the same violation.
func TestProveExhaustiveCounterexampleReplays(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := lockprover("prove", "--exhaustive", "--kind", "mutex", "--clients", "2", "--ops", "1", "--mutant", "verify-probes-b", "--out", dir, "--quiet")
	if code != exitViolation || !strings.Contains(out, "the shortest counterexample: mutex \"lp\", 0 slots, 2 clients, 0 admins, 0 faults, 18 scheduling decisions") || !strings.Contains(out, "slot-exclusive violated") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
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
}

// Bad scopes are refused before anything runs, naming the flag; a scope
// too large says its estimate and the flag that bounds time.
func TestProveExhaustiveRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "mutex", "--admin-ops", "1"}, "--admin-ops: a mutex has no admins"},
		{[]string{"--clients", "2"}, "scope too large: about"},
		{[]string{"--clients", "2"}, "--time"},
		{[]string{"--runs", "5"}, "--runs draws plans"},
		{[]string{"--target", "rabbitmq"}, "--exhaustive runs on the simulator only"},
		{[]string{"--admin-ops", "-1"}, "--admin-ops -1: want a count of at least 0"},
		{[]string{"--max-schedules", "0"}, "--max-schedules must be at least 1"},
		{[]string{"--preemptions", "-1"}, "--preemptions"},
		{[]string{"--kind", "redlock", "--clients", "2", "--ops", "3,1,1"}, "--ops 3,1,1: give one count per client (--clients 2)"},
		{[]string{"--kind", "redlock", "--clients", "2", "--ops", "3,x"}, `--ops 3,x: want a count of at least 1`},
		{[]string{"--kind", "redlock", "--clients", "2", "--ops", "3,0"}, "--ops 3,0: want a count of at least 1"},
		{[]string{"--kind", "mutex", "--clients", "2", "--ops", "2,1,1"}, "--ops 2,1,1: give one count per client (--clients 2)"},
		{[]string{"--admins", "2", "--admin-ops", "2,1,1"}, "--admin-ops 2,1,1: give one count per admin (--admins 2)"},
		{[]string{"--admins", "2", "--admin-ops", "2,-1"}, "--admin-ops 2,-1: want a count of at least 0"},
		{[]string{"--preemptions", "1", "--delays", "1"}, "--preemptions and --delays are two bounds of one search: give one"},
		{[]string{"--delays", "-1"}, "--delays"},
		{[]string{"--sleep", "0s"}, "--sleep 0s: give a length of whole milliseconds, at least 1ms"},
		{[]string{"--heal", "1500us"}, "--heal 1.5ms: give a length of whole milliseconds"},
		{[]string{"--kind", "db-semaphore", "--sleep", "10ms"}, "--sleep: a db-semaphore scope has no sleep of another length"},
		{[]string{"--kind", "consul-semaphore", "--heal", "10ms"}, "--heal: a consul-semaphore scope has no pause or partition that heals"},
		{[]string{"--kind", "db-semaphore", "--stagger", "10ms"}, "--stagger: a db-semaphore scope starts every client at once"},
		{[]string{"--kind", "redlock", "--clients", "2", "--ttls", "1s,100ms"}, "--ttls: a redlock's clients share one ttl (--ttl)"},
		{[]string{"--kind", "priority-redlock", "--clients", "2", "--ttls", "1s"}, "--ttls: give one ttl per client (--clients 2), got 1"},
		{[]string{"--kind", "mutex", "--ttls", "1s"}, "--ttls: a mutex's clients have no ttls of their own"},
		{[]string{"--kind", "db-semaphore", "--ttls", "1s"}, "--ttls: a db-semaphore's clients have no ttls of their own"},
		{[]string{"--kind", "priority-redlock", "--clients", "2", "--ttls", "1s,1500us"}, "--ttls 1s,1500us: want lengths of whole milliseconds"},
	} {
		code, out, errOut := lockprover(append([]string{"prove", "--exhaustive"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}
	if code, _, errOut := lockprover("prove", "--kind", "redlock", "--clients", "2", "--ops", "3,1"); code != exitUsage || !strings.Contains(errOut, "--ops with a count per client is for an exhaustive search") {
		t.Errorf("--ops 3,1 without --exhaustive: exit %d\n%s", code, errOut)
	}
	for _, flag := range []string{"--admin-ops", "--preemptions", "--delays"} {
		code, _, errOut := lockprover("prove", flag, "1")
		if code != exitUsage || !strings.Contains(errOut, flag+" is for an exhaustive search: give --exhaustive") {
			t.Errorf("%s without --exhaustive: exit %d\n%s", flag, code, errOut)
		}
	}
	for _, flag := range []string{"--sleep", "--heal", "--stagger", "--ttls"} {
		code, _, errOut := lockprover("prove", flag, "10ms")
		if code != exitUsage || !strings.Contains(errOut, flag+" is for an exhaustive search: give --exhaustive") {
			t.Errorf("%s without --exhaustive: exit %d\n%s", flag, code, errOut)
		}
	}
}

// A real target is refused for an exhaustive search before anything
// starts (pg-advisory's private PostgreSQL); on its simulator, the
// default, pg-advisory enumerates its scopes.
func TestProveExhaustiveOtherFamilies(t *testing.T) {
	code, out, errOut := lockprover("prove", "--exhaustive", "--kind", "pg-advisory", "--target", "postgres")
	if code != exitUsage || !strings.Contains(errOut, "--exhaustive runs on the simulator only") || strings.Contains(out+errOut, "started") {
		t.Errorf("--target postgres: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("prove", "--exhaustive", "--kind", "pg-advisory")
	if code != exitOK || !strings.Contains(out, "every property holds for every schedule within: pg-advisory on the simulated PostgreSQL, ttl 100 ms, 1 client") {
		t.Errorf("on the simulator: exit %d\n%s%s", code, out, errOut)
	}
}

// --admins is refused on a mutex, and without --exhaustive.
func TestProveExhaustiveAdmins(t *testing.T) {
	for _, args := range [][]string{{"prove", "--exhaustive", "--kind", "mutex", "--admins", "2"}, {"prove", "--admins", "2"}, {"prove", "--exhaustive", "--admins", "0"}} {
		if code, _, errOut := lockprover(args...); code != exitUsage || !strings.Contains(errOut, "--admins") {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
}
