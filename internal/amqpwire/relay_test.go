package amqpwire_test

// RabbitMQ's own frames: clientScript against the real broker (the one
// LOCKPROVER_AMQP_URL names, or 127.0.0.1:5672) through a relay that
// records both directions. Every method and content header either side
// sent must decode and encode again to the same bytes.

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/amqpwire"
	"github.com/lockprover/lockprover/internal/quick"
)

// brokerAddr is the real broker's URL and host:port, or the test skips.
func brokerAddr(t *testing.T) (string, string) {
	quick.Skip(t, "a RabbitMQ broker")
	raw := os.Getenv("LOCKPROVER_AMQP_URL")
	if raw == "" {
		raw = "amqp://guest:guest@127.0.0.1:5672/"
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("LOCKPROVER_AMQP_URL: %v", err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		t.Skipf("no RabbitMQ broker at %s: set LOCKPROVER_AMQP_URL or start RabbitMQ on 127.0.0.1:5672", u.Host)
	}
	c.Close()
	return raw, u.Host
}

// relay forwards one connection to addr, recording what each side sent.
// Its URL is raw with the relay's address; wait returns the recordings
// once both directions have ended.
func relay(t *testing.T, raw, addr string) (string, func() (client, server []byte)) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var cbuf, sbuf bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer l.Close()
		c, err := l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			return
		}
		var pipes sync.WaitGroup
		pipes.Add(2)
		pipe := func(dst, src net.Conn, rec *bytes.Buffer) {
			defer pipes.Done()
			io.Copy(io.MultiWriter(dst, rec), src)
			dst.(*net.TCPConn).CloseWrite()
		}
		go pipe(s, c, &cbuf)
		go pipe(c, s, &sbuf)
		pipes.Wait()
		c.Close()
		s.Close()
	}()
	u, _ := url.Parse(raw)
	u.Host = l.Addr().String()
	return u.String(), func() ([]byte, []byte) {
		wg.Wait()
		return cbuf.Bytes(), sbuf.Bytes()
	}
}

// methodsOf reads a recorded stream, checking that each method and content
// header encodes again to its bytes, and returns the methods by name and
// the connection.start, if any.
func methodsOf(t *testing.T, stream []byte, client bool) ([]string, *amqpwire.ConnectionStart) {
	r := amqpwire.NewReader(bytes.NewReader(stream), 0)
	if client {
		if err := r.ReadProtocolHeader(); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	var start *amqpwire.ConnectionStart
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			return names, start
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := reencode(f)
		if err != nil {
			t.Error(err)
		}
		if m != nil {
			names = append(names, amqpwire.IDOf(m).String())
		}
		if s, ok := m.(*amqpwire.ConnectionStart); ok {
			start = s
		}
	}
}

// TestRabbitMQFramesReencode runs clientScript on the real broker through
// the relay.
func TestRabbitMQFramesReencode(t *testing.T) {
	raw, addr := brokerAddr(t)
	u, wait := relay(t, raw, addr)
	clientScript(t, u)
	client, server := wait()
	t.Logf("recorded %d bytes from the client, %d from the broker", len(client), len(server))
	sent, _ := methodsOf(t, client, true)
	got, start := methodsOf(t, server, false)
	want := "connection.start-ok connection.tune-ok connection.open channel.open queue.declare confirm.select basic.publish basic.get channel.close connection.close"
	if s := strings.Join(sent, " "); s != want {
		t.Errorf("the client sent %s\nwant %s", s, want)
	}
	want = "connection.start connection.tune connection.open-ok channel.open-ok queue.declare-ok confirm.select-ok basic.ack basic.get-ok channel.close-ok connection.close-ok"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("the broker sent %s\nwant %s", s, want)
	}
	if start == nil {
		t.Fatal("no connection.start")
	}
	// The tiny broker's connection.start is 3.10.8's: hold it to the real
	// one where the broker is 3.10.8.
	if v, _ := start.ServerProperties.Get("version"); v == "3.10.8" {
		t.Logf("RabbitMQ 3.10.8: its capabilities are the tiny broker's")
		caps, _ := start.ServerProperties.Get("capabilities")
		want, _ := rabbit3108().ServerProperties.Get("capabilities")
		if !reflect.DeepEqual(caps, want) || start.Mechanisms != rabbit3108().Mechanisms {
			t.Errorf("RabbitMQ 3.10.8's capabilities %v, mechanisms %q; the tiny broker's %v, %q", caps, start.Mechanisms, want, rabbit3108().Mechanisms)
		}
	}
}

// TestRabbitMQAnswersAnotherHeader: RabbitMQ answers a protocol header it
// does not speak with 0-9-1's, then closes; ProtocolHeader says so.
func TestRabbitMQAnswersAnotherHeader(t *testing.T) {
	_, addr := brokerAddr(t)
	for _, h := range []string{"AMQP\x00\x00\x09\x02", "GET / HTTP/1.1\r\n\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, h)
		got := make([]byte, 8)
		n, err := io.ReadFull(c, got)
		if string(got[:n]) != amqpwire.ProtocolHeader {
			t.Errorf("%q: RabbitMQ answered %q, %v", h, got[:n], err)
		}
		if n, err := c.Read(got); n != 0 || err == nil {
			t.Errorf("%q: after the header, %d bytes, %v: want the connection closed", h, n, err)
		}
		c.Close()
	}
}
