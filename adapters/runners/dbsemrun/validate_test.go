package dbsemrun_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process/processtest"
	"github.com/lockprover/lockprover/adapters/runners/dbsemrun/dbsemprotocol"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/internal/quick"
)

// validatePrefix finds the validation's table prefix in its output.
var validatePrefix = regexp.MustCompile(`init's prefix \((lpv[0-9a-f]+_)\)`)

// validateLease validates command on the test database and checks that it
// left no table behind.
func validateLease(t *testing.T, command string, o dbsemrun.Options) (bool, string) {
	t.Helper()
	// A minute to answer init: beside the whole suite at load 25 to 30,
	// the Python example took more than the protocol's 10 s.
	return validateLeaseInit(t, command, time.Minute, o)
}

// validateLeaseInit is validateLease giving each process init to answer
// init (0: the protocol's 10 s).
func validateLeaseInit(t *testing.T, command string, init time.Duration, o dbsemrun.Options) (bool, string) {
	t.Helper()
	dsn, db := leaseDB(t)
	var out strings.Builder
	start := time.Now()
	passed, err := dbsemprotocol.ValidateInit(context.Background(), command, init, dsn, o, &out)
	if err != nil {
		t.Fatalf("the database: %v", err)
	}
	t.Logf("validated in %v:\n%s", time.Since(start).Round(10*time.Millisecond), out.String())
	if m := validatePrefix.FindStringSubmatch(out.String()); m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if left := leaseTables(t, ctx, db, m[1]); len(left) > 0 {
			t.Errorf("tables left behind: %v", left)
		}
	}
	return passed, out.String()
}

// The reference served over the protocol and the Python example pass, in
// both designs, with fencing and without.
func TestValidateLeasePasses(t *testing.T) {
	t.Parallel()
	leaseDB(t)
	type impl struct {
		name, cmd string
		o         dbsemrun.Options
	}
	ref := lockprover + " serve-reference --kind db-semaphore"
	impls := []impl{
		{"reference", ref, dbsemrun.Options{}},
		{"reference/fencing", ref, dbsemrun.Options{Fencing: true}},
		{"reference/row-per-slot,fencing", ref, dbsemrun.Options{Design: "row-per-slot", Fencing: true}},
	}
	if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() == nil {
		impls = append(impls,
			impl{"python/fencing", pythonLease(t), dbsemrun.Options{Fencing: true}},
			impl{"python/row-per-slot", pythonLease(t), dbsemrun.Options{Design: "row-per-slot"}},
		)
	} else {
		t.Log("the Python example is left out: needs Debian's /usr/bin/python3 with python3-pymysql")
	}
	for _, tc := range impls {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A minute to answer init: beside the suite with other work,
			// a Python process once took more than the protocol's 10 s.
			passed, out := validateLeaseInit(t, tc.cmd, time.Minute, tc.o)
			if !passed || strings.Contains(out, "FAIL") {
				t.Fatalf("fails validation:\n%s", out)
			}
			for _, want := range []string{"ok    acquire {max:1, ttl_ms:10000} -> acquire_ok", `-> acquire_fail {reason:"full"}`,
				`ok    refresh of a lease whose ttl passed -> refresh_fail {reason:"expired"}`, "ok    another client's acquire after the ttl passed",
				`ok    acquire {max:2} of the key agreed with max 1`, `ok    an unknown request`, `ok    init with the database out of reach`} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in\n%s", want, out)
				}
			}
			if fenced := strings.Contains(out, "fences increase over 8 grants"); fenced != tc.o.Fencing {
				t.Errorf("fences checked: %v, with fencing %v", fenced, tc.o.Fencing)
			}
		})
	}
}

// pythonBroken is the Python example with a method replaced by a broken
// one, as a command.
func pythonBroken(t *testing.T, patch string) string {
	t.Helper()
	needPyMySQL(t)
	dir, err := filepath.Abs(pythonExample)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "broken.py")
	src := fmt.Sprintf("import sys\nsys.path.insert(0, %q)\nimport db_semaphore as d\n%s\nsys.exit(d.main())\n", dir, patch)
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return "/usr/bin/python3 " + script
}

// fake is a shell implementation that answers init_ok and then every
// request with reply (the JSON object's fields after the id).
func fake(reply string) string {
	return `read l; echo '{"id":1,"type":"init_ok"}'; while read l; do id=$(echo "$l" | sed 's/.*"id":\([0-9]*\).*/\1/'); echo "{\"id\":$id,` + reply + `}"; done`
}

// Broken implementations fail, and the first failure says what is wrong;
// no process is left behind.
func TestValidateLeaseFails(t *testing.T) {
	t.Parallel()
	leaseDB(t)
	mutant := func(name string) string {
		return lockprover + " serve-reference --kind db-semaphore --mutant " + name
	}
	fencing := dbsemrun.Options{Fencing: true}
	for _, tc := range []struct {
		name, cmd string
		o         dbsemrun.Options
		check     string   // the first check that fails
		want      []string // in its message
	}{
		{"refresh-revives-expired", mutant("refresh-revives-expired"), fencing,
			`refresh of a lease whose ttl passed -> refresh_fail {reason:"expired"}`, []string{"answered refresh_ok", "refresh must not revive it"}},
		{"release-after-expiry-succeeds", mutant("release-after-expiry-succeeds"), fencing,
			`release of a lease whose ttl passed -> release_fail {reason:"expired"}`, []string{"answered release_ok", "must not report release_ok"}},
		{"mixed-max", mutant("mixed-max"), dbsemrun.Options{},
			`acquire {max:2} of the key agreed with max 1`, []string{"granted a lease", "answer an acquire that asks for another with {\"type\":\"error\",\"code\":\"mismatch\",\"definite\":true}"}},
		{"mixed-max/row-per-slot", mutant("mixed-max"), dbsemrun.Options{Design: "row-per-slot"},
			`acquire {max:2} of the key agreed with max 1`, []string{"granted a lease"}},
		{"fence-from-uuid", mutant("fence-from-uuid"), fencing,
			"", []string{"fences must increase, strictly"}},
		{"python/refresh-revives-expired", "python:" + `
def refresh(self, key, token, ttl_ms):
    table = self.t_lease if self.design == d.MASTER_ROW else self.t_slot
    self._change(f"UPDATE {table} SET deadline = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND WHERE sem_key = %s AND token = %s", (ttl_ms * 1000, key, token))
d.DbSemaphore.refresh = refresh`, dbsemrun.Options{},
			`refresh of a lease whose ttl passed -> refresh_fail {reason:"expired"}`, []string{"answered refresh_ok"}},
		{"python/trusts-each-max", "python:" + `
d.DbSemaphore._agree = lambda self, key, max_holders, agreed, design: None`, fencing,
			`acquire {max:2} of the key agreed with max 1`, []string{"granted a lease"}},
		{"exits at start", `echo "no config" >&2; exit 3`, dbsemrun.Options{},
			"c1 starts and answers init with init_ok", []string{"c1 did not start: exited (exit status 3)", "stderr ends: no config", `answer {"id":1,"type":"init_ok"}`}},
		{"refuses fencing", `read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no fencing tokens","definite":true}'`, fencing,
			"c1 starts and answers init with init_ok", []string{"c1 refused init with a definite error (unsupported: no fencing tokens)", "this session asked for fencing (--options): validate and prove with the options you have"}},
		{"cannot connect", `read l; echo '{"id":1,"type":"error","code":"database","text":"connection refused"}'`, dbsemrun.Options{},
			"c1 starts and answers init with init_ok", []string{"without \"definite\" (database: connection refused), as for a database out of reach", "connect with init's \"dsn\""}},
		{"another reason", fake(`\"type\":\"acquire_fail\",\"reason\":\"held\"`), dbsemrun.Options{},
			"acquire {max:1, ttl_ms:10000} -> acquire_ok with a token", []string{`c1 sent acquire_fail whose "reason" is "held": want "full"`, "(c1 is gone: the rest of these checks need it, and are not run)"}},
		{"no fence", fake(`\"type\":\"acquire_ok\",\"token\":\"t\"`), fencing,
			"acquire {max:1, ttl_ms:10000} -> acquire_ok with a token and a fence", []string{`without a "fence", though init asked for fencing`}},
		{"no tables", fake(`\"type\":\"acquire_ok\",\"token\":\"t\"`), dbsemrun.Options{},
			"its tables are named with init's prefix", []string{`no table's name starts with init's "prefix"`}},
		{"python/unknown request", "python:" + `
answer = d.Server.answer
d.Server.answer = lambda self, req: answer(self, req) if req.get("type") in ("init", "acquire", "refresh", "release") else {"id": req["id"], "type": "error", "code": "oops"}`, dbsemrun.Options{},
			`an unknown request -> error {code:"unsupported", definite:true}`, []string{`answered an error with code "oops", definite false: answer a request type you do not support with {"type":"error","code":"unsupported","definite":true}`}},
		{"always full", fake(`\"type\":\"acquire_fail\",\"reason\":\"full\"`), dbsemrun.Options{},
			"acquire {max:1, ttl_ms:10000} -> acquire_ok with a token", []string{`the first acquire of a free key must be granted (acquire_ok with a token), answered acquire_fail {"reason":"full"}`}},
		{"hangs at init", `sleep 600`, dbsemrun.Options{},
			"c1 starts and answers init with init_ok", []string{"c1 did not start: did not answer within 3s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := tc.cmd
			if patch, ok := strings.CutPrefix(cmd, "python:"); ok {
				cmd = pythonBroken(t, patch)
			}
			marker := processtest.Marker("LPVTEST")
			cmd = marker + "=1; " + cmd
			init := time.Minute // as validateLease gives
			if tc.name == "hangs at init" {
				init = 3 * time.Second
			}
			passed, out := validateLeaseInit(t, cmd, init, tc.o)
			if pids, _ := exec.Command("pgrep", "-f", marker+"=").Output(); len(pids) > 0 {
				t.Errorf("processes left behind: %s", pids)
			}
			if passed {
				t.Fatalf("passed:\n%s", out)
			}
			i := strings.Index(out, "FAIL  ")
			if i < 0 {
				t.Fatalf("failed without a FAIL line:\n%s", out)
			}
			first := out[i:]
			if j := strings.Index(first[1:], "\nok    "); j >= 0 {
				first = first[:j+1]
			}
			if !strings.HasPrefix(first, "FAIL  "+tc.check) {
				t.Errorf("the first failure is\n%s\nwant the check %q", first, tc.check)
			}
			for _, w := range tc.want {
				if !strings.Contains(first, w) {
					t.Errorf("the first failure is\n%s\nwant %q in it", first, w)
				}
			}
		})
	}
}

// A database that cannot be used is the error, at once, and the
// implementation is not started.
func TestValidateLeaseWithoutADatabase(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	// Port 1, where nobody listens: a free port closed again may be
	// taken meanwhile by another test's server (a private mariadbd once),
	// which then answers in its own way.
	closed := "127.0.0.1:1"
	// Accepts connections and never answers: a server that hangs.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	started := filepath.Join(t.TempDir(), "started")
	for _, tc := range []struct{ dsn, want string }{
		{"root:s3cr3t@tcp(" + closed + ")/test", "connection refused"},
		{"root@tcp(" + silent.Addr().String() + ")/test", "nothing answered within 8s"},
		{"root@tcp(127.0.0.1:3306)", "missing the slash separating the database name"},
		{"root@unix(/run/mysqld/mysqld.sock)/test", "want a server over tcp"},
	} {
		start := time.Now()
		var out strings.Builder
		passed, err := dbsemprotocol.Validate(context.Background(), "touch "+started, tc.dsn, dbsemrun.Options{}, &out)
		took := time.Since(start)
		if passed || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: passed %v, %v; want %q", tc.dsn, passed, err, tc.want)
		}
		if out.Len() > 0 {
			t.Errorf("%s: printed checks:\n%s", tc.dsn, out.String())
		}
		if _, err := os.Stat(started); err == nil {
			t.Fatalf("%s: the implementation was started", tc.dsn)
		}
		if took > 12*time.Second {
			t.Errorf("%s: took %v", tc.dsn, took)
		}
	}
}

// syncBuffer is a strings.Builder safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Cut short, it stops at once, kills every process and drops its tables.
func TestValidateLeaseCancelled(t *testing.T) {
	t.Parallel()
	dsn, db := leaseDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan bool)
	go func() {
		passed, _ := dbsemprotocol.Validate(ctx, lockprover+" serve-reference --kind db-semaphore", dsn, dbsemrun.Options{}, &out)
		done <- passed
	}()
	// Cancel once the tables exist, during the checks.
	deadline := time.Now().Add(20 * time.Second)
	for !validatePrefix.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no table check after 20 s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case passed := <-done:
		if passed {
			t.Error("a cancelled validation passed")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("not stopped 15 s after the cancel")
	}
	prefix := validatePrefix.FindStringSubmatch(out.String())[1]
	c, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if left := leaseTables(t, c, db, prefix); len(left) > 0 {
		t.Errorf("tables left behind: %v", left)
	}
}
