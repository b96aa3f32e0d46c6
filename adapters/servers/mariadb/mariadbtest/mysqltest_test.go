package mariadbtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
)

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vals[k]
		return v, ok
	}
}

// deadDSN names a server no connection can reach: nothing can listen on
// port 0, so a dial is refused at once. Its password must never show.
const deadDSN = "root:sekrit@tcp(127.0.0.1:0)/test"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name             string
		env              map[string]string
		dsn, from, addr  string
		dial, read, writ time.Duration
	}{
		{"unset", nil, mariadb.DefaultDSN, "mysql.DefaultDSN", "127.0.0.1:3306", dialTimeout, ioTimeout, ioTimeout},
		{"empty counts as unset", map[string]string{EnvVar: ""}, mariadb.DefaultDSN, "mysql.DefaultDSN", "127.0.0.1:3306", dialTimeout, ioTimeout, ioTimeout},
		{"set", map[string]string{EnvVar: "u:p@tcp(db.example:3307)/x"}, "u:p@tcp(db.example:3307)/x", "$" + EnvVar, "db.example:3307", dialTimeout, ioTimeout, ioTimeout},
		{"the DSN's own timeouts kept", map[string]string{EnvVar: "u@tcp(h:1)/x?timeout=5s&readTimeout=1s"}, "u@tcp(h:1)/x?timeout=5s&readTimeout=1s", "$" + EnvVar, "h:1", 5 * time.Second, time.Second, ioTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, from, cfg, err := parse(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if dsn != tc.dsn || from != tc.from || cfg.Addr != tc.addr {
				t.Errorf("dsn %q from %q addr %q, want %q from %q addr %q", dsn, from, cfg.Addr, tc.dsn, tc.from, tc.addr)
			}
			if cfg.Timeout != tc.dial || cfg.ReadTimeout != tc.read || cfg.WriteTimeout != tc.writ {
				t.Errorf("timeouts %v %v %v, want %v %v %v", cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout, tc.dial, tc.read, tc.writ)
			}
		})
	}
}

// A $LOCKPROVER_MYSQL_DSN that does not parse is an error that names the
// variable, not the password.
func TestParseBadDSN(t *testing.T) {
	_, _, cfg, err := parse(env(map[string]string{EnvVar: "root:sekrit@tcp(127.0.0.1:3306/test"}))
	if err == nil || cfg != nil {
		t.Fatalf("parse: %v, %v; want an error", cfg, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "$"+EnvVar) || strings.Contains(msg, "sekrit") {
		t.Errorf("error %q: want $%s named and no password", msg, EnvVar)
	}
}

// A server out of reach is an error that names its address and where the
// DSN came from, not the password, and comes quickly.
func TestPingOutOfReach(t *testing.T) {
	_, from, cfg, err := parse(env(map[string]string{EnvVar: deadDSN}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = ping(cfg, from)
	if err == nil {
		t.Fatal("ping of 127.0.0.1:0 succeeded")
	}
	if took := time.Since(start); took > pingTimeout+time.Second {
		t.Errorf("ping took %v", took)
	}
	msg := err.Error()
	for _, want := range []string{"127.0.0.1:0", "$" + EnvVar} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "sekrit") {
		t.Errorf("error %q shows the password", msg)
	}
}

// subprocessEnv marks the test binary run by TestWithoutDatabase.
const subprocessEnv = "MYSQLTEST_SUBPROCESS"

// TestWithoutDatabase runs this package's test binary again with a
// $LOCKPROVER_MYSQL_DSN out of reach, and one that does not parse (the
// lookup is done once per binary, so each needs a binary of its own):
// Config returns the reason and DSN skips the test, saying how to provide
// a database, without the password.
func TestWithoutDatabase(t *testing.T) {
	for _, tc := range []struct{ dsn, reason string }{
		{deadDSN, "127.0.0.1:0 (from $" + EnvVar + ")"},
		{"root:sekrit@tcp(127.0.0.1:3306/test", "$" + EnvVar + " does not parse"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSubprocess$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), subprocessEnv+"=1", EnvVar+"="+tc.dsn)
		b, err := cmd.CombinedOutput()
		out := string(b)
		if err != nil {
			t.Errorf("%s: %v\n%s", tc.dsn, err, out)
			continue
		}
		for _, want := range []string{"--- SKIP: TestSubprocess", "config: " + tc.reason, "no MariaDB for this test (" + tc.reason, "set " + EnvVar, "start MariaDB on 127.0.0.1:3306"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the output does not say %q:\n%s", tc.dsn, want, out)
			}
		}
		if strings.Contains(out, "sekrit") || strings.Contains(out, "reached") {
			t.Errorf("%s: a password shown, or DSN returned:\n%s", tc.dsn, out)
		}
	}
}

// TestSubprocess is TestWithoutDatabase's subprocess.
func TestSubprocess(t *testing.T) {
	if os.Getenv(subprocessEnv) == "" {
		t.Skip("run by TestWithoutDatabase in a test binary of its own")
	}
	cfg, err := Config()
	if err == nil {
		t.Fatalf("Config found a database at %s", cfg.Addr)
	}
	t.Logf("config: %v", err)
	DSN(t)
	t.Error("reached: DSN returned without a database")
}

// TestDSN asks for the real test database: here it finds it or skips.
// Each Config is a copy of the caller's own.
func TestDSN(t *testing.T) {
	dsn := DSN(t)
	a, err := Config()
	if err != nil {
		t.Fatalf("DSN returned %q but Config: %v", dsn, err)
	}
	b, _ := Config()
	if a == b || a.Timeout == 0 || a.ReadTimeout == 0 || a.WriteTimeout == 0 {
		t.Errorf("Config: the same copy twice (%v), or timeouts unset (%v %v %v)", a == b, a.Timeout, a.ReadTimeout, a.WriteTimeout)
	}
	t.Logf("MariaDB at %s", a.Addr)
}
