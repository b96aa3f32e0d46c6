package consulsem

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
)

// What a backend restart does to the semaphore, on private servers of the
// tests' own: the facts a checker of restarts needs.

func privateAgent(t *testing.T, mode consul.Mode) *consul.Agent {
	t.Helper()
	skipWithout(t, noConsul)
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := consul.Start(c, t.TempDir(), consul.Options{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop() })
	return a
}

// A Dev agent forgets everything: the holder's lease is gone, another
// acquire gets the slot at once, and the fences start again from the
// agent's fresh indexes, below the ones granted before.
func TestConsulDevRestartForgets(t *testing.T) {
	t.Parallel()
	a := privateAgent(t, consul.Dev)
	s, err := Consul(a.Addr(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := uniquePrefix()
	var before Lease
	for range 20 { // move the indexes on
		before = acquire(t, s, p, 1, 10*time.Second)
		wantErr(t, "release", s.Release(ctx(t), p, before.Token), nil)
	}
	held := acquire(t, s, p, 1, 10*time.Second)
	if err := a.Restart(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if verify(t, s, p, held) {
		t.Fatal("held after a dev agent restarted")
	}
	after := acquire(t, s, p, 1, 10*time.Second)
	t.Logf("fences: %d before the restart, %d after", held.Fence, after.Fence)
	if after.Fence >= held.Fence {
		t.Fatalf("fence %d after the restart, %d before: want it to start again lower", after.Fence, held.Fence)
	}
	wantErr(t, "refresh of the forgotten lease", s.Refresh(ctx(t), p, held.Token), ErrExpired)
}

// A Persistent agent keeps the holder, and its session's TTL timer starts
// again: the lease outlives 2 x TTL counted from its last renewal by the
// downtime.
func TestConsulPersistentRestartKeeps(t *testing.T) {
	t.Parallel()
	a := privateAgent(t, consul.Persistent)
	s, err := Consul(a.Addr(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := uniquePrefix()
	l := acquire(t, s, p, 1, 2*time.Second)
	granted := time.Now()
	if err := a.Restart(ctx(t), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Since(granted)
	if !verify(t, s, p, l) {
		t.Fatalf("not held %v after the grant (TTL 2s, invalidation due at 4s without the restart)", back)
	}
	_, err = s.Acquire(ctx(t), p, 1, 2*time.Second)
	wantErr(t, "acquire beside the kept lease", err, ErrFull)
	gone := awaitGone(t, s, p, l, granted, 30*time.Second)
	t.Logf("TTL 2s: agent back %v after the grant, session invalidated %v after it", back.Round(time.Millisecond), gone.Round(time.Millisecond))
	// The timer restarted once the agent was up again, after the 3 s
	// downtime at least: no invalidation before 3 s + 2 x TTL.
	if gone < 7*time.Second {
		t.Errorf("invalidated %v after the grant, the agent back at %v: the timer was not reset", gone, back)
	}
	after := acquire(t, s, p, 1, 2*time.Second)
	if after.Fence <= l.Fence {
		t.Fatalf("fence %d after the restart, %d before", after.Fence, l.Fence)
	}
}

// etcd keeps keys, leases and its revision across a restart, and gives the
// leases a fresh TTL.
func TestEtcdRestartKeeps(t *testing.T) {
	t.Parallel()
	skipWithout(t, noEtcd)
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := etcd.Start(c, t.TempDir(), etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := Etcd(cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := uniquePrefix()
	l := acquire(t, s, p, 1, 5*time.Second) // outlives the client's reconnection backoff
	granted := time.Now()
	if err := srv.Restart(ctx(t), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Since(granted)
	var held bool
	for end := time.Now().Add(10 * time.Second); ; { // the client reconnects
		held, err = s.Verify(ctx(t), p, l.Token)
		if err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !held {
		t.Fatalf("held %v (%v) %v after the grant of a 5s lease, etcd back at %v", held, err, time.Since(granted), back)
	}
	gone := awaitGone(t, s, p, l, granted, 30*time.Second)
	t.Logf("TTL 5s: etcd back %v after the grant, lease expired %v after it", back.Round(time.Millisecond), gone.Round(time.Millisecond))
	if gone < 8*time.Second { // 3 s downtime + a fresh TTL
		t.Errorf("expired %v after the grant, etcd back at %v: the TTL was not renewed", gone, back)
	}
	after := acquire(t, s, p, 1, 2*time.Second)
	if after.Fence <= l.Fence {
		t.Fatalf("fence %d after the restart, %d before", after.Fence, l.Fence)
	}
}

// Consul renews a session until it invalidates it, at twice its TTL: a
// refresh between one and two TTLs after the last one succeeds. etcd's
// lease is gone after one TTL (plus its sweep).
func TestRefreshBetweenOneAndTwoTTLs(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		s, p := b.open(t, Options{}), uniquePrefix()
		l := acquire(t, s, p, 1, 2*time.Second)
		granted := time.Now()
		tm := s.Timing()
		time.Sleep(l.TTL + l.TTL/2 + tm.Sweep) // 1.5 TTL, past etcd's sweep
		invoked := time.Since(granted)
		err := s.Refresh(ctx(t), p, l.Token)
		switch b.name {
		case "consul":
			if invoked > 2*l.TTL-200*time.Millisecond {
				t.Skipf("the refresh was invoked %v after the grant: too close to 2 x TTL on this loaded machine", invoked)
			}
			wantErr(t, "refresh 1.5 TTL after the grant", err, nil)
		case "etcd":
			wantErr(t, "refresh 1.5 TTL (+ sweep) after the grant", err, ErrExpired)
		}
		t.Logf("%s: refresh %v after the grant of a %v lease: %v", b.name, invoked.Round(time.Millisecond), l.TTL, err)
		if err == nil {
			wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
		}
	})
}

// Every path out of an operation removes what it created: after grants,
// fulls, mismatches, lost races and releases, a private backend holds no
// session or lease, and no key but the lock key, with no holder.
func TestNothingLeftBehind(t *testing.T) {
	t.Parallel()
	exercise := func(t *testing.T, s, other *Semaphore) {
		p := uniquePrefix()
		held := acquire(t, s, p, 2, 10*time.Second)
		second := acquire(t, s, p, 2, 10*time.Second)
		_, err := s.Acquire(ctx(t), p, 2, 10*time.Second)
		wantErr(t, "full", err, ErrFull)
		_, err = s.Acquire(ctx(t), p, 3, 10*time.Second)
		wantErr(t, "mismatch", err, ErrMismatch)
		wantErr(t, "release", s.Release(ctx(t), p, second.Token), nil)
		_, err = interleave(t, s, p, 2, func() { second = acquire(t, other, p, 2, 10*time.Second) })
		wantErr(t, "the acquire that lost its race", err, ErrFull)
		for _, l := range []Lease{held, second} {
			wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
		}
		assertEmpty(t, s, p)
	}
	t.Run("consul", func(t *testing.T) {
		t.Parallel()
		a := privateAgent(t, consul.Dev)
		s, err := Consul(a.Addr(), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		other, err := Consul(a.Addr(), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		exercise(t, s, other)
		var sessions []struct{ ID, Name string }
		if err := getJSON(ctx(t), a.URL()+"/v1/session/list", &sessions); err != nil {
			t.Fatal(err)
		}
		for _, ses := range sessions {
			t.Errorf("session %s (%s) left behind", ses.ID, ses.Name)
		}
	})
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		skipWithout(t, noEtcd)
		srv, err := etcd.Start(ctx(t), t.TempDir(), etcd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Stop()
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		s, err := Etcd(cli, Options{})
		if err != nil {
			t.Fatal(err)
		}
		other, err := Etcd(cli, Options{})
		if err != nil {
			t.Fatal(err)
		}
		exercise(t, s, other)
		ls, err := cli.Leases(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls.Leases {
			t.Errorf("lease %016x left behind", int64(l.ID))
		}
	})
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
