package dbsemrun_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
)

// slowSecondAcquire patches the Python example so that the second acquire
// of the first expiry group's key (another process's, while the first
// lease is live) answers 1.3s late, past the group's 1s ttl: the machine
// seems too slow to judge it. A file marks the first acquire, since each
// client is a process of its own.
func slowSecondAcquire(t *testing.T) string {
	mark := filepath.Join(t.TempDir(), "first")
	return fmt.Sprintf(`
import os, time
_acquire = d.DbSemaphore.acquire
def acquire(self, key, max_holders, ttl_ms):
    if key.endswith("-e1"):
        try:
            os.close(os.open(%q, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            time.sleep(1.3)
    return _acquire(self, key, max_holders, ttl_ms)
d.DbSemaphore.acquire = acquire
`, mark)
}

// A validation the machine was too slow to judge tries the expiry checks
// again with a longer ttl, and says so: a correct implementation passes,
// and a mutant the slow group would have let through is caught (CI once
// passed release-after-expiry-succeeds: the late acquire was granted and
// took the expired lease's row, so the release found nothing to wrongly
// end).
func TestValidateLeaseTooSlowTriesAgain(t *testing.T) {
	t.Parallel()
	leaseDB(t)
	const again = "past the ttl of 1s; trying the expiry checks again with a ttl of 3s"
	t.Run("correct", func(t *testing.T) {
		t.Parallel()
		passed, out := validateLease(t, pythonBroken(t, slowSecondAcquire(t)), dbsemrun.Options{})
		if !passed || strings.Contains(out, "FAIL") {
			t.Fatalf("fails validation:\n%s", out)
		}
		for _, want := range []string{again, "ok    acquire {max:1, ttl_ms:3000} -> acquire_ok",
			`ok    another client's acquire before the ttl passed -> acquire_fail {reason:"full"}`,
			`ok    release of a lease whose ttl passed -> release_fail {reason:"expired"}`} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in\n%s", want, out)
			}
		}
	})
	t.Run("release-after-expiry-succeeds", func(t *testing.T) {
		t.Parallel()
		patch := slowSecondAcquire(t) + `
def release(self, key, token):
    self._change(f"DELETE FROM {self.t_lease} WHERE sem_key = %s AND token = %s", (key, token))
d.DbSemaphore.release = release
`
		passed, out := validateLease(t, pythonBroken(t, patch), dbsemrun.Options{})
		if passed {
			t.Fatalf("passed:\n%s", out)
		}
		for _, want := range []string{again, `FAIL  release of a lease whose ttl passed -> release_fail {reason:"expired"}`} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in\n%s", want, out)
			}
		}
	})
}
