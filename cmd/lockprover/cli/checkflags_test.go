package cli

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/family"
)

// check's --drift and --lease-ttl are the lease families' (family.Flag
// with the Check verb), each declared alike by all four, and --drift
// reaches their checker through their Judging: 121's overlap after a
// refresh, a violation within the default bound (1%), is what clocks 50%
// apart may do.
func TestCheckTakesTheLeaseFamiliesFlags(t *testing.T) {
	lease := []string{"consul-semaphore", "db-semaphore", "pg-advisory", "priority-redlock", "redlock"}
	for _, name := range []string{"drift", "lease-ttl"} {
		var who []string
		var decl []family.Flag
		for _, d := range family.Flagged(name) {
			who = append(who, d.Name)
			i := slices.IndexFunc(d.Flags, func(f family.Flag) bool { return f.Name == name })
			decl = append(decl, d.Flags[i])
		}
		slices.Sort(who)
		if !slices.Equal(who, lease) {
			t.Errorf("--%s is declared by %v, want the lease families %v", name, who, lease)
		}
		for _, f := range decl {
			if f != decl[0] || f.Verbs&family.Check == 0 {
				t.Errorf("--%s: declared %+v and %+v: want one declaration, for check", name, decl[0], f)
			}
		}
	}
	h := filepath.Join("..", "..", "..", "testdata", "histories", "121-lease-overlap-after-refresh.jsonl")
	for _, tc := range []struct {
		drift string
		want  int
	}{{"", exitViolation}, {"0.01", exitViolation}, {"0.5", exitOK}} {
		args := []string{"check", "--quiet", h}
		if tc.drift != "" {
			args = append(args, "--drift", tc.drift)
		}
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != tc.want {
			t.Errorf("%v: exit %d, want %d\n%s%s", args, code, tc.want, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--drift", "2", h}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), `check: --drift must be > 0 and < 1 (a fraction: 0.01 is 1%), not 2`) {
		t.Errorf("--drift 2: exit %d\n%s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"check", "--drift", "x", h}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), `check: --drift x: want a number`) {
		t.Errorf("--drift x: exit %d\n%s", code, errOut.String())
	}
}
