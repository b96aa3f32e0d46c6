package cli

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/histories"
)

// A drop-reply on an implementation's client is recorded only where it
// struck, on a real MariaDB: the proxy drops the reply to a COMMIT, so the
// reference (which commits with COMMIT statements) meets it, and its
// operation ends unknown; database-semaphore's adapter, whose procedures
// commit inside themselves, never sends one, and its history holds no
// drop-reply (a fault that did not strike must not excuse anything).
func TestDropReplyRecordedOnlyWhereItStruck(t *testing.T) {
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	bin := builtBinary(t)
	up, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "upstream"))
	if err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(up, "plans", "dbsem-drop-reply-never-strikes.json")
	cases := []struct {
		name, impl string
		struck     bool
	}{{"the reference, committing with COMMIT", bin + " serve-reference --kind db-semaphore", true}}
	if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() == nil {
		adapter := filepath.Join(up, "database_semaphore.py")
		cases = append(cases, struct {
			name, impl string
			struck     bool
		}{"procedures that commit inside", fmt.Sprintf("/usr/bin/python3 %s --checkout %s", adapter, filepath.Join(up, "testdata", "fake-database-semaphore")), false})
		t.Cleanup(func() {
			cfg, _ := driver.ParseDSN(dsn)
			u := (&url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}).String()
			if b, err := exec.Command("/usr/bin/python3", adapter, "--clean-up", u).CombinedOutput(); err != nil {
				t.Errorf("--clean-up: %v\n%s", err, b)
			}
		})
	} else {
		t.Log("database-semaphore's adapter is left out: needs Debian's /usr/bin/python3 with python3-pymysql")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hist := filepath.Join(t.TempDir(), "h.jsonl")
			code, out, errOut := runBinary(t, bin, "", nil, "replay", "--impl", tc.impl, "--init-timeout", "1m", "--dsn", dsn, "--history", hist, plan)
			b, err := os.ReadFile(hist)
			if err != nil {
				t.Fatalf("exit %d, no history: %v\n%s%s", code, err, out, errOut)
			}
			h, err := histories.Read(bytes.NewReader(b), hist)
			if err != nil {
				t.Fatal(err)
			}
			recorded, unknown := false, 0
			for _, e := range h {
				if e.Process == "nemesis" && e.F == histories.DropReply {
					recorded = true
				}
				if e.Process == "c1" && e.Type == histories.Info {
					unknown++
				}
			}
			if recorded != tc.struck || (unknown > 0) != tc.struck {
				t.Errorf("drop-reply recorded %v, c1's unknown outcomes %d; want it struck: %v (exit %d)\n%s%s\n%s", recorded, unknown, tc.struck, code, out, errOut, b)
			}
			if code != exitOK {
				t.Errorf("exit %d: the plan holds on both\n%s%s", code, out, errOut)
			}
		})
	}
}
