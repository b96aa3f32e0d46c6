package redis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A reply that reaches the proxy after its client gave up waiting and
// closed the connection is lost to nobody: the proxy does not spend its
// armed drop on it (OnDrop does not hear of it, so no history records a
// lost reply that struck no operation), and the drop strikes the next
// reply the client does wait for. A slow machine gives this order: the
// client's own read timeout ends the operation before the server answers.
// Here the server is paused until the client has timed out.
func TestProxyLosesNoReplyToAClientGone(t *testing.T) {
	s := start(t, Options{})
	px, err := Listen(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	var drops atomic.Int32
	px.OnDrop(func() { drops.Add(1) })
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
