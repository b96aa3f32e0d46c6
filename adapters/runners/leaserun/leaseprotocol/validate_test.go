package leaseprotocol

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lockprover/lockprover/adapters/process"
)

// TestCheckStartSaysWhatToFix checks validate-impl's first check: a
// process that answers init_ok passes; one that refuses it, definite or
// not, fails with what to fix, and is killed, not left running.
func TestCheckStartSaysWhatToFix(t *testing.T) {
	f := Side[string]{Terms: &Terms{NotGranted: errNotGranted},
		Init: func(name, s string) (process.Request, string, string, error) {
			return process.Request{"type": "init", "client": name}, s, "k", nil
		}}
	pidFile := filepath.Join(t.TempDir(), "pid")
	answer := func(reply string) string {
		return `echo $$ > ` + pidFile + `; read l; echo '{"id":1,` + reply + `}'; read l; sleep 30`
	}
	for _, c := range []struct{ command, want string }{
		{answer(`"type":"init_ok"`), ""},
		{answer(`"type":"error","code":"unsupported","definite":true`), `c1 refused init with a definite error (unsupported): that says it can never serve this session`},
		{answer(`"type":"error","code":"down"`), `c1 answered init with an error without "definite" (down), as for a server out of reach; but the servers answer lockprover: connect to init's "addr"`},
	} {
		var out strings.Builder
		v := process.NewChecker(context.Background(), &out)
		l := &process.Launcher{Command: c.command}
		conn := f.CheckStart(&v, l, "c1", "run", "the servers", `"addr"`)
		b, _ := os.ReadFile(pidFile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("the process's pid: %v", err)
		}
		switch {
		case c.want == "" && (conn == nil || !v.OK):
			t.Errorf("init_ok: failed:\n%s", out.String())
		case c.want != "" && (conn != nil || v.OK || !strings.Contains(out.String(), c.want)):
			t.Errorf("want %q in:\n%s", c.want, out.String())
		case c.want != "" && syscall.Kill(pid, 0) == nil:
			t.Errorf("the refusing process %d was left running", pid)
		}
		if conn != nil {
			conn.Kill()
		}
	}
}
