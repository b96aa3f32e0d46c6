// Package quick marks the tests that `make check`, the quick inner loop,
// leaves to `make test`: those that talk to a real server, start one, or
// run an implementation's processes for seconds. `make check` runs
// `go test -short`, under which Skip skips such a test with a message that
// says what it needs; one short run per real server stays in the quick
// loop (cmd/lockprover/cli's TestSmoke, which never calls Skip).
//
// Import it only from _test.go files and from packages only tests import
// (rabbitmqtest, mariadbtest): it imports package testing.
package quick

import "testing"

// Skip skips t under -short, saying what the test needs that the quick
// loop leaves out (a real broker, a private server, a Python process, a
// run of many seconds).
func Skip(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skip("left to make test (make check runs go test -short): needs " + needs)
	}
}
