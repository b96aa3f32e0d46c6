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
// server, passes every check, refreshing by reacquire(), by extend(ttl,
// replace_ttl=True) (--extend) or by extend(ttl), which adds to what is
// left (--extend-add). It claims no validity.
func TestRedisPyLockAdapter(t *testing.T) {
	needModule(t, "redis", "python3-redis")
	for _, flags := range []string{"", " --extend", " --extend-add"} {
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

// npm redis-lock 1.0.0 has no refresh: the adapter refuses each with a
// definite unsupported, which fails exactly validate-impl's refresh checks;
// everything else passes (acquire, held, release, a second release, a new
// lease after the release and after the expiry).
func TestNodeRedisLockAdapter(t *testing.T) {
	t.Parallel()
	node, modules := npmModules(t, "node-redis-lock", "redis-lock")
	out := validateRedlock(t, "NODE_PATH="+modules+" "+node+" "+abs(t, "node-redis-lock/adapter.js"))
	wantFailures(t, out,
		"c1's refresh of its lease is ok",
		"c1's refresh after its release answers expired",
		"a refresh of a token never granted answers expired",
		"c1's refresh 800ms after its grant (no revival) answers expired",
	)
}
