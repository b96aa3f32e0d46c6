// Package quick sorts the suite's tests into its three tiers:
//
//   - make check, the quick inner loop, runs `go test -short`: Skip skips a
//     test that talks to a real server, starts one, or runs an
//     implementation's processes for seconds, saying what it needs. One
//     short run per real server stays in the quick loop
//     (cmd/lockprover/cli's TestSmoke, which never calls Skip).
//   - make test, the suite, runs every test but the long ones.
//   - make long runs the long ones: Long marks a test that starts a private
//     cluster, or a server of another version from a Debian root, and waits
//     out its partitions and timeouts for minutes. It runs only where
//     LOCKPROVER_LONG is set (make long sets it); CI runs make test, then
//     make long.
//
// Import it only from _test.go files and from packages only tests import
// (rabbitmqtest, mariadbtest): it imports package testing.
package quick

import (
	"os"
	"testing"
)

// Skip skips t under -short, saying what the test needs that the quick
// loop leaves out (a real broker, a private server, a Python process, a
// run of many seconds).
func Skip(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skip("left to make test (make check runs go test -short): needs " + needs)
	}
}

// longEnv is the variable that lets the long tests run (make long sets it).
const longEnv = "LOCKPROVER_LONG"

// Long skips t unless LOCKPROVER_LONG is set, saying what it needs: it is
// one of the long tests, which make long runs and make test leaves out.
// Call it first in the test's own function (not in a helper):
// scripts/long-tests finds the long tests by that call, to run them.
func Long(t testing.TB, needs string) {
	t.Helper()
	if os.Getenv(longEnv) == "" {
		t.Skip("left to make long (" + longEnv + "=1): needs " + needs)
	}
}
