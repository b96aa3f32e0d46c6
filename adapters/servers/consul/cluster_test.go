package consul

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
)

// TestClusterStarts: three servers and a client agent start in a lab,
// the client agent creates sessions through the servers' leader, and
// nothing is left once stopped.
func TestClusterStarts(t *testing.T) {
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	lab := netnstest.Lab(t, "s1", "s2", "s3", "c1")
	// A bound for a wedged start, not a measure: four agents start and
	// elect a leader in 3 to 5 s here (load 40 included); the minute this
	// was left little for a suite that starves them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	c, err := StartCluster(ctx, lab, t.TempDir(), Options{}, []string{"s1", "s2", "s3"}, []string{"c1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 servers and a client healthy in %v", time.Since(t0).Round(time.Millisecond))
	defer func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		for _, m := range c.members() {
			if m.PID() != 0 {
				t.Errorf("%s still running", m.Name)
			}
		}
	}()
	if err := c.Member("c1").probe(ctx); err != nil {
		t.Fatalf("client agent: %v", err)
	}
	var leader string
	if err := Call(ctx, &http.Client{}, "GET", c.Member("c1").URL(), "/v1/status/leader", nil, &leader); err != nil || leader == "" {
		t.Fatalf("leader %q: %v", leader, err)
	}
}
