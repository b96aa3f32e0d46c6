package upstream_test

import (
	"strings"
	"testing"
)

// github.com/bsm/redislock (redislock/go.mod's version), a single-instance
// lock on the first of the servers, passes every check: owner-checked
// refresh and release scripts, no revival of an expired lease, a new
// random token for each grant. It claims no validity (it keeps no clock
// of its own for a lease), which the test checks too, so that a change of
// the adapter that starts claiming one is noticed and judged.
func TestRedislockAdapter(t *testing.T) {
	t.Parallel()
	bin := buildModule(t, "redislock", ".", "", "")
	out := validateRedlock(t, bin)
	wantFailures(t, out)
	if !strings.Contains(out, "ok    c1's refresh 800ms after its grant (no revival) answers expired") {
		t.Error("the no-revival check did not run, or did not pass")
	}
	if strings.Contains(out, "validity claimed") {
		t.Error("the adapter claims a validity, which bsm/redislock does not compute")
	}
}
