package redisserve_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// go-redis's PubSub, in RESP2 and RESP3: a subscription confirmed, a
// message published on another connection received, none once
// unsubscribed.
func TestPubSub(t *testing.T) {
	t.Parallel()
	for _, proto := range []int{2, 3} {
		_, s, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := redis.NewClient(&redis.Options{Addr: sp.Addrs()[0], Protocol: proto, MaxRetries: -1})
			defer c.Close()
			ps := c.Subscribe(ctx, "ch")
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil {
				return fmt.Errorf("subscribe: %w", err)
			}
			if n, err := c.Publish(ctx, "ch", "hello").Result(); err != nil || n != 1 {
				return fmt.Errorf("publish: %d %v, want 1 subscriber", n, err)
			}
			m, err := ps.ReceiveMessage(ctx)
			if err != nil || m.Channel != "ch" || m.Payload != "hello" {
				return fmt.Errorf("message: %v %v", m, err)
			}
			if err := ps.Unsubscribe(ctx, "ch"); err != nil {
				return err
			}
			if _, err := ps.Receive(ctx); err != nil {
				return fmt.Errorf("unsubscribe: %w", err)
			}
			if n, err := c.Publish(ctx, "ch", "again").Result(); err != nil || n != 0 {
				return fmt.Errorf("publish once unsubscribed: %d %v, want 0", n, err)
			}
			return nil
		}})
		for n, err := range errs {
			if err != nil {
				t.Errorf("RESP%d: %s: %v", proto, n, err)
			}
		}
		if u := s.Unserved(); len(u) > 0 {
			t.Errorf("RESP%d: unserved %q", proto, u)
		}
	}
}
