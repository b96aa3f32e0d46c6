package rabbitmq_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	faultproxy "github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// newCtl returns a Ctl for the test broker's node, or skips the test when
// rabbitmqctl does not reach it.
func newCtl(t *testing.T, url string, plain bool) *rabbitmq.Ctl {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("needs rabbitmqctl")
	}
	c := rabbitmq.NewCtl(nil, rabbitmq.VhostOf(url), plain)
	t.Cleanup(c.Close)
	if _, err := c.QueueNames(context.Background(), "lp-ctl-test-none-"); err != nil {
		t.Skipf("rabbitmqctl does not reach the broker's node: %v", err)
	}
	return c
}

// ctlCtx bounds a test of plain rabbitmqctl commands, a second or more
// each on a quiet machine; CI's, beside the rest of the suite, took 16 s
// a command (TestCtlModes/plain ran out of two minutes after some nine).
func ctlCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// awaitClosed waits until the client of c knows its connection is gone and
// returns the reason.
func awaitClosed(t *testing.T, c broker.Conn) error {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.Err() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client did not notice its connection closing within 5 s")
		}
	}
	return c.Err()
}

// Both query modes see the same queue, owner, messages and connection, and
// close it the same way.
func TestCtlModes(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t)
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "plain"}[plain], func(t *testing.T) {
			t.Parallel()
			if plain && testing.Short() {
				t.Skip("plain rabbitmqctl is slow")
			}
			ctl := newCtl(t, url, plain)
			if ctl.Fast() == plain {
				t.Fatalf("Fast = %v with plain %v (the session: %v)", ctl.Fast(), plain, ctl.SessionErr())
			}
			ctx := ctlCtx(t)
			prefix := rabbitmq.UniqueName("lp-ctl-test-") + "-"
			// The queue is exclusive: it goes with its connection.
			c, err := rabbitmq.New(url).Dial(ctx, broker.Config{Name: prefix + "A"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ch, err := c.Channel(ctx)
			if err != nil {
				t.Fatal(err)
			}
			x := prefix + "x"
			if _, err := ch.Declare(ctx, x, broker.DeclareOptions{Exclusive: true}); err != nil {
				t.Fatal(err)
			}
			if err := ch.Confirm(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := ch.Publish(ctx, broker.Publishing{Key: x, Mandatory: true}); err != nil {
				t.Fatal(err)
			}
			if names, err := ctl.QueueNames(ctx, prefix); err != nil || !slices.Equal(names, []string{x}) {
				t.Fatalf("QueueNames = %q, %v", names, err)
			}
			q, ok, err := ctl.Queue(ctx, x)
			if err != nil || !ok || q.OwnerPid == "" || q.Messages != 1 || q.Consumers != 0 || q.Durable || q.AutoDelete {
				t.Fatalf("Queue = %+v, %v, %v", q, ok, err)
			}
			if _, ok, err := ctl.Queue(ctx, prefix+"missing"); ok || err != nil {
				t.Fatalf("Queue(missing) = %v, %v", ok, err)
			}
			var conns map[string]string
			for tries, deadline := 0, time.Now().Add(3*time.Second); len(conns) == 0 && (tries < 3 || time.Now().Before(deadline)); tries++ {
				if conns, err = ctl.Connections(ctx, prefix); err != nil {
					t.Fatal(err)
				}
			}
			if len(conns) != 1 || conns[q.OwnerPid] != prefix+"A" {
				t.Fatalf("Connections = %q, want %s: %sA", conns, q.OwnerPid, prefix)
			}
			if alive, err := ctl.Alive(ctx, q.OwnerPid, prefix); err != nil || !alive {
				t.Fatalf("Alive = %v, %v", alive, err)
			}
			if n, err := ctl.Channels(prefix); err != nil || n != 1 {
				t.Fatalf("Channels = %d, %v", n, err)
			}
			if err := ctl.CloseConnection(ctx, q.OwnerPid, "lockprover test"); err != nil {
				t.Fatal(err)
			}
			if err := awaitClosed(t, c); broker.Code(err) != broker.ConnectionForced || !strings.Contains(err.Error(), "lockprover test") {
				t.Fatalf("after CloseConnection: %v, want 320 - lockprover test", err)
			}
			// Ten seconds and three looks at least: one plain look can
			// take longer than ten seconds on a loaded machine.
			for tries, deadline := 1, time.Now().Add(10*time.Second); ; tries++ {
				alive, err := ctl.Alive(ctx, q.OwnerPid, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if !alive {
					break
				}
				if tries >= 3 && time.Now().After(deadline) {
					t.Fatalf("the broker still holds the connection 10 s and %d looks after it closed", tries)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, ok, err := ctl.Queue(ctx, x); ok || err != nil {
				t.Fatalf("the exclusive queue after its owner closed: %v, %v", ok, err)
			}
		})
	}
}

// CloseConnectionsFrom closes the connections that come from a proxy's
// broker-side addresses, and none other.
func TestCloseConnectionsFrom(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t)
	ctl := newCtl(t, url, true)
	ctx := ctlCtx(t)
	px, through, err := faultproxy.ListenURL(url)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	prefix := rabbitmq.UniqueName("lp-ctl-test-") + "-"
	cut, err := rabbitmq.New(through).Dial(ctx, broker.Config{Name: prefix + "cut"})
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	other, err := rabbitmq.New(url).Dial(ctx, broker.Config{Name: prefix + "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := ctl.CloseConnectionsFrom(ctx, nil, "lockprover force-close"); err != nil {
		t.Fatalf("no addresses: %v", err)
	}
	if err := ctl.CloseConnectionsFrom(ctx, px.BrokerSide(), "lockprover force-close"); err != nil {
		t.Fatal(err)
	}
	if err := awaitClosed(t, cut); broker.Code(err) != broker.ConnectionForced {
		t.Fatalf("the proxied connection: %v, want 320", err)
	}
	if err := other.Err(); err != nil {
		t.Fatalf("another connection closed too: %v", err)
	}
}

// A failing rabbitmqctl is reported in full by the queries and StopApp and
// StartApp, and by its exit status alone by the faults and Restart, as the
// real-broker engine always said. (The shared broker is never stopped.)
func TestCtlCommandFails(t *testing.T) {
	ctx := ctlCtx(t)
	// $0 is "rabbitmqctl"; the arguments follow and are ignored.
	c := rabbitmq.NewCtl([]string{"sh", "-c", "echo no node >&2; exit 3", "rabbitmqctl"}, "/", true)
	defer c.Close()
	if c.Fast() {
		t.Fatal("a plain Ctl runs a session")
	}
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"StopApp", c.StopApp(ctx), "sh -c echo no node >&2; exit 3 rabbitmqctl stop_app: exit status 3: no node"},
		{"StartApp", c.StartApp(ctx), "sh -c echo no node >&2; exit 3 rabbitmqctl start_app: exit status 3: no node"},
		{"Restart", c.Restart(ctx), "rabbitmqctl stop_app: exit status 3"},
		{"CloseConnectionsFrom", c.CloseConnectionsFrom(ctx, []string{"127.0.0.1:1"}, "x"), "force-close needs rabbitmqctl: exit status 3"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.what, tc.err, tc.want)
		}
	}
	if _, err := c.QueueNames(ctx, "x"); err == nil || !strings.HasSuffix(err.Error(), "list_queues -p / name --no-table-headers: exit status 3: no node") {
		t.Errorf("QueueNames: %v", err)
	}
	if err := c.SessionErr(); err != nil {
		t.Errorf("SessionErr of a Ctl asked for plain commands: %v", err)
	}
	s := rabbitmq.NewCtl([]string{"sh", "-c", "echo no eval here >&2; exit 3", "rabbitmqctl"}, "/", false)
	if s.Fast() {
		t.Error("a session started on a command that fails")
	}
	if err := s.SessionErr(); err == nil || !strings.Contains(err.Error(), "the session ended (stderr: no eval here)") {
		t.Errorf("SessionErr = %v, want why the session did not start", err)
	}
}

func TestVhostOf(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://guest:guest@127.0.0.1:5672/":  "/",
		"amqp://guest:guest@127.0.0.1:5672":   "/",
		"amqp://guest:guest@127.0.0.1/%2f":    "/",
		"amqp://guest:guest@127.0.0.1/lp-v":   "lp-v",
		"amqp://guest:guest@127.0.0.1/a%2Fb?": "a/b",
	} {
		if got := rabbitmq.VhostOf(in); got != want {
			t.Errorf("VhostOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// A rabbitmqctl whose eval starts the session's loop but passes it no
// standard input (RabbitMQ 4.x's: the loop ends at its first read) is
// taken for what it is when the Ctl starts: plain commands, and why.
func TestCtlSessionThatReadsNothing(t *testing.T) {
	ctl := rabbitmq.NewCtl([]string{"sh", "-c", "echo .", "--"}, "/", false)
	defer ctl.Close()
	if ctl.Fast() || ctl.SessionErr() == nil || !strings.Contains(ctl.SessionErr().Error(), "first query") {
		t.Errorf("Fast %v, SessionErr %v: want plain commands, saying the first query failed", ctl.Fast(), ctl.SessionErr())
	}
}
