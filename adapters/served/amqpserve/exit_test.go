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
		line, m, err := nextMethod(rc)
		if err != nil {
			return got, fmt.Errorf("after %q: %w", got, err)
		}
		if cl, ok := m.(*amqpwire.ConnectionClose); ok {
			got = append(got, fmt.Sprintf("%s %d", line, cl.ReplyCode))
			rc.wr.WriteMethod(0, &amqpwire.ConnectionCloseOK{})
			rc.wr.Flush()
			return got, nil
		}
		got = append(got, line)
	}
}

// A publish's content is assembled on its channel, whatever comes between
// on others: here channel 2 is opened between channel 1's basic.publish
// and its header and body (as amqp091-go's reader answers a
// connection.close with close-ok while a publish is half sent). RabbitMQ
// opens channel 2 and routes the message; so does the served broker, where
// it once closed the connection for a frame out of place.
func TestContentAcrossAnotherChannelsFrame(t *testing.T) {
	queue := rabbitmq.UniqueName("lp-interleave-")
	real, err := interleaveExchange(rabbitmqtest.URL(t), queue)
	if err != nil {
		t.Fatalf("on RabbitMQ: %v", err)
	}
	var served []string
	_, _, err = serveProcess(t, rabbitmqsim.Options{}, amqpserve.Options{Speedup: -1}, func(_ *rabbitmqsim.World, p *amqpserve.Process) error {
		var cerr error
		served, cerr = interleaveExchange(p.URL(), queue)
		return cerr
	})
	if err != nil {
		t.Fatalf("served: %v", err)
	}
	if want := []string{"ch2 channel.open-ok", "ch1 basic.get-ok hello"}; !slices.Equal(real, want) {
		t.Errorf("RabbitMQ answered %q, want %q", real, want)
	}
	if !slices.Equal(served, real) {
		t.Errorf("the served broker answered %q, RabbitMQ %q", served, real)
	}
}

// interleaveExchange declares queue exclusive on channel 1, publishes
// "hello" to it with channel 2's channel.open between the publish's method
// frame and its header, then gets from queue; it returns what came back, a
// method a line (a get-ok with its body).
func interleaveExchange(url, queue string) ([]string, error) {
	rc, err := rawSession(url, 0, queue)
	if err != nil {
		return nil, err
	}
	defer rc.c.Close()
	body := []byte("hello")
	header, err := amqpwire.AppendHeader(nil, amqpwire.Header{Class: 60, BodySize: uint64(len(body))})
	if err != nil {
		return nil, err
	}
	rc.wr.WriteMethod(1, &amqpwire.BasicPublish{RoutingKey: queue})
	rc.wr.WriteMethod(2, &amqpwire.ChannelOpen{})
	rc.wr.WriteFrame(amqpwire.Frame{Type: amqpwire.FrameHeader, Channel: 1, Payload: header})
	rc.wr.WriteFrame(amqpwire.Frame{Type: amqpwire.FrameBody, Channel: 1, Payload: body})
	rc.wr.WriteMethod(1, &amqpwire.BasicGet{Queue: queue, NoAck: true})
	rc.wr.Flush()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []string
	for len(got) < 2 {
		line, m, err := nextMethod(rc)
		if err != nil {
			return got, fmt.Errorf("after %q: %w", got, err)
		}
		if cl, ok := m.(*amqpwire.ConnectionClose); ok {
			return got, fmt.Errorf("after %q: connection.close %d %s", got, cl.ReplyCode, cl.ReplyText)
		}
		got = append(got, line)
	}
	if len(got) == 2 && got[1] == "ch1 basic.get-ok" { // its body comes next
		f, err := rc.r.ReadFrame()
		for err == nil && f.Type != amqpwire.FrameBody {
			f, err = rc.r.ReadFrame()
		}
		if err != nil {
			return got, err
		}
		got[1] += " " + string(f.Payload)
	}
	return got, nil
}

// nextMethod reads rc's frames until a method, and returns it with a line
// naming its channel and method ("ch1 basic.get-ok").
func nextMethod(rc *rawConn) (string, amqpwire.Method, error) {
	for {
		f, err := rc.r.ReadFrame()
		if err != nil {
			return "", nil, err
		}
		if f.Type != amqpwire.FrameMethod {
			continue
		}
		m, err := amqpwire.DecodeMethod(f.Payload)
		if err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("ch%d %v", f.Channel, amqpwire.IDOf(m)), m, nil
	}
}
