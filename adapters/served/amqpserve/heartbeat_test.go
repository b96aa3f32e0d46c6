package amqpserve_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/internal/amqpwire"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// A client whose connection.tune-ok says heartbeat 0 has turned
// heartbeats off, whatever the broker proposed (RabbitMQ then neither
// sends nor expects any): partitioned for ten times the broker's
// heartbeat, its connection stays, and so does its exclusive queue. The
// same client taking the broker's 2 s loses both to the broker's
// heartbeat timeout.
func TestHeartbeatOffStaysOff(t *testing.T) {
	for _, c := range []struct {
		tuneOK uint16
		kept   bool
	}{{0, true}, {2, false}} {
		t.Run(fmt.Sprintf("tune-ok %d", c.tuneOK), func(t *testing.T) {
			var kept bool
			_, _, err := serveProcess(t, rabbitmqsim.Options{ServerHeartbeat: 2 * time.Second}, amqpserve.Options{Speedup: -1}, func(w *rabbitmqsim.World, p *amqpserve.Process) error {
				conn, err := rawDeclare(p.URL(), c.tuneOK, "hb-1-B")
				if err != nil {
					return err
				}
				defer conn.Close()
				// The World's steps, in the process's coroutine (as the wire
				// differential takes them), while the client's socket stays
				// open and silent.
				p.Do(func() {
					w.Partition("c1")
					p.Sleep(context.Background(), 20*time.Second)
					_, kept = w.Queue("hb-1-B")
					w.Heal("c1")
				})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if kept != c.kept {
				t.Errorf("tune-ok heartbeat %d, partitioned for 20 s of a 2 s broker heartbeat: the exclusive queue kept %v, want %v", c.tuneOK, kept, c.kept)
			}
		})
	}
}

// rawDeclare connects to url as a client that answers connection.tune
// with heartbeat hb, opens channel 1 and declares queue exclusive; it
// returns the connection, left open.
func rawDeclare(url string, hb uint16, queue string) (net.Conn, error) {
	rc, err := rawSession(url, hb, queue)
	if err != nil {
		return nil, err
	}
	return rc.c, nil
}

// rawConn is a client's connection as raw frames: its socket, a reader
// and a writer (whose methods go out at Flush).
type rawConn struct {
	c  net.Conn
	r  *amqpwire.Reader
	wr *amqpwire.Writer
}

// rawSession is rawDeclare's, with the reader and writer.
func rawSession(url string, hb uint16, queue string) (*rawConn, error) {
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "amqp://guest:guest@"), "/")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	r, wr := amqpwire.NewReader(c, 131072), amqpwire.NewWriter(c, 131072)
	c.Write([]byte(amqpwire.ProtocolHeader))
	steps := []struct {
		ch   uint16
		m    amqpwire.Method
		read bool // a method comes back before the next step
	}{
		{0, &amqpwire.ConnectionStartOK{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"}, true}, // tune
		{0, &amqpwire.ConnectionTuneOK{ChannelMax: 2047, FrameMax: 131072, Heartbeat: hb}, false},
		{0, &amqpwire.ConnectionOpen{VirtualHost: "/"}, true},
		{1, &amqpwire.ChannelOpen{}, true},
		{1, &amqpwire.QueueDeclare{Queue: queue, Exclusive: true}, true},
	}
	if _, err := readMethod(r); err != nil { // connection.start
		c.Close()
		return nil, err
	}
	for i, st := range steps {
		wr.WriteMethod(st.ch, st.m)
		wr.Flush()
		if !st.read {
			continue
		}
		m, err := readMethod(r)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("after step %d: %w", i+1, err)
		}
		if cl, ok := m.(*amqpwire.ConnectionClose); ok {
			c.Close()
			return nil, fmt.Errorf("after step %d: connection.close %d %s", i+1, cl.ReplyCode, cl.ReplyText)
		}
	}
	return &rawConn{c, r, wr}, nil
}

// readMethod reads frames until a method, skipping heartbeats.
func readMethod(r *amqpwire.Reader) (amqpwire.Method, error) {
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return nil, err
		}
		if f.Type == amqpwire.FrameMethod {
			return amqpwire.DecodeMethod(f.Payload)
		}
	}
}
