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

// redis-py's Lock (Debian python3-redis), one Lock per grant on the first
// server, passes every check, refreshing by reacquire() or, with
// --extend, by extend(ttl, replace_ttl=True). It claims no validity.
func TestRedisPyLockAdapter(t *testing.T) {
	needModule(t, "redis", "python3-redis")
	for _, flags := range []string{"", " --extend"} {
		t.Run("refresh"+strings.ReplaceAll(flags, " ", "="), func(t *testing.T) {
			t.Parallel()
			out := validateRedlock(t, python+" "+abs(t, "redis_py_lock.py")+flags)
			wantFailures(t, out)
			if !strings.Contains(out, "ok    c1's refresh after its release answers expired") {
				t.Error("the refresh-after-release check did not run, or did not pass")
			}
			if strings.Contains(out, "validity claimed") {
				t.Error("the adapter claims a validity, which redis-py's Lock does not compute")
			}
		})
	}
}
