package rabbitmq_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// declare declares queues on a connection of its own named name, and
// returns it; exclusive ones are held by it.
func declare(t *testing.T, url, name string, o broker.DeclareOptions, queues ...string) broker.Conn {
	t.Helper()
	ctx := ctlCtx(t)
	c, err := rabbitmq.New(url).Dial(ctx, broker.Config{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := ch.Declare(ctx, q, o); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// exist is which of names exist.
func exist(t *testing.T, url string, names ...string) []string {
	t.Helper()
	ctx := ctlCtx(t)
	c, err := rabbitmq.New(url).Dial(ctx, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	found, err := rabbitmq.Probe(ctx, c, names)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range found {
		out = append(out, f.Name)
	}
	return out
}

// Given names, Cleanup deletes those under the prefix over AMQP alone,
// waiting for an exclusive queue of a killed connection to be released,
// and leaves the others alone.
func TestCleanupNames(t *testing.T) {
	url := rabbitmqtest.URL(t)
	prefix := rabbitmq.UniqueName("lp-cleanup-test-") + "-"
	outside := rabbitmq.UniqueName("lp-cleanup-test-other-")
	durable, exclusive, never := prefix+"durable", prefix+"exclusive", prefix+"never"
	declare(t, url, prefix+"d", broker.DeclareOptions{Durable: true}, durable, outside)
	t.Cleanup(func() { rabbitmq.Cleanup(context.Background(), url, outside, outside) })
	holder := declare(t, url, prefix+"x", broker.DeclareOptions{Exclusive: true}, exclusive)
	c, err := rabbitmq.New(url).Dial(ctlCtx(t), broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	found, err := rabbitmq.Probe(ctlCtx(t), c, []string{durable, never, exclusive})
	c.Close()
	if want := []rabbitmq.Found{{Name: durable}, {Name: exclusive, Exclusive: true}}; err != nil || !slices.Equal(found, want) {
		t.Fatalf("Probe = %+v, %v; want %+v", found, err, want)
	}

	// Held by a live connection, and no Ctl to close it: reported left
	// after the rounds it is given (a deadline instead would have to leave
	// room for the dial on a loaded machine).
	cl := &rabbitmq.Cleaner{URL: url, Rounds: 3}
	left, err := cl.Cleanup(ctlCtx(t), prefix, durable, exclusive, never, outside)
	cl.Close()
	if err != nil || !slices.Equal(left, []string{exclusive}) {
		t.Fatalf("with the holder alive: left %q, %v; want %q", left, err, exclusive)
	}
	if got := exist(t, url, durable, outside); !slices.Equal(got, []string{outside}) {
		t.Fatalf("after the first cleanup %q exist, want only %q", got, outside)
	}

	rabbitmq.KillSocket(holder)
	start := time.Now()
	left, err = rabbitmq.Cleanup(ctlCtx(t), url, prefix, durable, exclusive, never, outside)
	t.Logf("cleanup after the kill: %v", time.Since(start))
	if err != nil || left != nil {
		t.Fatalf("after the kill: left %q, %v", left, err)
	}
	if got := exist(t, url, durable, exclusive, outside); !slices.Equal(got, []string{outside}) {
		t.Fatalf("after the cleanup %q exist, want only %q", got, outside)
	}
}

// With a Ctl, a Cleaner lists the queues itself and closes the connections
// under the prefix that hold one, but not its own; Rounds bounds it.
func TestCleanerWithCtl(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t)
	ctl := newCtl(t, url, false)
	prefix := rabbitmq.UniqueName("lp-cleanup-test-") + "-"
	p1, p2 := prefix+"1-", prefix+"2-"
	a := declare(t, url, p1+"A", broker.DeclareOptions{Exclusive: true}, p1+"x")
	b := declare(t, url, p2+"B", broker.DeclareOptions{Durable: true}, p2+"d")

	bounded := &rabbitmq.Cleaner{URL: url, Rounds: 2}
	defer bounded.Close()
	left, err := bounded.Cleanup(ctlCtx(t), prefix, p1+"x")
	if err != nil || !slices.Equal(left, []string{p1 + "x"}) {
		t.Fatalf("2 rounds, no Ctl: left %q, %v", left, err)
	}

	c := &rabbitmq.Cleaner{URL: url, Name: prefix + "admin", Ctl: ctl, Reason: "lockprover test cleanup", Rounds: 5}
	defer c.Close()
	if err := c.Connect(ctlCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Under p1: the queue A holds goes, with A; B and its queue stay.
	if left, err := c.Cleanup(ctlCtx(t), p1); err != nil || left != nil {
		t.Fatalf("left %q, %v", left, err)
	}
	if err := awaitClosed(t, a); broker.Code(err) != broker.ConnectionForced {
		t.Fatalf("the holder: %v, want 320", err)
	}
	if err := b.Err(); err != nil {
		t.Fatalf("a connection under another prefix: %v", err)
	}
	if got := exist(t, url, p2+"d"); got == nil {
		t.Fatal("a queue under another prefix was deleted")
	}
	// Under the whole prefix, which the Cleaner's own connection is under.
	cc := declare(t, url, prefix+"C", broker.DeclareOptions{Exclusive: true}, prefix+"y")
	if left, err := c.Cleanup(ctlCtx(t), prefix); err != nil || left != nil {
		t.Fatalf("left %q, %v", left, err)
	}
	if err := awaitClosed(t, cc); broker.Code(err) != broker.ConnectionForced || !strings.Contains(err.Error(), "lockprover test cleanup") {
		t.Fatalf("the holder: %v, want 320 - lockprover test cleanup", err)
	}
	if names, err := ctl.QueueNames(ctlCtx(t), prefix); err != nil || len(names) != 0 {
		t.Fatalf("queues left: %q, %v", names, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		conns, err := ctl.Connections(ctlCtx(t), prefix)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range conns {
			names = append(names, n)
		}
		slices.Sort(names)
		if slices.Equal(names, []string{prefix + "admin"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections left %q, want only the Cleaner's", names)
		}
	}
}

// Without names, Cleanup lists and closes with plain rabbitmqctl commands.
func TestCleanupPlain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("plain rabbitmqctl is slow")
	}
	url := rabbitmqtest.URL(t)
	newCtl(t, url, true) // or skip
	prefix := rabbitmq.UniqueName("lp-cleanup-test-") + "-"
	holder := declare(t, url, prefix+"A", broker.DeclareOptions{Exclusive: true}, prefix+"x")
	declare(t, url, prefix+"B", broker.DeclareOptions{Durable: true}, prefix+"d")
	if left, err := rabbitmq.Cleanup(ctlCtx(t), url, prefix); err != nil || left != nil {
		t.Fatalf("left %q, %v", left, err)
	}
	if err := awaitClosed(t, holder); broker.Code(err) != broker.ConnectionForced {
		t.Fatalf("the holder: %v, want 320", err)
	}
	if got := exist(t, url, prefix+"x", prefix+"d"); got != nil {
		t.Fatalf("left: %q", got)
	}
}
