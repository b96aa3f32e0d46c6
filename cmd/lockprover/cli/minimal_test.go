package cli

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/quick"
)

// The implementers' guide's minimal example (examples/minimal): its
// adapter passes validate-impl; on the guide's hand plan its lock holds,
// and its variant that releases with a plain DEL is caught every time.
func TestMinimalExample(t *testing.T) {
	quick.Skip(t, "private redis-servers and Python processes")
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server: apt-get install redis-server")
	}
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3: apt-get install python3")
	}
	dir := filepath.Join("..", "..", "..", "examples", "minimal")
	impl := "/usr/bin/python3 " + filepath.Join(dir, "redis_lock.py")
	plan := filepath.Join(dir, "release-after-expiry.json")

	if code, out, errOut := lockprover("validate-impl", "--kind", "redlock", "--impl", impl); code != exitOK {
		t.Fatalf("validate-impl: exit %d\n%s%s", code, out, errOut)
	}
	// --trace prints what the proxies passed between c1 and each server
	if code, out, errOut := lockprover("replay", "--target", "redis", "--impl", impl, "--trace", plan); code != exitOK {
		t.Errorf("the safe lock on the guide's plan: exit %d\n%s%s", code, out, errOut)
	} else if !strings.Contains(out, "trace of the proxies (") || !strings.Contains(out, "c1->redis1: -> ") {
		t.Errorf("replay --trace on Redis printed no trace of c1's commands:\n%s", out)
	}
	code, out, errOut := lockprover("replay", "--target", "redis", "--impl", impl+" --unsafe-release", "--times", "2", plan)
	// no-revival catches it whatever the machine's load (c1 releases
	// after its lease ended); lease-exclusive too where c3's acquire lands
	// inside c2's lease, which a machine at load 60 has delayed past it.
	if code != exitViolation || !strings.Contains(out, "failed in 2 of 2 runs") || !strings.Contains(out, "no-revival      FAIL") {
		t.Errorf("the unsafe release on the guide's plan: exit %d, want it caught in 2 of 2 runs\n%s%s", code, out, errOut)
	}
}
