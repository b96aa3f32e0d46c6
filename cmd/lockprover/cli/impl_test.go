package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/quick"
)

// validate-impl --kind db-semaphore passes the reference served over the
// protocol (with fencing, in both designs) and the Python example, and
// fails a mutant, saying what is wrong. Each validation has tables of its
// own, so they run side by side.
func TestValidateImplLease(t *testing.T) {
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	bin := builtBinary(t)
	ref := bin + " serve-reference --kind db-semaphore"
	for _, opts := range []string{"", "fencing", "design=row-per-slot,fencing"} {
		name := "--options " + opts
		if opts == "" {
			name = "no options"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := lockprover("validate-impl", "--kind", "db-semaphore", "--dsn", dsn, "--options", opts, "--impl", ref)
			if code != exitOK || strings.Contains(out, "FAIL") || errOut != "" ||
				!strings.HasSuffix(out, "\nthe implementation follows the protocol: prove it with lockprover prove --kind db-semaphore --impl ...\n") {
				t.Errorf("--options %q: exit %d\n%s%s", opts, code, out, errOut)
			}
			if strings.Contains(opts, "fencing") != strings.Contains(out, "ok    fences increase over 8 grants") {
				t.Errorf("--options %q: fences checked or not:\n%s", opts, out)
			}
		})
	}
	t.Run("the Python example", func(t *testing.T) {
		t.Parallel()
		if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() != nil {
			t.Skip("the Python example is left out: needs Debian's /usr/bin/python3 with python3-pymysql")
		}
		script, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "python", "db_semaphore.py"))
		if err != nil {
			t.Fatal(err)
		}
		// The DSN from the environment, as the usage says: the binary's,
		// as this process's environment is shared with the tests beside.
		code, out, errOut := runBinary(t, bin, "", []string{"LOCKPROVER_MYSQL_DSN=" + dsn},
			"validate-impl", "--kind", "db-semaphore", "--options", "fencing", "--init-timeout", "1m", "--impl", "/usr/bin/python3 "+script)
		if code != exitOK || strings.Contains(out, "FAIL") {
			t.Errorf("the Python example: exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("a mutant", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := lockprover("validate-impl", "--kind", "db-semaphore", "--dsn", dsn, "--impl", ref+" --mutant release-after-expiry-succeeds")
		if code != exitViolation || !strings.Contains(out, "FAIL  release of a lease whose ttl passed -> release_fail {reason:\"expired\"}\n      answered release_ok") ||
			!strings.HasSuffix(out, "\nthe implementation fails the checks marked FAIL above (of the protocol or of the lock's semantics; each says what to fix): see docs/protocol.md\n") {
			t.Errorf("a mutant: exit %d\n%s%s", code, out, errOut)
		}
	})
}

// A database that cannot be used is named at once, with exit 2, without
// its password, and the implementation is neither started nor blamed.
func TestValidateImplLeaseDatabase(t *testing.T) {
	// Port 1, where nobody listens: a free port closed again may be
	// taken meanwhile by another test's server (a private mariadbd once),
	// which then answers in its own way.
	closed := "127.0.0.1:1"
	started := filepath.Join(t.TempDir(), "started")
	for _, tc := range []struct{ dsn, want string }{
		{"root:sekrit@tcp(" + closed + ")/test", "connection refused"},
		{"root:sekrit@tcp(127.0.0.1:3306/test", "invalid DSN"},
		{"root@tcp(" + closed + ")/", "name a database"},
	} {
		start := time.Now()
		code, out, errOut := lockprover("validate-impl", "--kind", "db-semaphore", "--dsn", tc.dsn, "--impl", "touch "+started)
		if code != exitUsage || !strings.Contains(errOut, tc.want) ||
			!strings.HasSuffix(errOut, "validate-impl: cannot use the database, so the implementation was not tried\n") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and %q", tc.dsn, code, errOut, tc.want)
		}
		if out != "" || strings.Contains(errOut, "sekrit") {
			t.Errorf("%s: stdout %q, stderr %q", tc.dsn, out, errOut)
		}
		if _, err := os.Stat(started); err == nil {
			t.Fatalf("%s: the implementation was started", tc.dsn)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v", tc.dsn, took)
		}
	}
}

// Flags that do not go together are refused.
func TestValidateImplUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate-impl", "--kind", "db-semaphore"}, "--impl: give the command"},
		{[]string{"validate-impl", "--kind", "lease", "--impl", "true"}, `--kind must be semaphore or mutex or consul-semaphore or db-semaphore or pg-advisory or priority-redlock or redlock, not "lease"`},
		{[]string{"validate-impl", "--kind", "redlock", "--impl", "true", "--options", "x"}, "--options: redlock's sessions have no options"},
		{[]string{"serve-reference", "--kind", "redlock", "--mutant", "nope"}, `--mutant: no mutant named "nope"`},
		{[]string{"prove", "--kind", "priority-redlock", "--impl", "true", "--target", "sim"}, "--impl: --kind priority-redlock runs an implementation on real redis-servers (--target redis) only"},
		{[]string{"prove", "--kind", "redlock", "--impl", "true", "--server-version", "8.0.6"}, "--server-version: the version of real servers; --kind redlock runs on the simulated ones unless --target redis"},
		{[]string{"prove", "--kind", "redlock", "--impl", "true", "--mutant", "no-drift"}, "--mutant: a mutant is a variant of the reference; it cannot run with --impl"},
		{[]string{"validate-impl", "--kind", "db-semaphore", "--impl", "true", "--amqp-url", "amqp://h/"}, "--amqp-url is for amqp-locks, not --kind db-semaphore"},
		{[]string{"validate-impl", "--impl", "true", "--dsn", "root@tcp(h:1)/test"}, "--dsn is for db-semaphore, not --kind semaphore"},
		{[]string{"validate-impl", "--impl", "true", "--options", "fencing"}, "--options: an amqp-locks implementation is validated as it is, without options"},
		{[]string{"validate-impl", "--kind", "db-semaphore", "--impl", "true", "--options", "fencing=yes"}, `--options: unknown option "fencing=yes"`},
		{[]string{"validate-impl", "--kind", "db-semaphore", "--impl", "true", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	_, help, _ := lockprover("validate-impl", "-h")
	for _, want := range []string{"--kind db-semaphore", "-dsn", "-options", mariadb.DefaultDSN, "LOCKPROVER_MYSQL_DSN"} {
		if !strings.Contains(help, want) {
			t.Errorf("validate-impl -h lacks %q:\n%s", want, help)
		}
	}
}

// Ctrl-C stops validate-impl --kind db-semaphore at once, with exit 130.
func TestValidateImplLeaseInterrupted(t *testing.T) {
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	bin := builtBinary(t)
	code, took, errOut := interrupt(t, bin, 300*time.Millisecond, "validate-impl", "--kind", "db-semaphore", "--dsn", dsn,
		"--impl", bin+" serve-reference --kind db-semaphore")
	limit := 5*time.Second + 20*machineLag(t, bin) // as TestInterruptExits130's
	if code != exitInterrupted || !strings.Contains(errOut, "validate-impl: interrupted") || took > limit {
		t.Errorf("exit %d after %v, stderr %q; want 130 within %v", code, took, errOut, limit)
	}
}

// --init-timeout is how long an implementation's processes have to answer
// init: one that starts in 1.5 s fails validate-impl's handshake with
// 300ms, naming it, and passes with 20s; without --impl, or not above 0,
// the flag is refused.
func TestInitTimeout(t *testing.T) {
	quick.Skip(t, "processes that time out")
	t.Parallel()
	u := rabbitmqtest.URL(t)
	bin := builtBinary(t)
	slow := "sh -c 'sleep 1.5; exec " + bin + " serve-reference'"
	code, out, errOut := lockprover("validate-impl", "--amqp-url", u, "--init-timeout", "300ms", "--impl", slow)
	if code != exitViolation || !strings.Contains(out, "within 300ms of the init request") {
		t.Errorf("--init-timeout 300ms: exit %d, want %d and the handshake's failure naming 300ms\n%s%s", code, exitViolation, out, errOut)
	}
	code, out, errOut = lockprover("validate-impl", "--amqp-url", u, "--init-timeout", "20s", "--impl", slow)
	if code != exitOK {
		t.Errorf("--init-timeout 20s: exit %d, want %d\n%s%s", code, exitOK, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--init-timeout", "20s"}, "prove: --init-timeout is for an implementation's processes: give --impl"},
		{[]string{"validate-impl", "--impl", "x", "--init-timeout", "0s"}, "validate-impl: --init-timeout must be more than 0"},
	} {
		if code, _, errOut := lockprover(tc.args...); code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s", tc.args, code, exitUsage, tc.want, errOut)
		}
	}
}

// An implementation that fails validate-impl with no --kind given is told
// which family's checks it failed (the kind defaulted to semaphore), so
// that a lease lock's author is pointed to --kind; given --kind, it is not.
func TestValidateImplNamesTheDefaultedKind(t *testing.T) {
	quick.Skip(t, "a real broker")
	t.Parallel()
	u := rabbitmqtest.URL(t)
	hint := "--kind not given: checked as semaphore (amqp-locks, the default); give --kind for another kind of lock: mutex, "
	code, out, errOut := lockprover("validate-impl", "--amqp-url", u, "--init-timeout", "5s", "--impl", "true")
	if code != exitViolation || !strings.Contains(out, hint) || !strings.Contains(out, "redlock") {
		t.Errorf("no --kind, an implementation that exits at once: exit %d, want 1 and the defaulted kind named:\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("validate-impl", "--kind", "semaphore", "--amqp-url", u, "--init-timeout", "5s", "--impl", "true")
	if code != exitViolation || strings.Contains(out, "--kind not given") {
		t.Errorf("--kind semaphore given: exit %d, want 1 and no word of a default:\n%s%s", code, out, errOut)
	}
}
