package cli

import (
	"strings"
	"testing"
)

// pg-advisory runs on its simulator without --target, starting no
// server, and its mutants are listed there.
func TestPGAdvisoryOnTheSimulator(t *testing.T) {
	code, out, errOut := lockprover("prove", "--kind", "pg-advisory", "--runs", "50", "--seed", "1")
	if code != exitOK || !strings.HasPrefix(out, "proving the reference on the simulated PostgreSQL, seed 1\n50 plans") || strings.Contains(out+errOut, "started") {
		t.Errorf("prove: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockprover("mutants", "--kind", "pg-advisory")
	for _, m := range []string{"no-check", "short-idle", "unlock-elsewhere"} {
		if code != exitOK || !strings.Contains(out, m) {
			t.Errorf("mutants: exit %d, no %s\n%s%s", code, m, out, errOut)
		}
	}
}
