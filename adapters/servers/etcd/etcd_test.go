package etcd

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/host/proc/proctest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"
)

// start starts a private etcd for the test, stopped when it ends; it skips
// the test when there is no etcd binary.
func start(t *testing.T, o Options) *Server {
	t.Helper()
	began := time.Now()
	s, err := Start(ctx(t), t.TempDir(), o)
	if errors.Is(err, ErrNoEtcd) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd up on %s in %v", s.Addr(), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		// Killed after its grace, it is gone all the same (a loaded
		// machine), which is not what these tests judge.
		if err := s.Stop(); errors.Is(err, proc.ErrKilled) {
			t.Log(err)
		} else if err != nil {
			t.Error(err)
		}
	})
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func client(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ttl is the lease's remaining TTL in whole seconds (rounded down: 0 is
// under a second), -1 once it is gone.
func ttl(t *testing.T, c *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	r, err := c.TimeToLive(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.TTL
}

func TestFindHonoursTheEnvironment(t *testing.T) {
	t.Setenv("LOCKPROVER_ETCD", "/nonexistent/etcd")
	if _, err := Find(); !errors.Is(err, ErrNoEtcd) {
		t.Fatalf("Find with a missing $LOCKPROVER_ETCD: %v, want ErrNoEtcd", err)
	}
}

// The minimum TTL follows the election timeout: 1 s with this package's
// default, 2 s with etcd's own.
func TestMinTTL(t *testing.T) {
	for _, o := range []Options{{}, {HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: time.Second}} {
		s := start(t, o)
		g, err := client(t, s).Grant(ctx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(g.TTL) * time.Second; got != s.MinTTL() {
			t.Errorf("heartbeat %v, election %v: Grant(1) gave TTL %v, MinTTL says %v",
				o.HeartbeatInterval, o.ElectionTimeout, got, s.MinTTL())
		}
	}
}

// A restart keeps leases and gives them a fresh TTL: a 5 s lease (long
// enough to outlive the client's reconnection backoff) is alive 8 s
// after its grant, across a restart that kept the server down for 6 s.
func TestRestartKeepsLeasesAndResetsTheirTTL(t *testing.T) {
	s := start(t, Options{})
	c := client(t, s)
	g, err := c.Grant(ctx(t), 5)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	pid := s.PID()
	if err := s.Restart(ctx(t), 6*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("PID %d after the restart, was %d", s.PID(), pid)
	}
	for time.Since(granted) < 8*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if left := ttl(t, c, g.ID); left < 0 { // 0: under a second left
		t.Fatalf("lease gone %v after its grant: the restart did not keep it or reset its TTL (TTL %d)", time.Since(granted), left)
	}
	t.Logf("5s lease alive %v after its grant, across a 6s downtime", time.Since(granted).Round(time.Millisecond))
}

func TestStopLeavesNoProcess(t *testing.T) {
	s := start(t, Options{})
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still exists after Stop", pid)
	}
	if _, err := http.Get(s.URL() + "/health"); err == nil {
		t.Fatal("etcd still answers after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMain(m *testing.M) {
	proctest.Child(childEnv, startChild)
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	log.SetOutput(io.Discard)
	if _, err := Find(); err != nil {
		os.Stdout.WriteString("adapters/servers/etcd: " + err.Error() + ": server tests skip\n")
	}
	os.Exit(m.Run())
}
