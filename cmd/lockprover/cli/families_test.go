package cli

import (
	"strings"
	"testing"

	_ "github.com/lockprover/lockprover/cmd/lockprover/all" // the CLI's tests run every family, as cmd/lockprover does
)

// A flag several families declare goes with every verb any of them gives
// it (validate-impl --kind redlock takes --server-version, which
// amqp-locks' declares for prove, replay and conform only), and is refused
// on that verb for a family that does not take it there.
func TestFamilyFlagOnEveryVerbItsFamiliesGive(t *testing.T) {
	code, _, errOut := lockprover("validate-impl", "--kind", "redlock", "--server-version", "9.9", "--impl", "true")
	if code != exitUsage || !strings.Contains(errOut, `--server-version: unknown server version: "9.9"`) {
		t.Errorf("validate-impl --kind redlock --server-version 9.9: exit %d, %q; want redlock's refusal of the version", code, errOut)
	}
	for _, args := range [][]string{{"validate-impl", "--impl", "true"}, {"bench"}} {
		verb := args[0]
		code, _, errOut := lockprover(append(args, "--kind", "semaphore", "--server-version", "4.3.6")...)
		if code != exitUsage || !strings.Contains(errOut, "--server-version is for consul-semaphore and db-semaphore and pg-advisory and priority-redlock and redlock, not --kind semaphore") {
			t.Errorf("%s --kind semaphore --server-version 4.3.6: exit %d, %q", verb, code, errOut)
		}
	}
}
