package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/proc"

	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
)

// startCluster starts a 3-member cluster in a lab of its own, or skips
// saying what this machine lacks; cleanup stops it and removes the lab.
func startCluster(t *testing.T) (*netns.Lab, *Cluster) {
	t.Helper()
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	return startClusterOf(t, Options{})
}

// startClusterOf is startCluster with o.
func startClusterOf(t *testing.T, o Options) (*netns.Lab, *Cluster) {
	t.Helper()
	lab := netnstest.Lab(t, "e1", "e2", "e3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	c, err := StartCluster(ctx, lab, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 members healthy in %v", time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		lab.Heal(context.Background())
		// A member that took longer than Stop's grace to end was killed:
		// gone all the same (a loaded machine), which is said, not failed.
		if err := c.Stop(); errors.Is(err, proc.ErrKilled) {
			t.Logf("Stop: %v", err)
		} else if err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return lab, c
}

// TestClusterStartsAndLosesQuorum: three members elect a leader; with one
// member isolated the other two stay healthy, and the isolated one loses
// its leader (its /health turns false), and it is healthy again once healed.
func TestClusterStartsAndLosesQuorum(t *testing.T) {
	lab, c := startCluster(t)
	ctx := context.Background()
	for _, m := range c.Members {
		if err := health(ctx, m.URL()); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if m.PID() == 0 {
			t.Errorf("%s: no process", m.Name)
		}
	}
	if err := lab.Isolate(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	// The caller's namespace still reaches e1 (Isolate cuts it from the
	// other hosts only); within a few election timeouts it has no leader.
	deadline := time.Now().Add(15 * time.Second)
	for health(ctx, c.Member("e1").URL()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("e1 isolated still reports a leader after 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range []string{"e2", "e3"} {
		if err := waitHealthy(ctx, c.Member(n), 15*time.Second); err != nil {
			t.Errorf("%s with a majority: %v", n, err)
		}
	}
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitHealthy(ctx, c.Member("e1"), 15*time.Second); err != nil {
		t.Errorf("e1 healed: %v", err)
	}
}

func waitHealthy(ctx context.Context, m *Member, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := health(ctx, m.URL())
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterBadHost: a member named for a host the lab
// lacks is refused before anything starts.
func TestClusterBadHost(t *testing.T) {
	if err := netns.Preflight(); err != nil {
		t.Skipf("no etcd cluster here: %v", err)
	}
	lab, err := netns.New(context.Background(), "e1")
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	_, err = StartCluster(context.Background(), lab, t.TempDir(), Options{}, "e1", "nosuch")
	if errors.Is(err, ErrNoEtcd) {
		t.Skip(err) // the binary is looked for first
	}
	if err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("StartCluster with host nosuch: %v, want an error naming it", err)
	}
}
