package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterLeaseTTLAtLeaderChange measures what a lease's remaining TTL
// is once the leader is isolated and another member takes over: etcd's
// lessor Promote gives every lease a fresh TTL on the new leader, so the
// remaining TTL goes back up instead of carrying on down.
func TestClusterLeaseTTLAtLeaderChange(t *testing.T) {
	lab, c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leaderOf := func(eps []string) (string, error) {
		cl, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second})
		if err != nil {
			return "", err
		}
		defer cl.Close()
		for _, m := range c.Members {
			if !contains(eps, m.URL()) {
				continue
			}
			s, err := cl.Status(ctx, m.URL())
			if err == nil && s.Header.MemberId == s.Leader {
				return m.Name, nil
			}
		}
		return "", nil
	}
	old, err := leaderOf(c.Endpoints())
	if err != nil || old == "" {
		t.Fatalf("no leader: %v", err)
	}
	var rest []string
	for _, m := range c.Members {
		if m.Name != old {
			rest = append(rest, m.URL())
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: rest, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const ttl = 10
	g, err := cl.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	before, err := cl.TimeToLive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := lab.Isolate(ctx, old); err != nil {
		t.Fatal(err)
	}
	var nu string
	for nu == "" || nu == old {
		if time.Since(t0) > 20*time.Second {
			t.Fatal("no new leader 20 s after isolating the old one")
		}
		time.Sleep(50 * time.Millisecond)
		nu, _ = leaderOf(rest)
	}
	elected := time.Since(t0)
	after, err := cl.TimeToLive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lease TTL %d s: %d s left before; leader %s isolated, %s leader %v later; %d s left after",
		ttl, before.TTL, old, nu, elected.Round(time.Millisecond), after.TTL)
	if after.TTL <= before.TTL {
		t.Errorf("remaining TTL %d s after the leader change, %d s before: want it renewed", after.TTL, before.TTL)
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
