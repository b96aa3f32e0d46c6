package redlock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/internal/quick"
)

// The tests run on private redis-server instances (package
// adapters/servers/redis): three shared by the tests that do not harm a server,
// started on first use and stopped at the end, and servers of a test's own
// for the tests that kill one. Without redis-server every test skips.

var (
	sharedOnce sync.Once
	sharedDir  string
	sharedSrv  []*redis.Server
	sharedErr  error
)

func TestMain(m *testing.M) {
	// A killed server makes go-redis log its failed dials.
	goredis.SetLogger(quiet{})
	code := m.Run()
	if code == 0 && leftBehind() {
		code = 1
	}
	redis.StopAll(sharedSrv)
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// shared returns the shared servers' addresses (three), skipping the test
// without redis-server.
func shared(t testing.TB) []string {
	quick.Skip(t, "private redis-servers")
	t.Helper()
	sharedOnce.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "redlock-test-"); sharedErr != nil {
			return
		}
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sharedSrv, sharedErr = redis.StartN(c, sharedDir, 3, redis.Options{})
	})
	if errors.Is(sharedErr, redis.ErrNoRedis) {
		t.Skipf("skipped: %v", sharedErr)
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return redis.Addrs(sharedSrv)
}

// own starts n servers of the test's own, stopped when it ends.
func own(t testing.TB, n int, o redis.Options) []*redis.Server {
	quick.Skip(t, "private redis-servers")
	t.Helper()
	ss, err := redis.StartN(ctx(t), t.TempDir(), n, o)
	if errors.Is(err, redis.ErrNoRedis) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.StopAll(ss) })
	return ss
}

// ctx is a context that ends with the test, or after 30 s.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// key is a key of the test's own.
func key(t testing.TB) string {
	var b [6]byte
	io.ReadFull(rand.Reader, b[:])
	return fmt.Sprintf("t-%s-%x", t.Name(), b)
}

// testTimeout is the per-server timeout of the tests' locks unless they
// set one: generous, because this machine is shared (load averages of 17
// on two CPUs were seen, and the default of a tenth of a 100 ms ttl then
// times out); only tests of timing set their own.
const testTimeout = 2 * time.Second

// newRedlock is a Redlock on addrs, closed when the test ends.
func newRedlock(t testing.TB, addrs []string, o Options) *Redlock {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = testTimeout
	}
	r, err := New(addrs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// newPriority is a Priority on addrs, closed when the test ends.
func newPriority(t testing.TB, addrs []string, o Options) *Priority {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = testTimeout
	}
	p, err := NewPriority(addrs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// raw is a plain client on addr for looking at the server's keys, closed
// when the test ends.
func raw(t testing.TB, addr string) *goredis.Client {
	c := client(addr, 4)
	t.Cleanup(func() { c.Close() })
	return c
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func acquire(t testing.TB, r *Redlock, key string, ttl time.Duration) Lease {
	t.Helper()
	l, err := r.Acquire(ctx(t), key, ttl)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	return l
}

// waitGone polls until key is gone from the server at addr, failing after
// a deadline.
func waitGone(t testing.TB, c *goredis.Client, key string, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for c.Exists(ctx(t), key).Val() == 1 {
		if time.Now().After(end) {
			t.Fatalf("%s still there after %v", key, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var redisNone = redis.Options{Persistence: redis.None}

func addrsOf(ss []*redis.Server) []string { return redis.Addrs(ss) }

// leftBehind reports keys the tests left on the shared servers that would
// stay for ever: every key but the fence counters must expire (or have
// been deleted). Keys that still expire (a late acknowledgement, a wake
// list) are only counted.
func leftBehind() bool {
	bad := false
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range sharedSrv {
		r, err := s.Do(c, "KEYS", "*")
		if err != nil {
			fmt.Printf("redlock: keys of %s: %v\n", s.Addr(), err)
			return true
		}
		expiring := 0
		for _, k := range r.([]any) {
			k := k.(string)
			if strings.HasSuffix(k, ":fence") {
				continue
			}
			if t, _ := s.Do(c, "PTTL", k); t == int64(-1) {
				fmt.Printf("redlock: %s: key %q left behind without expiry\n", s.Addr(), k)
				bad = true
			} else {
				expiring++
			}
		}
		if expiring > 0 {
			fmt.Printf("redlock: %s: %d keys left behind, all expiring\n", s.Addr(), expiring)
		}
	}
	return bad
}
