package amqpproxy

// Tests against a real RabbitMQ through amqp091-go. The broker is the one
// LOCKPROVER_AMQP_URL names, or else one on 127.0.0.1:5672; without either
// the tests are skipped.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/host/faultnet/faultnettest"
)

const (
	envURL   = "LOCKPROVER_AMQP_URL"
	localURL = "amqp://guest:guest@127.0.0.1:5672/"
)

// testBroker returns the broker's URL, or skips the test.
func testBroker(t testing.TB) string {
	t.Helper()
	u := os.Getenv(envURL)
	if u == "" {
		c, err := net.DialTimeout("tcp", "127.0.0.1:5672", 500*time.Millisecond)
		if err != nil {
			t.Skipf("no RabbitMQ broker: set %s or start RabbitMQ on 127.0.0.1:5672", envURL)
		}
		c.Close()
		u = localURL
	}
	return u
}

// startProxy starts a proxy in front of the test broker and returns it with
// the URL that reaches the broker through it. At the end of the test the
// proxy is closed and must have left no goroutine behind.
func startProxy(t testing.TB) (*Proxy, string) {
	t.Helper()
	p, u, err := ListenURL(testBroker(t))
	if err != nil {
		t.Fatal(err)
	}
	faultnettest.CloseAtEnd(t, p)
	return p, u
}

func dial(t testing.TB, u string, heartbeat time.Duration) *amqp.Connection {
	t.Helper()
	c, err := amqp.DialConfig(u, amqp.Config{Heartbeat: heartbeat})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// direct dials the broker without the proxy.
func direct(t testing.TB) *amqp.Connection {
	t.Helper()
	u := testBroker(t)
	return dial(t, u, 0)
}

func channel(t testing.TB, c *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

var (
	runID   = func() string { b := make([]byte, 4); rand.Read(b); return hex.EncodeToString(b) }()
	nameSeq atomic.Int64
)

// queueName is a name no other run or test uses.
func queueName(t testing.TB) string {
	return fmt.Sprintf("lockprover-proxy-test-%s-%s-%d", runID, strings.ReplaceAll(t.Name(), "/", "."), nameSeq.Add(1))
}

// sharedQueue declares a plain (non-exclusive, non-durable) queue from a
// direct connection and deletes it at the end of the test.
func sharedQueue(t testing.TB, admin *amqp.Connection) string {
	t.Helper()
	q := queueName(t)
	if _, err := channel(t, admin).QueueDeclare(q, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, admin, q)
	return q
}

// deleteAtEnd deletes q from a direct connection when the test ends.
func deleteAtEnd(t testing.TB, admin *amqp.Connection, q string) {
	t.Cleanup(func() {
		if ch, err := admin.Channel(); err == nil {
			ch.QueueDelete(q, false, false, false)
			ch.Close()
		}
	})
}

// probe passive-declares q from c on a fresh channel: 0 if it exists and c
// may use it, else the reply code (404 missing, 405 another connection's
// exclusive queue). It also returns the message count.
func probe(t testing.TB, c *amqp.Connection, q string) (code, messages int) {
	t.Helper()
	ch := channel(t, c)
	defer ch.Close()
	qi, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
	var ae *amqp.Error
	switch {
	case err == nil:
		return 0, qi.Messages
	case errors.As(err, &ae) && ae.Server:
		return ae.Code, 0
	}
	t.Fatalf("passive declare of %s: %v", q, err)
	return 0, 0
}

// connectionError asserts that err is what a client sees when its
// connection dies, not a reply from the broker.
func connectionError(t testing.TB, what string, err error) {
	t.Helper()
	var ae *amqp.Error
	switch {
	case err == nil:
		t.Fatalf("%s succeeded; want the connection to die", what)
	case errors.As(err, &ae) && ae.Server:
		t.Fatalf("%s: the broker's reply came through: %v", what, err)
	}
}

func waitClosed(t testing.TB, c *amqp.Connection, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !c.IsClosed() {
		if time.Now().After(deadline) {
			t.Fatalf("connection still open after %v", within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestForwardingCountsEveryMethod(t *testing.T) {
	p, u := startProxy(t)
	c := dial(t, u, 0)
	ch := channel(t, c)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	q := queueName(t)
	if _, err := ch.QueueDeclare(q, false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false, amqp.Publishing{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if !dc.Wait() {
		t.Fatal("publish nacked")
	}
	if n, err := ch.QueueDelete(q, false, false, false); err != nil || n != 1 {
		t.Fatalf("delete: %d messages, %v; want the 1 published", n, err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	got := p.Counts()
	wantSent := map[string]int{
		"connection.start-ok": 1, "connection.tune-ok": 1, "connection.open": 1, "connection.close": 1,
		"channel.open": 1, "channel.close": 1, "confirm.select": 1,
		"queue.declare": 1, "basic.publish": 1, "queue.delete": 1,
	}
	wantReceived := map[string]int{
		"connection.start": 1, "connection.tune": 1, "connection.open-ok": 1, "connection.close-ok": 1,
		"channel.open-ok": 1, "channel.close-ok": 1, "confirm.select-ok": 1,
		"queue.declare-ok": 1, "basic.ack": 1, "queue.delete-ok": 1,
	}
	if !maps.Equal(got.Sent.Methods, wantSent) {
		t.Errorf("Sent = %v\nwant %v", got.Sent.Methods, wantSent)
	}
	if !maps.Equal(got.Received, wantReceived) {
		t.Errorf("Received = %v\nwant %v", got.Received, wantReceived)
	}
	if got.Sent.Connections != 1 || got.Sent.Channels != 1 || got.Malformed != 0 || got.Dropped != 0 {
		t.Errorf("Connections %d Channels %d Malformed %d Dropped %d; want 1 1 0 0", got.Sent.Connections, got.Sent.Channels, got.Malformed, got.Dropped)
	}
	if s, r := got.Class("queue"); s != 2 || r != 2 {
		t.Errorf("queue class: %d sent, %d received; want 2, 2", s, r)
	}
	if s, r := got.Class("connection"); s != 4 || r != 4 {
		t.Errorf("connection class: %d sent, %d received; want 4, 4", s, r)
	}
}

// Sub isolates one operation: a passive declare is one queue.declare and
// its declare-ok.
func TestCountsSubIsolatesAnOperation(t *testing.T) {
	p, u := startProxy(t)
	admin := direct(t)
	q := sharedQueue(t, admin)
	ch := channel(t, dial(t, u, 0))
	before := p.Counts()
	if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	d := p.Counts().Sub(before)
	if !maps.Equal(d.Sent.Methods, map[string]int{"queue.declare": 1}) || !maps.Equal(d.Received, map[string]int{"queue.declare-ok": 1}) || d.Sent.Connections != 0 {
		t.Fatalf("one passive declare counted as %+v", d)
	}
}

func TestKillReleasesExclusiveQueue(t *testing.T) {
	p, u := startProxy(t)
	c := dial(t, u, 0)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	q := queueName(t)
	if _, err := channel(t, c).QueueDeclare(q, false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	other := direct(t)
	if code, _ := probe(t, other, q); code != 405 {
		t.Fatalf("before Kill, another connection gets %d; want 405 (held)", code)
	}

	start := time.Now()
	p.Kill()
	select {
	case err := <-closed:
		t.Logf("client saw %v after %v", err, time.Since(start))
		if err == nil {
			t.Fatal("the client saw a clean close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not notice the Kill within 5 s")
	}

	// Another connection takes the queue exclusively soon after.
	ch := channel(t, other)
	for {
		_, err := ch.QueueDeclare(q, false, true, true, false, nil)
		if err == nil {
			break
		}
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != 405 {
			t.Fatal(err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the broker still holds the queue for the killed connection 5 s later")
		}
		time.Sleep(5 * time.Millisecond)
		ch = channel(t, other)
	}
	t.Logf("released after %v", time.Since(start))

	// The proxy accepts the client again.
	if _, err := channel(t, dial(t, u, 0)).QueueDeclarePassive(q, false, false, false, false, nil); err == nil {
		t.Fatal("a new connection may use the other connection's exclusive queue")
	}
	if n := p.Counts().Sent.Connections; n != 2 {
		t.Fatalf("Connections = %d, want 2", n)
	}
}

func TestPartitionHealedInTimeKeepsTheConnection(t *testing.T) {
	p, u := startProxy(t)
	c := dial(t, u, 5*time.Second)
	ch := channel(t, c)
	q := queueName(t)
	if _, err := ch.QueueDeclare(q, false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}

	p.Partition()
	done := make(chan error, 1)
	go func() {
		_, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a declare completed during the partition (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	if code, _ := probe(t, direct(t), q); code != 405 {
		t.Fatalf("during the partition another connection gets %d; want 405 (still held)", code)
	}
	healed := time.Now()
	p.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the declare made during the partition failed: %v", err)
		}
		t.Logf("completed %v after Heal", time.Since(healed))
	case <-time.After(10 * time.Second):
		t.Fatal("the declare made during the partition did not complete within 10 s of Heal")
	}
	if c.IsClosed() {
		t.Fatal("the connection died")
	}
	if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}

// With a 1 s heartbeat the client notices a partition after 1 to 1.5 s and
// the broker releases the exclusive queue after 1.5 to 3 s
// (broker-semantics.md section 2).
func TestPartitionDetectedByHeartbeats(t *testing.T) {
	p, u := startProxy(t)
	c := dial(t, u, time.Second)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	q := queueName(t)
	if _, err := channel(t, c).QueueDeclare(q, false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	other := direct(t)

	start := time.Now()
	p.Partition()
	defer p.Heal()
	var noticed, released time.Duration
	for noticed == 0 || released == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("after 5 s: client noticed after %v, broker released after %v (0: not yet)", noticed, released)
		}
		select {
		case err := <-closed:
			if noticed == 0 {
				noticed = time.Since(start)
				t.Logf("client noticed after %v: %v", noticed, err)
			}
		case <-time.After(20 * time.Millisecond):
		}
		if released == 0 {
			switch code, _ := probe(t, other, q); code {
			case 404:
				released = time.Since(start)
				t.Logf("broker released the queue after %v", released)
			case 405:
			default:
				t.Fatalf("probe: %d", code)
			}
		}
	}
	if noticed < 900*time.Millisecond || noticed > 3*time.Second {
		t.Errorf("client noticed after %v; want about 1 to 1.5 s", noticed)
	}
	if released < time.Second {
		t.Errorf("broker released after %v: it learnt of the partition", released)
	}
}

func TestDropReplyDeclareIsAppliedButNotAnswered(t *testing.T) {
	p, u := startProxy(t)
	admin := direct(t)
	c := dial(t, u, 0)
	ch := channel(t, c)
	q := queueName(t)
	deleteAtEnd(t, admin, q)
	if err := p.DropReply("queue.declare"); err != nil {
		t.Fatal(err)
	}
	_, err := ch.QueueDeclare(q, false, false, false, false, nil)
	connectionError(t, "the declare", err)
	waitClosed(t, c, 5*time.Second)
	if code, _ := probe(t, admin, q); code != 0 {
		t.Fatalf("the queue was not declared (passive declare: %d)", code)
	}
	got := p.Counts()
	if got.Sent.Methods["queue.declare"] != 1 || got.Received["queue.declare-ok"] != 0 || got.Dropped != 1 {
		t.Fatalf("counts %+v", got)
	}
}

// The channel.close a failing request causes is its reply too.
func TestDropReplyDropsTheChannelCloseItCaused(t *testing.T) {
	p, u := startProxy(t)
	c := dial(t, u, 0)
	ch := channel(t, c)
	if err := p.DropReply("queue.declare"); err != nil {
		t.Fatal(err)
	}
	_, err := ch.QueueDeclarePassive(queueName(t), false, false, false, false, nil)
	connectionError(t, "passive declare of a missing queue", err)
	waitClosed(t, c, 5*time.Second)
	if got := p.Counts(); got.Received["channel.close"] != 0 || got.Dropped != 1 {
		t.Fatalf("counts %+v", got)
	}
}

func TestDropReplyPublishIsEnqueuedButNotConfirmed(t *testing.T) {
	p, u := startProxy(t)
	admin := direct(t)
	q := sharedQueue(t, admin)
	c := dial(t, u, 0)
	ch := channel(t, c)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	pub := func() *amqp.DeferredConfirmation {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false, amqp.Publishing{Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		return dc
	}
	if !pub().Wait() { // before arming: confirmed as usual
		t.Fatal("first publish nacked")
	}
	if err := p.DropReply("basic.publish"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	acked, err := pub().WaitContext(ctx)
	if err != nil || acked {
		t.Fatalf("armed publish: acked %v, err %v; want an unconfirmed publish (false) as the connection dies", acked, err)
	}
	waitClosed(t, c, 5*time.Second)

	deadline := time.Now().Add(5 * time.Second)
	for {
		code, n := probe(t, admin, q)
		if code == 0 && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue: code %d, %d messages; want both publishes enqueued", code, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := p.Counts()
	if got.Sent.Methods["basic.publish"] != 2 || got.Received["basic.ack"] != 1 || got.Dropped != 1 {
		t.Fatalf("counts %+v", got)
	}
}

// An unroutable mandatory publish is answered by basic.return then
// basic.ack: neither reaches the client.
func TestDropReplyPublishDropsItsReturn(t *testing.T) {
	p, u := startProxy(t)
	c := dial(t, u, 0)
	ch := channel(t, c)
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if err := p.DropReply("basic.publish"); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queueName(t), true, false, amqp.Publishing{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if acked, err := dc.WaitContext(ctx); err != nil || acked {
		t.Fatalf("acked %v, err %v", acked, err)
	}
	waitClosed(t, c, 5*time.Second)
	select {
	case r, ok := <-returns:
		if ok {
			t.Fatalf("the return reached the client: %+v", r)
		}
	default:
	}
	if got := p.Counts(); got.Received["basic.return"] != 0 || got.Received["basic.ack"] != 0 || got.Dropped != 1 {
		t.Fatalf("counts %+v", got)
	}
}

func TestDelayAddsLatency(t *testing.T) {
	p, u := startProxy(t)
	admin := direct(t)
	q := sharedQueue(t, admin)
	ch := channel(t, dial(t, u, 0))
	roundTrip := func() time.Duration {
		start := time.Now()
		if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	base := roundTrip()
	// A delay far above a round trip on a loaded machine, and the fastest
	// of three round trips once it is removed.
	const d = 200 * time.Millisecond
	p.Delay(d)
	for range 3 {
		if rt := roundTrip(); rt < 2*d {
			t.Fatalf("round trip %v with a %v delay each way (without: %v)", rt, d, base)
		}
	}
	p.Delay(0)
	if rt := min(roundTrip(), roundTrip(), roundTrip()); rt >= d {
		t.Fatalf("round trip %v after the delay was removed", rt)
	}
}

// Close ends every connection, including ones waiting on a partition or a
// delay, and leaves no goroutine (startProxy's cleanup checks).
func TestCloseEndsEverything(t *testing.T) {
	p, u := startProxy(t)
	var conns []*amqp.Connection
	for range 3 {
		conns = append(conns, dial(t, u, 0))
	}
	channel(t, conns[0])
	p.Delay(time.Hour)
	go conns[1].Channel() // its channel.open waits an hour in the proxy
	time.Sleep(50 * time.Millisecond)
	p.Delay(0)
	p.Partition()
	// A connection made during the partition: accepted, not yet dialled on.
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	time.Sleep(50 * time.Millisecond)

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
	for _, c := range conns {
		waitClosed(t, c, 5*time.Second)
	}
	faultnettest.NoGoroutines(t)
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("still listening")
	}
}

func TestBrokerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u, err := p.URL("amqp://guest:guest@" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)}); err == nil {
		c.Close()
		t.Fatal("dial through a proxy to nowhere succeeded")
	}
	p.Close()
	faultnettest.NoGoroutines(t)
}

func TestBadInput(t *testing.T) {
	if _, err := Listen("localhost"); err == nil {
		t.Error("Listen accepted an address without a port")
	}
	p, err := Listen("127.0.0.1:5672")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.URL("amqp://u:p%40ss@broker.example:5672/%2f?heartbeat=5")
	if want := "amqp://u:p%40ss@" + p.Addr() + "/%2f?heartbeat=5"; err != nil || got != want {
		t.Errorf("URL = %q, %v; want %q", got, err, want)
	}
	if _, err := p.URL("amqps://u:p@broker.example:5671/"); err == nil {
		t.Error("URL accepted amqps")
	}
	if _, err := p.URL("::"); err == nil {
		t.Error("URL accepted a malformed URL")
	}
	if err := p.DropReply("queue.declare-ok"); err == nil {
		t.Error("DropReply accepted a method the client does not send")
	}
}

// BenchmarkPassiveDeclare measures a round trip (passive queue.declare and
// its declare-ok) directly and through the proxy; the difference is what
// the proxy adds to two frames, one each way.
func BenchmarkPassiveDeclare(b *testing.B) {
	brokerURL := testBroker(b)
	admin := direct(b)
	q := sharedQueue(b, admin)
	run := func(b *testing.B, u string) {
		ch := channel(b, dial(b, u, 0))
		for b.Loop() {
			if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, brokerURL) })
	b.Run("proxy", func(b *testing.B) {
		_, u := startProxy(b)
		run(b, u)
	})
	// paired alternates direct and proxied round trips, so that both see
	// the same load on a shared machine, and reports medians.
	b.Run("paired", func(b *testing.B) {
		_, u := startProxy(b)
		chs := [2]*amqp.Channel{channel(b, dial(b, brokerURL, 0)), channel(b, dial(b, u, 0))}
		var rts [2][]time.Duration
		i := 0
		for b.Loop() {
			for j := range 2 {
				k := (i + j) % 2 // alternate which goes first
				start := time.Now()
				if _, err := chs[k].QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
				rts[k] = append(rts[k], time.Since(start))
			}
			i++
		}
		var p50 [2]time.Duration
		for k := range rts {
			slices.Sort(rts[k])
			p50[k] = rts[k][len(rts[k])/2]
		}
		b.ReportMetric(float64(p50[0].Nanoseconds()), "direct-p50-ns")
		b.ReportMetric(float64(p50[1].Nanoseconds()), "proxy-p50-ns")
		b.ReportMetric(float64((p50[1] - p50[0]).Nanoseconds()), "added-p50-ns")
	})
}

// fakeBroker is a listener standing in for the broker, for tests that
// need to see exactly what reaches it.
func fakeBroker(t *testing.T) (*Proxy, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := Listen(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	faultnettest.CloseAtEnd(t, p)
	client, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.Write(protocolHeader); err != nil {
		t.Fatal(err)
	}
	broker, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	got := make([]byte, len(protocolHeader))
	broker.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(broker, got); err != nil || !bytes.Equal(got, protocolHeader) {
		t.Fatalf("protocol header: %q, %v", got, err)
	}
	return p, client, broker
}

func TestPartitionHoldsBytesAndTheEndOfStream(t *testing.T) {
	p, client, broker := fakeBroker(t)
	p.Partition()
	if _, err := broker.Write(heartbeat()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write(cat(heartbeat(), heartbeat())); err != nil {
		t.Fatal(err)
	}
	client.(*net.TCPConn).CloseWrite() // the client gives up on the connection
	faultnettest.Silent(t, broker, "the broker")
	faultnettest.Silent(t, client, "the client")

	p.Heal()
	broker.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, err := io.ReadAll(broker); err != nil || !bytes.Equal(got, cat(heartbeat(), heartbeat())) {
		t.Fatalf("after Heal the broker got % x, %v; want two heartbeats, then the end of stream", got, err)
	}
	got := make([]byte, len(heartbeat()))
	client.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(client, got); err != nil || !bytes.Equal(got, heartbeat()) {
		t.Fatalf("after Heal the client got % x, %v", got, err)
	}
	broker.Close()
	if rest, err := io.ReadAll(client); err != nil || len(rest) != 0 {
		t.Fatalf("after the broker closed, the client got % x, %v; want the end of stream", rest, err)
	}
	if c := p.Counts(); c.HeartbeatsSent != 2 || c.HeartbeatsReceived != 1 {
		t.Fatalf("heartbeats: %d sent, %d received", c.HeartbeatsSent, c.HeartbeatsReceived)
	}
}

func TestMalformedFrameClosesBothSides(t *testing.T) {
	p, client, broker := fakeBroker(t)
	bad := method(1, "channel.open", shortstr(""))
	bad[len(bad)-1] = 0
	if _, err := client.Write(bad); err != nil {
		t.Fatal(err)
	}
	for who, c := range map[string]net.Conn{"broker": broker, "client": client} {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the %s's side stayed open", who)
			}
		}
	}
	if n := p.Counts().Malformed; n != 1 {
		t.Fatalf("Malformed = %d", n)
	}
}

// DropReply("*") drops the reply to whatever request comes next,
// AfterMethods fires once the client has sent that many methods, and
// BrokerSide names the connection the broker sees.
func TestDropAnyAndAfterMethods(t *testing.T) {
	p, u := startProxy(t)
	admin := direct(t)
	c := dial(t, u, 0)
	ch := channel(t, c)
	q := queueName(t)
	deleteAtEnd(t, admin, q)
	if side := p.BrokerSide(); len(side) != 1 {
		t.Fatalf("BrokerSide = %v, want one address", side)
	}
	total := 0
	for _, n := range p.Counts().Sent.Methods {
		total += n
	}
	fired := make(chan int64, 1)
	p.AfterMethods(total+1, func() { fired <- p.sent.Load() })
	if err := p.DropReply("*"); err != nil {
		t.Fatal(err)
	}
	_, err := ch.QueueDeclare(q, false, false, false, false, nil)
	connectionError(t, "the declare", err)
	if code, _ := probe(t, admin, q); code != 0 {
		t.Fatalf("the declare was not applied (passive declare: %d)", code)
	}
	select {
	case n := <-fired:
		if n != int64(total+1) {
			t.Errorf("hook fired at %d methods, want %d", n, total+1)
		}
	case <-time.After(10 * time.Second):
		t.Error("AfterMethods hook never fired")
	}
}
