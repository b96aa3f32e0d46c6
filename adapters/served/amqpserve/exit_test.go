package amqpserve_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/amqpwire"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// A method on a channel that is not open closes the connection (504
// CHANNEL_ERROR), but on RabbitMQ only once the frames read with it are
// passed on: a basic.get on channel 1, sent in the same write as a
// basic.get on a channel never opened, is answered (get-empty), then the
// connection closes. pika's basic_get on a closed channel, which pika
// sends, meets it when pika's next request writes with it. The served
// broker answers as RabbitMQ does; a basic.get on the channel not open
// sent alone closes the connection with nothing else answered.
func TestChannelErrorAfterFramesReadWithIt(t *testing.T) {
	url := rabbitmqtest.URL(t)
	for _, together := range []bool{true, false} {
		queue := rabbitmq.UniqueName("lp-exit-")
		real, err := exitExchange(url, queue, together)
		if err != nil {
			t.Fatalf("on RabbitMQ: %v", err)
		}
		var served []string
		_, _, err = serveProcess(t, rabbitmqsim.Options{}, amqpserve.Options{Speedup: -1}, func(_ *rabbitmqsim.World, p *amqpserve.Process) error {
			var cerr error
			served, cerr = exitExchange(p.URL(), queue, together)
			return cerr
		})
		if err != nil {
			t.Fatalf("served: %v", err)
		}
		want := []string{"ch1 basic.get-empty", "ch0 connection.close 504"}
		if !together {
			want = want[1:]
		}
		if !slices.Equal(real, want) {
			t.Errorf("together %v: RabbitMQ answered %q, want %q", together, real, want)
		}
		if !slices.Equal(served, real) {
			t.Errorf("together %v: the served broker answered %q, RabbitMQ %q", together, served, real)
		}
	}
}

// exitExchange declares queue exclusive on channel 1, then sends a
// basic.get on channel 2, never opened, and one on channel 1 for queue:
// in one write if together, else the second only once the broker has had
// a second to close the connection. It returns what came back, a method a
// line, until connection.close.
func exitExchange(url, queue string, together bool) ([]string, error) {
	rc, err := rawSession(url, 0, queue)
	if err != nil {
		return nil, err
	}
	defer rc.c.Close()
	rc.wr.WriteMethod(2, &amqpwire.BasicGet{Queue: queue})
	if !together {
		rc.wr.Flush()
		time.Sleep(time.Second)
	}
	rc.wr.WriteMethod(1, &amqpwire.BasicGet{Queue: queue})
	rc.wr.Flush()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []string
	for {
		f, err := rc.r.ReadFrame()
		if err != nil {
			return got, fmt.Errorf("after %q: %w", got, err)
		}
		if f.Type != amqpwire.FrameMethod {
			continue
		}
		m, err := amqpwire.DecodeMethod(f.Payload)
		if err != nil {
			return got, err
		}
		line := fmt.Sprintf("ch%d %v", f.Channel, amqpwire.IDOf(m))
		if cl, ok := m.(*amqpwire.ConnectionClose); ok {
			got = append(got, fmt.Sprintf("%s %d", line, cl.ReplyCode))
			rc.wr.WriteMethod(0, &amqpwire.ConnectionCloseOK{})
			rc.wr.Flush()
			return got, nil
		}
		got = append(got, line)
	}
}
