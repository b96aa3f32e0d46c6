package amqpserve_test

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/internal/amqpwire"
)

// declareAndClose is a client that declares one queue and closes.
var declareAndClose = onChannel(func(ch *amqp.Channel) error {
	_, err := ch.QueueDeclare("q", false, false, true, false, nil)
	return err
})

// A replay takes the logged steps in the logged order: idle turns where
// the log has them, though the client's frames wait meanwhile (held,
// not taken early), and then the frames, with nothing to say.
func TestReplayHoldsWhatComesEarly(t *testing.T) {
	_, s, err := serveOne(t, amqpserve.Options{}, declareAndClose)
	if err != nil {
		t.Fatal(err)
	}
	log := s.Log()["c1"]
	script := slices.Concat([]string{"idle", "idle", "idle"}, log[:2], []string{"idle"}, log[2:])
	_, s2, err := serveOne(t, amqpserve.Options{Script: map[string][]string{"c1": script}}, declareAndClose)
	if err != nil {
		t.Fatal(err)
	}
	if d := s2.Diverged(); len(d) > 0 {
		t.Fatalf("diverged: %q", d)
	}
	if got := s2.Log()["c1"]; !slices.Equal(got, script) {
		t.Fatalf("replayed %q\nthe log was %q", got, script)
	}
}

// Where the implementation sends what its log does not have next, the
// replay says so (the step, what the log had, what came), takes what came
// and records from there.
func TestReplaySaysWhereItDiverged(t *testing.T) {
	_, s, err := serveOne(t, amqpserve.Options{}, declareAndClose)
	if err != nil {
		t.Fatal(err)
	}
	script := slices.Clone(s.Log()["c1"])
	script[2] = "c1 ch1 queue.declare other exclusive"
	_, s2, err := serveOne(t, amqpserve.Options{Script: map[string][]string{"c1": script}}, declareAndClose)
	if err != nil {
		t.Fatal(err)
	}
	d := s2.Diverged()
	if len(d) != 1 || !strings.Contains(d[0], "c1's step 3 in the log is c1 ch1 queue.declare other exclusive") ||
		!strings.Contains(d[0], "sent c1 ch1 queue.declare q exclusive") {
		t.Fatalf("diverged: %q", d)
	}
	if got, want := s2.Log()["c1"], s.Log()["c1"]; !slices.Equal(got, want) {
		t.Fatalf("logged %q, what the client did: %q", got, want)
	}
}

// What is refused before a connection opens is answered as RabbitMQ
// answers it (measured on 3.10.8) and named.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, url, want, note string
		raw                   bool
	}{
		{"wrong password", "amqp://guest:nope@%s/", "Exception (403) Reason: \"username or password not allowed\"", "login refused (mechanism PLAIN)", false},
		{"wrong vhost", "amqp://guest:guest@%s/lockprover", "Exception (530) Reason: \"NOT_ALLOWED - vhost lockprover not found\"", "vhost \"lockprover\" refused", false},
		{"not AMQP", "%s", "AMQP\x00\x00\x09\x01", "protocol header \"GET / HT\", not AMQP 0-9-1's", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s, err := serveOne(t, amqpserve.Options{}, func(url string) error {
				addr := strings.TrimSuffix(strings.TrimPrefix(url, "amqp://guest:guest@"), "/")
				if tc.raw {
					return rawGet(addr)
				}
				_, err := amqp.Dial(strings.Replace(tc.url, "%s", addr, 1))
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the client got %v, want %q", err, tc.want)
			}
			if r := s.Refused(); len(r) != 1 || !strings.Contains(r[0], tc.note) {
				t.Errorf("refused: %q, want %q", r, tc.note)
			}
		})
	}
}

// rawGet sends HTTP where AMQP's header is due, and returns what came
// back as an error.
func rawGet(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	b := make([]byte, 64)
	n, _ := c.Read(b)
	return &rawReply{string(b[:n])}
}

type rawReply struct{ s string }

func (r *rawReply) Error() string { return r.s }

// A method the served broker does not serve gets 503 COMMAND_INVALID, as
// RabbitMQ answers a method it has no handler for, and is named.
func TestUnservedMethod(t *testing.T) {
	_, s, err := serveOne(t, amqpserve.Options{}, onChannel(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare("x", "direct", false, false, false, false, nil)
	}))
	if err == nil || !strings.Contains(err.Error(), "Exception (503) Reason: \"COMMAND_INVALID - unimplemented method\"") {
		t.Errorf("the client got %v", err)
	}
	if u := s.Unserved(); !slices.Equal(u, []string{"exchange.declare"}) {
		t.Errorf("unserved: %q", u)
	}
}

// A frame that cannot be read is answered 501 FRAME_ERROR, named, and
// ends the connection.
func TestUnreadableFrame(t *testing.T) {
	_, s, err := serveOne(t, amqpserve.Options{}, func(url string) error {
		addr := strings.TrimSuffix(strings.TrimPrefix(url, "amqp://guest:guest@"), "/")
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		r, wr := amqpwire.NewReader(bufio.NewReader(c), 131072), amqpwire.NewWriter(c, 131072)
		c.Write([]byte(amqpwire.ProtocolHeader))
		steps := []amqpwire.Method{&amqpwire.ConnectionStartOK{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"},
			&amqpwire.ConnectionTuneOK{ChannelMax: 2047, FrameMax: 131072}, &amqpwire.ConnectionOpen{VirtualHost: "/"}}
		for i, m := range steps {
			if i != 1 {
				if _, err := r.ReadFrame(); err != nil {
					return err
				}
			}
			wr.WriteMethod(0, m)
			wr.Flush()
		}
		if _, err := r.ReadFrame(); err != nil { // open-ok
			return err
		}
		// queue.declare cut short: its payload ends inside the queue's name.
		wr.WriteFrame(amqpwire.Frame{Type: amqpwire.FrameMethod, Channel: 0, Payload: []byte{0, 50, 0, 10, 0, 0, 9, 'l', 'p'}})
		wr.Flush()
		f, err := r.ReadFrame()
		if err != nil {
			return err
		}
		m, err := amqpwire.DecodeMethod(f.Payload)
		if cl, ok := m.(*amqpwire.ConnectionClose); !ok || cl.ReplyCode != 501 {
			return fmt.Errorf("got %#v (%v), want connection.close 501", m, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Refused(); len(r) != 1 || !strings.Contains(r[0], "queue.declare") {
		t.Errorf("refused: %q", r)
	}
}

// What a client sends on a connection the broker is closing, before its
// close-ok, the World never sees (RabbitMQ reads only the close-ok), and
// clients send it in an order their threads race for (amqp091-go answers
// the close while its caller may still publish): it is no step, so that a
// replay of a run where the client sent more before its close-ok, or in
// another order, does not diverge.
func TestWhatComesAfterTheBrokersCloseIsNoStep(t *testing.T) {
	run := func(o amqpserve.Options, after ...amqpwire.Method) *amqpserve.Broker {
		t.Helper()
		_, s, err := serveOne(t, o, func(url string) error { return closedExchange(url, after) })
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	get := &amqpwire.BasicGet{Queue: "q"}
	first := run(amqpserve.Options{}, get, get, &amqpwire.ConnectionCloseOK{})
	log := first.Log()["c1"]
	for _, step := range log {
		if strings.Contains(step, "close-ok") || strings.Contains(step, "basic.get") && !strings.Contains(step, "ch2") {
			t.Fatalf("logged %q, a frame the broker did not read: %q", step, log)
		}
	}
	again := run(amqpserve.Options{Script: map[string][]string{"c1": log}}, &amqpwire.ConnectionCloseOK{}, get)
	if d := again.Diverged(); len(d) > 0 {
		t.Fatalf("diverged: %q", d)
	}
	if got := again.Log()["c1"]; !slices.Equal(got, log) {
		t.Fatalf("replayed %q\nthe log was %q", got, log)
	}
}

// closedExchange declares a queue, sends a basic.get on channel 2, never
// opened, reads the broker's connection.close (504), sends after, then
// waits for the broker to end the socket or a second.
func closedExchange(url string, after []amqpwire.Method) error {
	rc, err := rawSession(url, 0, "q")
	if err != nil {
		return err
	}
	defer rc.c.Close()
	rc.wr.WriteMethod(2, &amqpwire.BasicGet{Queue: "q"})
	rc.wr.Flush()
	m, err := readMethod(rc.r)
	if err != nil {
		return err
	}
	if cl, ok := m.(*amqpwire.ConnectionClose); !ok || cl.ReplyCode != 504 {
		return fmt.Errorf("got %v, want connection.close 504", amqpwire.IDOf(m))
	}
	for _, m := range after {
		ch := uint16(1)
		if _, ok := m.(*amqpwire.ConnectionCloseOK); ok {
			ch = 0
		}
		rc.wr.WriteMethod(ch, m)
		rc.wr.Flush()
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
