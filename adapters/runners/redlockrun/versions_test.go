package redlockrun

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
)

// The reference holds on the newest Redis and the newest Valkey, run from
// sid's Debian root (each plan's own servers, every fault drawn), as on
// the machine's redis-server: a few plans each, where the root is made.
func TestOnServerVersions(t *testing.T) {
	quick.Skip(t, "private servers from a Debian root")
	if testing.Short() {
		t.Skip("starts servers")
	}
	if os.Geteuid() != 0 {
		t.Skip("runs servers from a Debian root: needs root")
	}
	for _, v := range []versions.Version{versions.Newest("redis"), versions.Newest("valkey")} {
		t.Run(v.Server, func(t *testing.T) {
			t.Parallel()
			if !v.Made() {
				t.Skipf("%v: its root is not made here (lockprover servers --make %s-%s makes it, some minutes)", v, v.Server, v.Name)
			}
			target := Redis{Version: v}
			if want := v.Server + "-servers " + v.Name; !strings.Contains(target.String(), want) {
				t.Errorf("the target says %q, not %q", target, want)
			}
			out, err := prover.Search{Config: prover.Config{Subject: Config{Target: target}, Properties: safety}, Seed: 1, Plans: 4, Shrink: time.Nanosecond}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found != nil {
				t.Fatalf("on %v: %s", v, out.Found.Summary())
			}
			t.Logf("the reference on %v: %d plans, %v", v, out.Plans, out.Verdicts)
		})
	}
}
