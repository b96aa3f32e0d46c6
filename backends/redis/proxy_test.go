package redis

import (
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A reply the proxy loses is the reply to the lock's next command, after
// the server applied it: the client's connection is cut instead (the
// command answers an error), OnDrop hears it once, a connection's
// handshake (HELLO) and a NOSCRIPT error pass (the script's EVAL is the
// one lost), and the next command goes through a new connection.
func TestProxyDropsOneReply(t *testing.T) {
	s := start(t, Options{})
	px, err := Listen(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	var drops atomic.Int32
	px.OnDrop(func() { drops.Add(1) })
	c := goredis.NewClient(&goredis.Options{Addr: px.Addr(), MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	// Armed before the client's first connection: its HELLO passes.
	px.DropReply()
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
}
