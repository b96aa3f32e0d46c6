package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/internal/quick"
)

// prove --kind db-semaphore proves the database semaphore's reference on
// the simulated database, in both designs. Without fencing tokens, the
// fencing property is judged on no plan, and the summary says so rather
// than count it among those that held.
func TestProveDBSemaphore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ opts, held string }{
		{"", "every property held that was judged; not judged on any plan: fencing (nothing in the plans to judge it by)\n"},
		{"design=row-per-slot,fencing", "every property held\n"},
	} {
		args := []string{"prove", "--kind", "db-semaphore", "--runs", "600", "--seed", "7"}
		if tc.opts != "" {
			args = append(args, "--options", tc.opts)
		}
		code, out, errOut := lockprover(args...)
		if code != exitOK || !strings.Contains(out, "on the simulated database, seed 7") ||
			!strings.Contains(out, "600 plans") || !strings.HasSuffix(out, tc.held) {
			t.Fatalf("%v: exit %d, want the last line %q\n%s%s", args, code, tc.held, out, errOut)
		}
	}
}

// A mutant is caught by its property, its counterexample replays to the
// same violation, --mutant reference replays it against the reference, and
// mutants --kind db-semaphore lists the catalogue.
func TestDBSemaphoreMutantAndReplay(t *testing.T) {
	t.Parallel()
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
	if code != exitUsage || !strings.Contains(errOut, "runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)") {
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

// prove --kind db-semaphore --target mariadb proves the reference on the
// real server; a replay runs there too. (That a run leaves none of its
// tables behind is TestReferenceOnMariaDB's to check, in
// adapters/runners/dbsemrun, where a run's table prefix can be told.)
func TestProveDBSemaphoreOnMariaDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	dsn := mariadbtest.DSN(t)
	code, out, errOut := lockprover("prove", "--kind", "db-semaphore", "--target", "mariadb", "--dsn", dsn, "--runs", "3", "--seed", "4")
	if code != exitOK || !strings.Contains(out, "on MariaDB at ") || !strings.Contains(out, "3 plans") || !strings.Contains(out, "every property held") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	os.WriteFile(plan, []byte(`{"version":1,"kind":"db-semaphore","key":"k","max":1,"ttl_ms":300,"options":{},
		"clients":[[{"op":"acquire"},{"op":"sleep","ms":400},{"op":"release"}],[{"op":"sleep","ms":50},{"op":"acquire"}]],
		"nemesis":[{"at_ms":20,"fault":"kill","target":"c1"}],"schedule":[],"schedule_seed":1}`), 0o644)
	code, out, errOut = lockprover("replay", "--target", "mariadb", "--dsn", dsn, plan)
	if code != exitOK || !strings.Contains(out, "result: pass") {
		t.Fatalf("replay --target mariadb: exit %d\n%s%s", code, out, errOut)
	}
}

// The database semaphore's flags are checked together with the target:
// each mistake is named, nothing runs.
func TestDBSemaphoreTargetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dsn", "x"}, "--dsn is for a real database: add --target mariadb"},
		{[]string{"--private-server"}, "--private-server is for a real database: add --target mariadb"},
		{[]string{"--target", "rabbitmq"}, "runs on the simulated database (--target sim) or a real MariaDB (--target mariadb)"},
		{[]string{"--target", "mariadb", "--faults", "kill,restart-broker"}, "restart-broker on MariaDB needs --private-server"},
		{[]string{"--target", "mariadb", "--private-server", "--dsn", "x"}, "--dsn and --private-server exclude each other"},
		{[]string{"--impl", "x", "--target", "sim"}, "--impl runs processes against a real database: use --target mariadb"},
		{[]string{"--impl", "x", "--options", "fencing=yes"}, `--options: unknown option "fencing=yes"`},
		{[]string{"--heartbeat", "1s"}, "--heartbeat is for amqp-locks"},
		{[]string{"--target", "mariadb", "--dsn", "root@tcp(127.0.0.1:1)/test", "--runs", "1"}, "127.0.0.1:1"},
		{[]string{"--target", "mariadb", "--dsn", "root@tcp(127.0.0.1:3306)/", "--runs", "1"}, "name a database"},
	} {
		code, _, errOut := lockprover(append([]string{"prove", "--kind", "db-semaphore"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit %d saying %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

// The Python example (examples/python/db_semaphore.py, PyMySQL) is proven
// on MariaDB under every fault but a restart: prove --impl runs one
// process per client, through a proxy of its own, and leaves no tables
// or processes behind.
func TestProvePythonLeaseExampleOnMariaDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	dsn := mariadbtest.DSN(t)
	if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() != nil {
		t.Skip("needs Debian's /usr/bin/python3 with python3-pymysql")
	}
	script, _ := filepath.Abs("../../../examples/python/db_semaphore.py")
	// -X names this run's processes (Python keeps an -X option it does not
	// know in sys._xoptions), for pgrep: the script's path would find the
	// processes of other tests that run it at the same time.
	marker := fmt.Sprintf("lockprover-test=%d", time.Now().UnixNano())
	code, out, errOut := lockprover("prove", "--kind", "db-semaphore", "--impl", "/usr/bin/python3 -X "+marker+" "+script, "--dsn", dsn, "--runs", "5", "--seed", "2", "--init-timeout", "30s")
	if code != exitOK || !strings.Contains(out, "5 plans") || !strings.Contains(out, "every property held") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if n, err := exec.Command("pgrep", "-f", marker).Output(); err == nil {
		t.Errorf("processes of the example left running: %s", n)
	}
}

// explore --kind db-semaphore makes the lease matrix (every design, ttl
// and drift bound holds under every family of faults) and the clock-jump
// tolerance table: a jump of the database's clock within the drift bound
// is tolerated, beyond it c2 gets in early (excused, as the database's
// clock was off), and a client's clock matters only to the mutant that
// reads it.
func TestExploreLease(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "explore")
	code, out, errOut := lockprover("explore", "--kind", "db-semaphore", "--plans", "20", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"| master-row, ttl 100 ms | holds (20 plans) |",
		"| row-per-slot, fencing, ttl 300 ms | holds (20 plans) |",
		"| master-row | tolerated | tolerated | overlap, excused (10 of 10) | overlap, excused (10 of 10) | overlap, excused (10 of 10) | tolerated | tolerated |",
		"| row-per-slot | tolerated | tolerated | overlap, excused (10 of 10) |",
		"| expiry by the client's clock (mutant client-clock-expiry) | tolerated | tolerated | tolerated | tolerated | tolerated | **violated** (10 of 10) | **violated** (10 of 10) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if code, _, errOut := lockprover("explore", "--kind", "mutex"); code != exitUsage || !strings.Contains(errOut, "--kind") {
		t.Errorf("explore --kind mutex: exit %d, %s", code, errOut)
	}
}

// conform --kind db-semaphore runs sequences of dbsem's statements on the
// simulated database and on MariaDB and finds no divergence; RabbitMQ's
// flags are refused.
func TestConformDBSemaphore(t *testing.T) {
	quick.Skip(t, "MariaDB")
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	code, out, errOut := lockprover("conform", "--kind", "db-semaphore", "--dsn", dsn, "--sequences", "20", "--seed", "3")
	if code != exitOK || !strings.Contains(out, "20 sequences") || !strings.Contains(out, "no divergence") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, bad := range [][]string{{"--amqp-url", "amqp://x"}, {"--retries", "1"}, {"--sequences", "0"}} {
		code, _, errOut := lockprover(append([]string{"conform", "--kind", "db-semaphore"}, bad...)...)
		if code != exitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("conform --kind db-semaphore %v: exit %d, %s", bad, code, errOut)
		}
	}
	if code, _, errOut := lockprover("conform", "--dsn", "x"); code != exitUsage || !strings.Contains(errOut, "--dsn is for db-semaphore, not --kind semaphore") {
		t.Errorf("conform --dsn: exit %d, %s", code, errOut)
	}
}

// A counterexample replays as the search judged it: with only the
// database's clock timing leases, so that the client-clock-expiry
// mutant's overlap, which a client's clock fault would excuse under the
// default judging, fails again (it passed before replay used the family's
// judging). The plan as found (the 115th of seed 6), unshrunk, already
// needs the family's judging to fail: a replay with the default judging
// passes it, as it passes the shrunk one; shrinking it took 5 s of CPU.
func TestDBSemaphoreReplayJudgesAsTheSearch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errOut := lockprover("prove", "--kind", "db-semaphore", "--mutant", "client-clock-expiry", "--properties", "lease-exclusive", "--runs", "5000", "--seed", "6", "--shrink-time", "0", "--out", dir)
	if code != exitViolation {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("replay", filepath.Join(dir, "plan.json"))
	if code != exitViolation || !strings.Contains(out, "lease-exclusive FAIL") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
}

// prove --kind db-semaphore --json lists the lease properties it judged,
// with their counts: a summary that listed amqp-locks' properties (as it
// did before the family registry) would say nothing of lease-exclusive.
func TestProveDBSemaphoreJSONListsLeaseProperties(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "run.json")
	code, stdout, errOut := lockprover("prove", "--kind", "db-semaphore", "--runs", "50", "--seed", "3", "--json", out)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Properties []struct {
			Name string `json:"name"`
			Pass int    `json:"pass"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range sum.Properties {
		names = append(names, p.Name)
		if p.Name == "lease-exclusive" && p.Pass != 50 {
			t.Errorf("lease-exclusive passed %d plans, want 50", p.Pass)
		}
	}
	want := []string{"lease-exclusive", "no-revival", "acquire-exact", "fencing", "recovers", "available"}
	if !slices.Equal(names, want) {
		t.Errorf("properties %v, want %v", names, want)
	}
}

// prove --impl takes --options for the database semaphore: the sessions'
// design and fencing, told to the implementation in every init, so that
// fencing and row-per-slot are proven for an implementation too (the
// reference served over the protocol, here: its fences are judged).
func TestProveImplWithOptions(t *testing.T) {
	quick.Skip(t, "RabbitMQ and Python processes")
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	bin := builtBinary(t)
	out := filepath.Join(t.TempDir(), "run.json")
	code, stdout, errOut := lockprover("prove", "--kind", "db-semaphore", "--dsn", dsn, "--impl", bin+" serve-reference --kind db-semaphore",
		"--options", "design=row-per-slot,fencing", "--faults", "none", "--runs", "3", "--seed", "5", "--json", out)
	if code != exitOK || !strings.Contains(stdout, "with options design=row-per-slot,fencing") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Properties []struct {
			Name string `json:"name"`
			Pass int    `json:"pass"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	for _, p := range sum.Properties {
		if p.Name == "fencing" && p.Pass == 0 {
			t.Errorf("fencing was judged on no plan: the implementation was not told to fence")
		}
	}
}

// --ttl fixes every plan's lease ttl (an implementation with a grain of
// whole seconds would otherwise see 100 and 300 ms leases it cannot
// grant); a ttl that is not whole milliseconds is refused.
func TestProveDBSemaphoreTTL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errOut := lockprover("prove", "--kind", "db-semaphore", "--ttl", "2s", "--mutant", "no-skip-locked", "--runs", "500", "--seed", "1", "--out", dir)
	if code != exitViolation {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"ttl_ms": 2000`) {
		t.Errorf("the counterexample's plan is not of 2 s leases:\n%s", data)
	}
	for _, bad := range []string{"1.5ms", "0s"} {
		if code, _, errOut := lockprover("prove", "--kind", "db-semaphore", "--ttl", bad); code != exitUsage || !strings.Contains(errOut, "--ttl: want a duration of whole milliseconds") {
			t.Errorf("--ttl %s: exit %d, %s", bad, code, errOut)
		}
	}
	if code, _, errOut := lockprover("prove", "--kind", "db-semaphore", "--ttl", "x"); code != exitUsage || !strings.Contains(errOut, "--ttl x: want a duration with its unit (5s, 500ms, 2m)") {
		t.Errorf("--ttl x: exit %d, %s", code, errOut)
	}
	if code, _, errOut := lockprover("prove", "--ttl", "1s"); code != exitUsage || !strings.Contains(errOut, "--ttl is for consul-semaphore and db-semaphore and pg-advisory and priority-redlock and redlock, not --kind semaphore") {
		t.Errorf("--ttl for amqp-locks: exit %d, %s", code, errOut)
	}
}

// replay --times N runs the plan N times and says in how many a counted
// property failed (on a real target, timing may make a counterexample
// fail only at times); the report is of the first run that failed.
func TestReplayTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, out, errOut := lockprover("prove", "--kind", "db-semaphore", "--mutant", "no-skip-locked", "--runs", "500", "--seed", "1", "--out", dir); code != exitViolation {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	plan := filepath.Join(dir, "plan.json")
	code, out, errOut := lockprover("replay", "--times", "3", plan)
	if code != exitViolation || !strings.Contains(out, "failed in 3 of 3 runs; the report below is of the first that failed") || !strings.Contains(out, "lease-exclusive FAIL") {
		t.Errorf("replay --times 3: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("replay", "--times", "2", "--mutant", "reference", plan)
	if code != exitOK || !strings.Contains(out, "failed in 0 of 2 runs; the report below is of the last") {
		t.Errorf("replay --times 2 --mutant reference: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := lockprover("replay", "--times", "0", plan); code != exitUsage || !strings.Contains(errOut, "--times must be at least 1") {
		t.Errorf("--times 0: exit %d, %s", code, errOut)
	}
}

// An implementation with a grain of whole seconds (the reference served
// with grain=1s, as database-semaphore upstream grants) is judged by the
// lease it says it granted (ttl_ms in acquire_ok and refresh_ok), which
// the history records: drawn plans of 100 and 300 ms leases hold. Served
// without saying it (unsaid), it is judged by the ttl asked for, and a
// refresh 250 ms into a "100 ms" lease looks like a revival (issue 27,
// problem 1).
func TestProveJudgesTheGrantedLease(t *testing.T) {
	quick.Skip(t, "a run on real servers")
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	bin := builtBinary(t)
	serve := func(options string) string {
		return bin + " serve-reference --kind db-semaphore --options " + options
	}
	dir := t.TempDir()
	args := []string{"prove", "--kind", "db-semaphore", "--dsn", dsn, "--faults", "none", "--runs", "6", "--seed", "1", "--shrink-time", "5s"}
	code, out, errOut := lockprover(append(args, "--impl", serve("grain=1s,unsaid"), "--out", dir)...)
	if code != exitViolation || !strings.Contains(out, "no-revival violated") {
		t.Fatalf("a grain not said: exit %d, want no-revival violated\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover(append(args, "--impl", serve("grain=1s"))...)
	if code != exitOK || !strings.Contains(out, "every property held") {
		t.Fatalf("a grain said: exit %d\n%s%s", code, out, errOut)
	}
	history := filepath.Join(dir, "said.jsonl")
	code, out, errOut = lockprover("replay", "--impl", serve("grain=1s"), "--dsn", dsn, "--history", history, filepath.Join(dir, "plan.json"))
	if code != exitOK {
		t.Fatalf("the counterexample replayed with the grain said: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(history)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"type":"ok","f":"acquire"`) || !strings.Contains(string(data), `"ttl_ms":1000`) {
		t.Errorf("the history does not record the granted lease (ttl_ms 1000):\n%s", data)
	}
	for _, bad := range []string{"grain=0s", "grain=1.5ms", "unsaid", "fencing"} {
		if code, _, errOut := lockprover("serve-reference", "--kind", "db-semaphore", "--options", bad); code != exitUsage || !strings.Contains(errOut, "--options") {
			t.Errorf("serve-reference --options %s: exit %d, %s", bad, code, errOut)
		}
	}
}
