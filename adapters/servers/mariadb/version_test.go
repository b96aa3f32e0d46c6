package mariadb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"
)

// A private server of each MariaDB version from a Debian release's root
// is that version, and restarts, crashes and stops as the machine's own
// does (restartCrashStop), leaving no process behind.
func TestVersionsFromRoots(t *testing.T) {
	for _, v := range versions.Of("mariadb") {
		if !v.Rooted() {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			quick.Skip(t, "a private MariaDB "+v.Name+" from Debian "+v.Release+"'s root")
			if !v.Made() {
				t.Skipf("%s's root is not made here: lockprover servers --make mariadb-%s (root, debootstrap and the Debian mirror; some minutes)", v, v.Name)
			}
			start := time.Now()
			// A bound for a wedged start, not a measure.
			x, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			s, err := StartVersion(x, t.TempDir(), v, nil)
			if errors.Is(err, debroot.ErrUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Stop() })
			t.Logf("%s initialised and started in %v (pid %d, %s)", v, time.Since(start).Round(time.Millisecond), s.PID(), s.Addr())
			if s.Version() != v {
				t.Errorf("Version() is %s, want %s", s.Version(), v)
			}
			db, err := s.open("")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got string
			if err := db.QueryRowContext(ctx(t), "SELECT VERSION()").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, v.Name+".") {
				t.Fatalf("VERSION() is %q, want %s.x", got, v.Name)
			}
			restartCrashStop(t, s)
		})
	}
}

// A version that is not MariaDB's is refused, naming it.
func TestStartVersionRefusesAnotherServer(t *testing.T) {
	v, err := versions.Lookup("postgresql", "18")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartVersion(ctx(t), t.TempDir(), v, nil); err == nil || !strings.Contains(err.Error(), "postgresql 18") {
		t.Errorf("StartVersion of %s: %v", v, err)
	}
}
