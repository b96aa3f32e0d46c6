package conform

import (
	"context"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// openServer opens a Server on the test broker (or skips) and cleans up
// after the test.
func openServer(t *testing.T, o Options) *Server {
	t.Helper()
	o.URL = rabbitmqtest.URL(t)
	tg, err := Open(context.Background(), o)
	if err != nil {
		t.Skipf("no usable broker: %v", err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return tg
}

// Both query modes see the same queue, owner, messages, and close the same
// connection.
func TestCtlModes(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "plain"}[plain], func(t *testing.T) {
			t.Parallel()
			if plain && testing.Short() {
				t.Skip("plain rabbitmqctl is slow")
			}
			tg := openServer(t, Options{PlainCtl: plain})
			if tg.FastCtl() == plain {
				t.Fatalf("FastCtl = %v with PlainCtl %v (the session: %v)", tg.FastCtl(), plain, tg.CtlSessionErr())
			}
			env := tg.NewEnv()
			defer env.Close()
			ctx := context.Background()
			c, err := env.Dial(ctx, broker.Config{Name: "A"})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := c.Channel(ctx)
			if err != nil {
				t.Fatal(err)
			}
			x := env.Prefix() + "X"
			if _, err := ch.Declare(ctx, x, broker.DeclareOptions{Exclusive: true}); err != nil {
				t.Fatal(err)
			}
			ch.Confirm(ctx)
			if _, err := ch.Publish(ctx, broker.Publishing{Key: x, Mandatory: true}); err != nil {
				t.Fatal(err)
			}
			st, ok, err := env.Inspect(x)
			want := semantics.QueueState{Owner: "A", Messages: 1}
			if err != nil || !ok || st != want {
				t.Fatalf("Inspect = %+v, %v, %v; want %+v", st, ok, err, want)
			}
			if _, ok, err := env.Inspect(env.Prefix() + "missing"); ok || err != nil {
				t.Fatalf("Inspect(missing) = %v, %v", ok, err)
			}
			env.Settle = true
			start := time.Now()
			if err := env.Fault("force-close", "A"); err != nil {
				t.Fatal(err)
			}
			t.Logf("force-close took %v", time.Since(start))
			if code := broker.Code(c.Err()); code != broker.ConnectionForced {
				t.Fatalf("conn.Err() = %v, want 320", c.Err())
			}
			if _, ok, err := env.Inspect(x); ok || err != nil {
				t.Fatalf("after force-close: Inspect = %v, %v", ok, err)
			}
		})
	}
}

// Settle counts the broker's channel processes of the Env's connections and
// waits until they match the channels the clients have open.
func TestSettleCountsChannels(t *testing.T) {
	tg := openServer(t, Options{})
	if !tg.FastCtl() {
		t.Skip("the rabbitmqctl eval session does not start")
	}
	env := tg.NewEnv()
	defer env.Close()
	env.Settle = true
	ctx := context.Background()
	c, err := env.Dial(ctx, broker.Config{Name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	var chans []broker.Channel
	for i := 0; i < 3; i++ {
		ch, err := c.Channel(ctx)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	count := func() int {
		n, err := tg.ctl.Channels(env.Prefix())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 3 {
		t.Fatalf("broker runs %d channels, want 3", n)
	}
	chans[0].Close()
	// A channel error closes another one.
	if _, err := chans[1].Declare(ctx, env.Prefix()+"missing", broker.DeclareOptions{Passive: true}); broker.Code(err) != broker.NotFound {
		t.Fatalf("passive declare of a missing queue: %v", err)
	}
	if err := env.settle(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after settle the broker runs %d channels, want 1", n)
	}
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
}
