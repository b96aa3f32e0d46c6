package amqpserve_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// serveOne runs client, a real client in a goroutine of its own, as the
// World's process c1 on a served broker, and returns what the World and
// the served broker saw.
func serveOne(t *testing.T, o amqpserve.Options, client func(url string) error) (*rabbitmqsim.World, *amqpserve.Broker, error) {
	t.Helper()
	return serveProcess(t, rabbitmqsim.Options{}, o, func(_ *rabbitmqsim.World, p *amqpserve.Process) error { return client(p.URL()) })
}

// serveProcess is serveOne on a World made with wo, its client given the
// World and the served process (its URL, and Do for the World's steps
// beside it).
func serveProcess(t *testing.T, wo rabbitmqsim.Options, o amqpserve.Options, client func(w *rabbitmqsim.World, p *amqpserve.Process) error) (*rabbitmqsim.World, *amqpserve.Broker, error) {
	t.Helper()
	w := rabbitmqsim.New(wo)
	s := amqpserve.New(w, o)
	defer s.Close()
	var cerr error
	w.Go("c1", func(b broker.Broker) {
		p, err := s.Process("c1", b)
		if err != nil {
			cerr = err
			return
		}
		done := make(chan struct{})
		go func() { defer close(done); cerr = client(w, p) }()
		if p.Await(done, time.After(20*time.Second), nil) != process.Ready {
			cerr = errors.New("the client did not finish in 20 s")
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	return w, s, cerr
}

// onChannel is a client that dials url with amqp091-go, opens a channel,
// runs use on it and closes the connection.
func onChannel(use func(*amqp.Channel) error) func(url string) error {
	return func(url string) error {
		conn, err := amqp.Dial(url)
		if err != nil {
			return err
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		return use(ch)
	}
}

// amqp091-go, unmodified, declares, publishes under confirms (one
// returned, one routed), checks a queue passively and is refused where
// RabbitMQ refuses, on the simulated broker.
func TestAmqp091GoOnTheSimulator(t *testing.T) {
	w, s, err := serveOne(t, amqpserve.Options{}, onChannel(func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		returns := ch.NotifyReturn(make(chan amqp.Return, 1))
		if _, err := ch.QueueDeclare("lock-1-B", false, false, true, false, nil); err != nil {
			return err
		}
		for _, key := range []string{"lock-1-A", "lock-1-B"} {
			c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", key, true, false, amqp.Publishing{Body: []byte("probe " + key)})
			if err != nil {
				return err
			}
			if !c.Wait() {
				return errors.New("nacked " + key)
			}
		}
		r := <-returns
		if r.ReplyCode != 312 || r.RoutingKey != "lock-1-A" || string(r.Body) != "probe lock-1-A" {
			return errors.New("return: " + r.ReplyText + " " + r.RoutingKey + " " + string(r.Body))
		}
		q, err := ch.QueueDeclarePassive("lock-1-B", false, false, true, false, nil)
		if err != nil || q.Messages != 1 {
			return errors.New("passive declare: " + q.Name)
		}
		_, err = ch.QueueDeclarePassive("lock-1-C", false, false, false, false, nil)
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != 404 || !strings.HasPrefix(ae.Reason, "NOT_FOUND - no queue 'lock-1-C'") {
			return errors.New("a missing queue's passive declare: " + err.Error())
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(w.Queues()); got != 0 {
		t.Errorf("%d queues left once the client closed: its exclusive queue should go with it", got)
	}
	if n := s.Refused(); len(n) > 0 || len(s.Unserved()) > 0 || len(s.Diverged()) > 0 {
		t.Errorf("notes %q, unserved %q", n, s.Unserved())
	}
	log := s.Log()["c1"]
	t.Logf("log %q", log)
	if len(log) < 8 || log[0] != "c1 open" || log[len(log)-1] != "ready" {
		t.Errorf("log %q", log)
	}
}

// Nothing a served run opens outlives its Close: every goroutine (the
// ports' accepts, each connection's reader and heartbeats) has ended,
// also for a connection the client left open.
func TestCloseLeavesNothing(t *testing.T) {
	// A World leaves its idle coroutines for the next (sched.Pool): one
	// run first, so that they are counted before.
	serveOne(t, amqpserve.Options{}, func(string) error { return nil })
	before := runtime.NumGoroutine()
	var left *amqp.Connection
	_, s, err := serveOne(t, amqpserve.Options{}, func(url string) error {
		conn, err := amqp.DialConfig(url, amqp.Config{Heartbeat: 4 * time.Second}) // a tick every 2 s: a heartbeat goroutine Close did not stop outlives the wait
		left = conn
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s
	left.Close()
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left of %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
