package faultnet

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet/faultnettest"
)

// forward is a reader that passes every byte on as it comes (Forward), or,
// with deliver, waiting for each to be written (Deliver).
func forward(deliver bool) func(*Pipe) {
	return func(pp *Pipe) {
		buf := make([]byte, BufSize)
		for {
			if !pp.Conn().WaitHealed() {
				return
			}
			n, err := pp.Read(buf)
			if n > 0 {
				if deliver {
					if !pp.Deliver(buf[:n]) {
						return
					}
				} else {
					next, ok := pp.Forward(buf[:n])
					if !ok {
						return
					}
					buf = next
				}
			}
			if err != nil {
				pp.End(err)
				return
			}
		}
	}
}

// plain is a protocol layer that reads nothing: it counts the connections
// and forwards both ways.
type plain struct {
	accepted atomic.Int64
	deliver  bool
}

func (l *plain) accept(*Conn) Session {
	l.accepted.Add(1)
	return ServeFunc(func(c *Conn) { c.Run(forward(l.deliver), forward(l.deliver)) })
}

// listen is a listener standing in for the upstream, closed when the test
// ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// start starts a proxy in front of upstream, closed when the test ends.
func start(t *testing.T, upstream string, accept func(*Conn) Session) *Proxy {
	t.Helper()
	p := New(upstream, accept)
	if err := p.Listen(); err != nil {
		t.Fatal(err)
	}
	faultnettest.CloseAtEnd(t, p)
	return p
}

// dial connects a client to p, closed when the test ends.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// setup starts a proxy in front of an upstream listener, connects a client
// and returns the proxy, its protocol layer, the client's socket and the
// upstream's accepted one.
func setup(t *testing.T, deliver bool) (*Proxy, *plain, net.Conn, net.Conn) {
	t.Helper()
	ln := listen(t)
	l := &plain{deliver: deliver}
	p := start(t, ln.Addr().String(), l.accept)
	client := dial(t, p)
	return p, l, client, accept(t, ln)
}

func accept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// closed asserts that c reads the end of stream (or a reset) soon.
func closed(t *testing.T, c net.Conn, who string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the %s's side stayed open", who)
	}
}

// eachWay runs f as a subtest with a reader that forwards and with one
// that delivers.
func eachWay(t *testing.T, f func(t *testing.T, deliver bool)) {
	for _, deliver := range []bool{false, true} {
		name := "Forward"
		if deliver {
			name = "Deliver"
		}
		t.Run(name, func(t *testing.T) { f(t, deliver) })
	}
}

func TestForwardBothWays(t *testing.T) {
	eachWay(t, func(t *testing.T, deliver bool) {
		p, l, client, up := setup(t, deliver)
		big := bytes.Repeat([]byte("0123456789"), 3*BufSize/10+7)
		go client.Write(big)
		if got := readN(t, up, len(big)); !bytes.Equal(got, big) {
			t.Fatal("the upstream got other bytes")
		}
		up.Write([]byte("pong"))
		if got := readN(t, client, 4); string(got) != "pong" {
			t.Fatalf("the client got %q", got)
		}
		if n := l.accepted.Load(); n != 1 || len(p.Conns()) != 1 || p.Conns()[0].Upstream() == nil {
			t.Fatalf("accepted %d, conns %v", n, p.Conns())
		}
		// An end of stream passes as a half-close: the other way
		// still works.
		client.(*net.TCPConn).CloseWrite()
		closed(t, up, "upstream")
		up.Write([]byte("late"))
		if got := readN(t, client, 4); string(got) != "late" {
			t.Fatalf("after the client's half-close it got %q", got)
		}
	})
}

func TestKillClosesBothSidesAndAcceptsAgain(t *testing.T) {
	p, l, client, up := setup(t, false)
	p.Kill()
	closed(t, client, "client")
	closed(t, up, "upstream")
	dial(t, p)
	deadline := time.Now().Add(2 * time.Second)
	for l.accepted.Load() != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := l.accepted.Load(); n != 2 {
		t.Fatalf("accepted %d after Kill, want 2", n)
	}
}

func TestPartitionHoldsBytesAndTheEndOfStream(t *testing.T) {
	eachWay(t, func(t *testing.T, deliver bool) {
		p, _, client, up := setup(t, deliver)
		p.Partition()
		up.Write([]byte("down"))
		client.Write([]byte("up"))
		client.(*net.TCPConn).CloseWrite()
		faultnettest.Silent(t, up, "the upstream")
		faultnettest.Silent(t, client, "the client")
		p.Heal()
		up.SetReadDeadline(time.Now().Add(2 * time.Second))
		if got, err := io.ReadAll(up); err != nil || string(got) != "up" {
			t.Fatalf("after Heal the upstream got %q, %v; want up, then the end of stream", got, err)
		}
		if got := readN(t, client, 4); string(got) != "down" {
			t.Fatalf("after Heal the client got %q", got)
		}
	})
}

// A connection accepted during a partition dials the upstream only after
// Heal.
func TestPartitionDelaysTheDial(t *testing.T) {
	ln := listen(t)
	p := start(t, ln.Addr().String(), (&plain{}).accept)
	p.Partition()
	dial(t, p)
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(300 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("the upstream was dialled during the partition")
	}
	p.Heal()
	accept(t, ln)
}

func TestDelay(t *testing.T) {
	p, _, client, up := setup(t, false)
	const d = 100 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	client.Write([]byte("x"))
	readN(t, up, 1)
	up.Write([]byte("y"))
	readN(t, client, 1)
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip %v with %v each way", rtt, d)
	}
	p.Delay(0)
	start = time.Now()
	client.Write([]byte("x"))
	readN(t, up, 1)
	if took := time.Since(start); took > d {
		t.Fatalf("%v one way after Delay(0)", took)
	}
}

// KillAfter forwards what it is given, then kills; a reader's own Kill
// loses what it read.
func TestKillAfter(t *testing.T) {
	ln := listen(t)
	p := start(t, ln.Addr().String(), func(*Conn) Session {
		return ServeFunc(func(c *Conn) {
			c.Run(func(pp *Pipe) {
				b := make([]byte, 4)
				n, _ := io.ReadFull(pp, b)
				pp.KillAfter(b[:n/2])
			}, forward(false))
		})
	})
	client := dial(t, p)
	up := accept(t, ln)
	client.Write([]byte("abcd"))
	up.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, _ := io.ReadAll(up); string(got) != "ab" {
		t.Fatalf("the upstream got %q, want ab, then the end", got)
	}
	closed(t, client, "client")
}

func TestUpstreamUnreachable(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	closed(t, dial(t, start(t, addr, (&plain{}).accept)), "client")
}

// Close ends every goroutine, with a partition holding a reader and a
// writer.
func TestCloseWhilePartitioned(t *testing.T) {
	eachWay(t, func(t *testing.T, deliver bool) {
		p, _, client, _ := setup(t, deliver)
		p.Partition()
		client.Write([]byte("held"))
		time.Sleep(50 * time.Millisecond)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if !p.Closed() || len(p.Conns()) != 0 {
			t.Fatalf("Closed %v, %d conns", p.Closed(), len(p.Conns()))
		}
		faultnettest.NoGoroutines(t)
		closed(t, client, "client")
	})
}

// Listen's proxy forwards what it is given both ways, as it comes, and
// its faults apply: bytes wait out a partition.
func TestListenForwards(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // an echo server
	}()
	p, err := Listen(up.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo := func(msg string) string {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(msg))
		b := make([]byte, len(msg))
		if _, err := io.ReadFull(c, b); err != nil {
			return err.Error()
		}
		return string(b)
	}
	if got := echo("ping"); got != "ping" {
		t.Fatalf("echo: %q", got)
	}
	p.Partition()
	go func() { time.Sleep(200 * time.Millisecond); p.Heal() }()
	start := time.Now()
	if got := echo("pong"); got != "pong" || time.Since(start) < 150*time.Millisecond {
		t.Errorf("through a partition healed after 200 ms: %q after %v", got, time.Since(start))
	}
}

// Reset closes both sides with a reset, not an end of stream.
func TestResetResetsBothSides(t *testing.T) {
	p, _, client, up := setup(t, false)
	// The upstream accepted the proxy's dial; wait until the proxy has it
	// too (a connection still dialling is closed, not reset).
	deadline := time.Now().Add(2 * time.Second)
	for cs := p.Conns(); len(cs) != 1 || cs[0].Upstream() == nil; cs = p.Conns() {
		if time.Now().After(deadline) {
			t.Fatal("the proxy's connection never got its upstream")
		}
		time.Sleep(time.Millisecond)
	}
	p.Reset()
	for _, s := range []struct {
		c   net.Conn
		who string
	}{{client, "client"}, {up, "upstream"}} {
		s.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := s.c.Read(make([]byte, 8))
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the %s read %v after Reset, want a connection reset", s.who, err)
		}
	}
}

// ended is a protocol layer that forwards both ways and, once both have
// ended, says whether the connection was struck.
type ended struct{ struck, done chan bool }

func (l *ended) accept(*Conn) Session {
	return ServeFunc(func(c *Conn) {
		c.Run(forward(false), forward(false))
		select {
		case <-c.Done():
			l.done <- true
		default:
			l.done <- false
		}
		l.struck <- c.Struck()
	})
}

// Struck tells a kill from a side's own end: a client that closes its
// socket while the upstream still sends (its writes then fail on a peer
// gone, and the proxy tears the connection down) is not struck; Kill,
// Reset and KillAfter are. (Issue 55's soak: the teardown after a
// client's own end had been taken for a kill, and the end left out of
// the history.)
func TestStruckIsAKillNotAnEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(p *Proxy, client, up net.Conn)
		struck bool
		down   bool // Done is closed (by the teardown) though no kill struck
	}{
		{"the client closes as the upstream sends", func(p *Proxy, client, up net.Conn) {
			client.(*net.TCPConn).SetLinger(0)
			client.Close()
			for range 50 {
				if _, err := up.Write([]byte("heartbeat")); err != nil {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			up.Close()
		}, false, true},
		{"the upstream closes", func(p *Proxy, client, up net.Conn) { up.Close(); client.Close() }, false, false},
		{"Kill", func(p *Proxy, client, up net.Conn) { p.Kill() }, true, true},
		{"Reset", func(p *Proxy, client, up net.Conn) { p.Reset() }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t)
			l := &ended{struck: make(chan bool, 1), done: make(chan bool, 1)}
			p := start(t, ln.Addr().String(), l.accept)
			client := dial(t, p)
			up := accept(t, ln)
			client.Write([]byte("x"))
			readN(t, up, 1)
			tc.end(p, client, up)
			select {
			case got := <-l.struck:
				if got != tc.struck {
					t.Fatalf("Struck = %v, want %v", got, tc.struck)
				}
				if down := <-l.done; tc.down && !down {
					t.Fatalf("Done not closed: the case does not tear the connection down as meant")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the connection did not end")
			}
		})
	}
	t.Run("KillAfter", func(t *testing.T) {
		ln := listen(t)
		got := make(chan bool, 1)
		p := start(t, ln.Addr().String(), func(*Conn) Session {
			return ServeFunc(func(c *Conn) {
				c.Run(func(pp *Pipe) {
					b := make([]byte, 1)
					io.ReadFull(pp, b)
					pp.KillAfter(b)
				}, forward(false))
				got <- c.Struck()
			})
		})
		client := dial(t, p)
		accept(t, ln)
		client.Write([]byte("x"))
		select {
		case s := <-got:
			if !s {
				t.Fatal("a KillAfter is not struck")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the connection did not end")
		}
	})
}
