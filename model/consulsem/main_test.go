package consulsem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/internal/quick"
)

// The tests run on a private Consul agent (-dev) and a private etcd that
// TestMain starts for the package and stops at its end, each test on
// prefixes of its own. Without a consul (or etcd) binary, the tests of
// that backend skip, saying how to get one.

var (
	consulAgent *consul.Agent
	noConsul    error // why there is no agent
	etcdServer  *etcd.Server
	noEtcd      error
)

func TestMain(m *testing.M) {
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	log.SetOutput(io.Discard)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stopConsul, stopEtcd func()
	consulAgent, stopConsul, noConsul = consul.StartTemp(ctx, consul.Options{})
	if noConsul != nil {
		fmt.Printf("consulsem: no Consul agent (%v): Consul tests skip\n", noConsul)
	} else {
		defer stopConsul()
	}
	etcdServer, stopEtcd, noEtcd = etcd.StartTemp(ctx, etcd.Options{})
	if noEtcd != nil {
		fmt.Printf("consulsem: no etcd (%v): etcd tests skip\n", noEtcd)
	} else {
		defer stopEtcd()
	}
	return m.Run()
}

// A backend is one of the two, as the tests see it.
type backend struct {
	name string
	open func(t *testing.T, o Options) *Semaphore
}

var testBackends = []backend{
	{"consul", func(t *testing.T, o Options) *Semaphore {
		t.Helper()
		skipWithout(t, noConsul)
		s, err := Consul(consulAgent.Addr(), nil, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"etcd", func(t *testing.T, o Options) *Semaphore {
		t.Helper()
		skipWithout(t, noEtcd)
		s, err := Etcd(etcdClient(t), o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

func skipWithout(t *testing.T, why error) {
	quick.Skip(t, "a private Consul agent or etcd")
	t.Helper()
	if errors.Is(why, consul.ErrNoConsul) || errors.Is(why, etcd.ErrNoEtcd) {
		t.Skip(why)
	}
	if why != nil {
		t.Fatal(why)
	}
}

func etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: etcdServer.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// both runs f on each backend, in parallel subtests.
func both(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// uniquePrefix is a prefix of this test's own.
func uniquePrefix() string {
	var b [5]byte
	rand.Read(b[:])
	return fmt.Sprintf("consulsem-test/%x", b)
}

// ctx is a context that ends with the test, or after 60 s.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// acquire acquires a lease that must be granted.
func acquire(t *testing.T, s *Semaphore, prefix string, limit int, ttl time.Duration) Lease {
	t.Helper()
	l, err := s.Acquire(ctx(t), prefix, limit, ttl)
	if err != nil {
		t.Fatalf("acquire %s limit %d: %v", prefix, limit, err)
	}
	return l
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func verify(t *testing.T, s *Semaphore, prefix string, l Lease) bool {
	t.Helper()
	held, err := s.Verify(ctx(t), prefix, l.Token)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return held
}

// awaitGone polls (without renewing it) until l's session has let go of
// its contender key, and returns how long after since that was; it fails
// the test after limit.
func awaitGone(t *testing.T, s *Semaphore, prefix string, l Lease, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		st, err := s.read(ctx(t), prefix, false)
		if err != nil {
			t.Fatal(err)
		}
		if !st.alive(prefix, l.Token) {
			return time.Since(since)
		}
		if time.Since(since) > limit {
			t.Fatalf("session %s still alive %v after %v", l.Token, time.Since(since), since)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
