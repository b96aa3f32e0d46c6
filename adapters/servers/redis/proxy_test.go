package redis

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A reply the proxy loses is the reply to the lock's next command, after
// the server applied it: the client's connection is cut instead (the
// command answers an error), OnDrop hears it once, a connection's
// handshake (HELLO), a ready check (INFO, as ioredis sends on connecting)
// and a NOSCRIPT error pass (the script's EVAL is the
// one lost), and the next command goes through a new connection.
func TestProxyDropsOneReply(t *testing.T) {
	s, px, drops := proxied(t)
	c := goredis.NewClient(&goredis.Options{Addr: px.Addr(), MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	// Armed before the client's first connection: its HELLO passes, and
	// so does a ready check's INFO.
	px.DropReply()
	if err := c.Info(ctx(t), "server").Err(); err != nil {
		t.Fatalf("INFO, a ready check, lost its reply to the armed drop: %v", err)
	}
	if err := c.Set(ctx(t), "a", "1", 0).Err(); err == nil {
		t.Fatal("SET a answered, its reply armed to be lost")
	}
	if got := do(t, s, "GET", "a"); got != "1" {
		t.Errorf("SET a was not applied: GET a = %v", got)
	}
	if v, err := c.Get(ctx(t), "a").Result(); err != nil || v != "1" {
		t.Errorf("after the drop, GET a = %q, %v: want a new connection to answer", v, err)
	}
	// A script the server lacks: EVALSHA's NOSCRIPT passes, the EVAL's
	// reply is lost after the script ran.
	px.DropReply()
	script := goredis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
	if err := script.Run(ctx(t), c, []string{"b"}, "2").Err(); err == nil {
		t.Fatal("the script answered, its reply armed to be lost")
	}
	if got := do(t, s, "GET", "b"); got != "2" {
		t.Errorf("the script's EVAL was not applied: GET b = %v", got)
	}
	if n := drops.Load(); n != 2 {
		t.Errorf("OnDrop heard %d drops, want 2", n)
	}
	// Unarmed, and through a partition: every reply arrives.
	px.Partition()
	done := make(chan error, 1)
	go func() { done <- c.Set(ctx(t), "c", "3", 0).Err() }()
	select {
	case err := <-done:
		t.Fatalf("SET c answered through a partition: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	px.Heal()
	if err := <-done; err != nil {
		t.Errorf("SET c after the heal: %v", err)
	}
	if n := drops.Load(); n != 2 {
		t.Errorf("OnDrop heard %d drops, want 2", n)
	}
	// The trace has each command, its answer, and the lost replies.
	var lines []string
	for _, tr := range px.Trace() {
		lines = append(lines, tr.What)
	}
	trace := strings.Join(lines, "\n")
	for _, want := range []string{"-> SET", "<- SET +OK LOST (drop-reply), the connection cut", "<- GET $1", "<- SET +OK"} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %q:\n%s", want, trace)
		}
	}
}

// proxied starts a redis-server with a Proxy in front of it, and counts
// the replies the proxy loses (OnDrop); both stop with the test.
func proxied(t *testing.T) (*Server, *Proxy, *atomic.Int32) {
	t.Helper()
	s := start(t, Options{})
	px, err := Listen(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	drops := &atomic.Int32{}
	px.OnDrop(func() { drops.Add(1) })
	return s, px, drops
}

// A reply that reaches the proxy after its client gave up waiting and
// closed the connection is lost to nobody: the proxy does not spend its
// armed drop on it (OnDrop does not hear of it, so no history records a
// lost reply that struck no operation), and the drop strikes the next
// reply the client does wait for. A slow machine gives this order: the
// client's own read timeout ends the operation before the server answers.
// Here the server is paused until the client has timed out.
func TestProxyLosesNoReplyToAClientGone(t *testing.T) {
	s, px, drops := proxied(t)
	c := goredis.NewClient(&goredis.Options{Addr: px.Addr(), MaxRetries: -1, ReadTimeout: 100 * time.Millisecond, PoolSize: 1})
	defer c.Close()
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	px.DropReply()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(context.Background(), "a", "1", 0).Err(); err == nil {
		t.Fatal("SET a answered by a paused server")
	}
	time.Sleep(100 * time.Millisecond) // the client's connection closes meanwhile
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	// The server applies the SET and answers a connection whose client is
	// gone.
	deadline := time.Now().Add(5 * time.Second)
	for do(t, s, "GET", "a") != "1" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := drops.Load(); n != 0 {
		t.Fatalf("OnDrop heard %d drops of a reply whose client had gone, want 0", n)
	}
	if err := c.Set(ctx(t), "b", "1", 0).Err(); err == nil {
		t.Error("SET b answered: the drop should still be armed, and strike it")
	}
	if n := drops.Load(); n != 1 {
		t.Errorf("OnDrop heard %d drops after SET b, want 1", n)
	}
}
