package upstream_test

// The adapters of Redis lock libraries judged through the Redlock family
// on one server (docs/verdicts.md): redis-py's Lock and bsm/redislock.

import (
	"os/exec"
	"testing"
)

// The adapter of redis-py's Lock (redis_py_lock.py, Debian's python3-redis)
// passes validate-impl with each way it refreshes: extend replacing the
// TTL, extend adding to it (the library's default) and reacquire.
func TestRedisPyLockAdapter(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import redis").Run(); err != nil {
		t.Skipf("needs Debian's python3 with python3-redis (apt-get install python3-redis): %v", err)
	}
	for _, refresh := range []string{"extend", "extend-add", "reacquire"} {
		t.Run(refresh, func(t *testing.T) {
			t.Parallel()
			out := validateRedlock(t, "/usr/bin/python3 redis_py_lock.py --refresh "+refresh)
			wantFailures(t, out)
		})
	}
}

// The adapter of github.com/bsm/redislock (bsmredislock/, its own module,
// pinned at v0.10.0) passes validate-impl, with and without retried
// refreshes.
func TestBsmRedislockAdapter(t *testing.T) {
	bin := buildModule(t, "bsmredislock", ".", "", "")
	for name, flags := range map[string]string{"default": "", "refresh-retry": " --refresh-retry 3"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := validateRedlock(t, bin+flags)
			wantFailures(t, out)
		})
	}
}
