package amqpserve_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// On a simulated cluster each process gets a port per node, its own
// node's first: a connection through a node's port is made to that node
// (an exclusive queue declared through it lives there), a killed node's
// port refuses connections as a real node's does (ECONNREFUSED, before any
// byte), and takes them again once the node has started.
func TestAPortPerNode(t *testing.T) {
	wo := rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(1), Cluster: &rabbitmqsim.ClusterOptions{
		Nodes: []string{"n1", "n2", "n3"}, NodeOf: func(string) string { return "n3" }}}
	_, s, err := serveProcess(t, wo, amqpserve.Options{Speedup: -1}, func(w *rabbitmqsim.World, p *amqpserve.Process) error {
		var err error
		urls := p.URLs()
		if len(urls) != 3 || urls[0] != p.URL() {
			return fmt.Errorf("URLs %v: want three, the process's own (%s) first", urls, p.URL())
		}
		// The own node (n3) first, then n1, n2.
		for i, node := range []string{"n3", "n1", "n2"} {
			if err := declareAt(w, p, urls[i], "q-"+node, node); err != nil {
				return err
			}
		}
		p.Do(func() { err = w.Strike("kill", "n1") })
		if err != nil {
			return err
		}
		if _, err := dial(urls[1]); !errors.Is(err, broker.ErrRefused) {
			return fmt.Errorf("a dial to the killed n1's port: %v, want it refused", err)
		}
		if err := declareAt(w, p, urls[2], "q-n2-again", "n2"); err != nil {
			return fmt.Errorf("with n1 down: %w", err)
		}
		p.Do(func() { err = w.Strike("restart-broker", "n1") })
		if err != nil {
			return err
		}
		return declareAt(w, p, urls[1], "q-n1-again", "n1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Refused(); len(r) > 0 {
		t.Fatalf("refused: %v", r)
	}
	log := s.Log()["c1"]
	want := map[string]bool{"c1 open": true, "c2 open at n1": true, "c3 open at n2": true}
	for _, step := range log {
		delete(want, step)
	}
	if len(want) > 0 {
		t.Fatalf("the log %q lacks %v: a connection through another node's port names it", log, want)
	}
}

func dial(url string) (broker.Conn, error) {
	return rabbitmq.New(url).Dial(context.Background(), broker.Config{Name: "probe"})
}

// declareAt declares exclusive queue q through url, and checks that the
// World has it on node.
func declareAt(w *rabbitmqsim.World, p *amqpserve.Process, url, q, node string) error {
	conn, err := dial(url)
	if err != nil {
		return fmt.Errorf("dial %s for %s: %w", url, node, err)
	}
	defer conn.Close()
	ch, err := conn.Channel(context.Background())
	if err != nil {
		return err
	}
	if _, err := ch.Declare(context.Background(), q, broker.DeclareOptions{Exclusive: true}); err != nil {
		return fmt.Errorf("declare %s: %w", q, err)
	}
	var info rabbitmqsim.QueueInfo
	p.Do(func() { info, _ = w.Queue(q) })
	if info.Node != node {
		return fmt.Errorf("%s declared through %s's port lives on %q", q, node, info.Node)
	}
	return nil
}

// A dial to a paused node's port is held in the World (the node's kernel
// takes the connection, nothing answers); a client whose own deadline
// passes gives it up (Process.Abandon at that moment of the World's
// clock), and the World's clock goes on from there, not from the 30 s a
// held dial lasts.
func TestAbandonAHeldDial(t *testing.T) {
	wo := rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(1), Cluster: &rabbitmqsim.ClusterOptions{
		Nodes: []string{"n1", "n2", "n3"}, NodeOf: func(string) string { return "n1" }}}
	_, _, err := serveProcess(t, wo, amqpserve.Options{Speedup: -1}, func(w *rabbitmqsim.World, p *amqpserve.Process) error {
		var err error
		var start, end int64
		p.Do(func() { err, start = w.Strike("pause", "n2"), w.Now() })
		if err != nil {
			return err
		}
		env := wireClusterEnv{p: p, w: w}
		ctx, cancel := env.Timeout(2 * time.Second)
		defer cancel()
		if _, err := rabbitmq.New(p.URLs()[1]).Dial(ctx, broker.Config{Name: "A"}); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("a dial to the paused n2: %v, want the client's deadline", err)
		}
		p.Do(func() { end = w.Now() })
		if d := time.Duration(end - start); d > 3*time.Second {
			return fmt.Errorf("the World's clock went on %v after the client's deadline of 2 s", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
