package etcd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterKeepAliveCutOff measures what a holder whose client reaches
// only one member sees once that member is cut off from the other two:
// its keepalive stream's answers and its end, its watch of the lock's
// prefix, and when the lease is gone as the majority sees it. The member
// cut off is a follower (the leader's case is
// TestClusterLeaseTTLAtLeaderChange's). LOCKPROVER_CLUSTER_ROWS=1 runs it.
func TestClusterKeepAliveCutOff(t *testing.T) {
	if os.Getenv("LOCKPROVER_CLUSTER_ROWS") == "" {
		t.Skip("measures docs/consul-semaphore.md's cluster rows: LOCKPROVER_CLUSTER_ROWS=1 to run it")
	}
	lab, c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The follower to cut off: a member that is not the leader.
	all, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	var cut *Member
	var rest []string
	for _, m := range c.Members {
		s, err := all.Status(ctx, m.URL())
		if err != nil {
			t.Fatal(err)
		}
		if s.Header.MemberId != s.Leader && cut == nil {
			cut = m
		} else {
			rest = append(rest, m.URL())
		}
	}
	holder, err := clientv3.New(clientv3.Config{Endpoints: []string{cut.URL()}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	majority, err := clientv3.New(clientv3.Config{Endpoints: rest, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer majority.Close()
	const ttl = 5
	g, err := holder.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	key := "lprows/" + fmt.Sprint(time.Now().UnixNano())
	if _, err := holder.Put(ctx, key, "held", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := holder.KeepAlive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	watch := holder.Watch(ctx, "lprows/", clientv3.WithPrefix())
	time.Sleep(2 * time.Second)
	t0 := time.Now()
	if err := lab.Isolate(ctx, cut.Name); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kaSeen, watchSeen, majSeen []string
	var kaClosed, leaseGone time.Duration // 0: not seen
	note := func(s *[]string, f string, a ...any) {
		mu.Lock()
		*s = append(*s, fmt.Sprintf("%.1fs: ", time.Since(t0).Seconds())+fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	deadline := t0.Add(40 * time.Second)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		last := int64(-1)
		for time.Now().Before(deadline) {
			select {
			case r, ok := <-ka:
				if !ok {
					note(&kaSeen, "keepalive channel closed")
					mu.Lock()
					kaClosed = time.Since(t0)
					mu.Unlock()
					return
				}
				if r.TTL != last {
					note(&kaSeen, "keepalive answer, TTL %d", r.TTL)
					last = r.TTL
				}
			case <-time.After(time.Until(deadline)):
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			select {
			case w, ok := <-watch:
				if !ok {
					note(&watchSeen, "watch channel closed")
					return
				}
				for _, e := range w.Events {
					note(&watchSeen, "%s %s", e.Type, e.Kv.Key)
				}
				if err := w.Err(); err != nil {
					note(&watchSeen, "watch error: %v", err)
				}
			case <-time.After(time.Until(deadline)):
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		last := ""
		for time.Now().Before(deadline) {
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			r, err := majority.TimeToLive(qctx, g.ID)
			qcancel()
			s := ""
			switch {
			case err != nil:
				s = "error: " + err.Error()
			case r.TTL < 0:
				s = "lease gone"
			default:
				s = "lease alive"
			}
			if s != last {
				note(&majSeen, "%s", s)
				last = s
				if s == "lease gone" {
					mu.Lock()
					leaseGone = time.Since(t0)
					mu.Unlock()
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	wg.Wait()
	t.Logf("row: member %s (a follower, the holder's only endpoint) cut off at 0s, lease TTL %d s", cut.Name, ttl)
	t.Logf("row: the holder's keepalive: %s", strings.Join(kaSeen, "; "))
	t.Logf("row: the holder's watch of the lock's prefix: %s", strings.Join(watchSeen, "; "))
	t.Logf("row: the lease, as the majority sees it: %s", strings.Join(majSeen, "; "))
	// K.2: the majority drops the lease about a TTL after the cut, the
	// holder's keepalive channel closes within a couple of seconds of
	// that, and its watch, on the cut-off member, never hears of it.
	ttlD := time.Duration(ttl) * time.Second
	if leaseGone == 0 || leaseGone > ttlD+3*time.Second {
		t.Errorf("the majority dropped the lease at %v (0: never), want within a TTL and 3 s of the cut", leaseGone)
	}
	if kaClosed == 0 || kaClosed > ttlD+3*time.Second || (leaseGone != 0 && (kaClosed-leaseGone > 2*time.Second || leaseGone-kaClosed > 2*time.Second)) {
		t.Errorf("the holder's keepalive closed at %v (0: never), the lease dropped at %v: want both about a TTL after the cut", kaClosed, leaseGone)
	}
	for _, w := range watchSeen {
		if strings.Contains(w, "DELETE") {
			t.Errorf("the cut-off holder's watch saw %s", w)
		}
	}
}
