// Package faultnet is the network half of lockprover's fault-injecting TCP
// proxies. A Proxy listens on 127.0.0.1 (a free port), dials its upstream
// once per accepted client connection and forwards the two directions of
// each connection, applying the faults that need no knowledge of the
// protocol:
//
//   - Kill: both sockets of every current connection closed at once;
//   - Reset: the same, with a reset (RST) instead of an end of stream;
//   - Partition and Heal: no byte passes either way, the sockets stay open,
//     what is sent meanwhile (an end of stream included) is held, in order,
//     until Heal;
//   - Delay: latency added to every byte forwarded.
//
// It reads nothing of what passes. A protocol layer on top (package
// adapters/servers/rabbitmq/amqpproxy for AMQP 0-9-1, adapters/servers/mariadb for the MySQL protocol)
// gives each accepted connection a Session, whose Serve reads each
// direction from its Pipe and decides what passes on and when (Pipe's
// Forward, Deliver, KillAfter and End): it may hold bytes back, drop them,
// write bytes of its own, or kill the connection. The faults that need the
// protocol (a lost reply, a hook after the n-th method or statement, a
// skewed clock) are the protocol layer's.
package faultnet

import (
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Proxy accepts client connections and forwards each to its upstream.
// Faults apply to the connections open at the time (and, for Partition and
// Delay, to later ones until lifted); the proxy keeps accepting connections
// after Kill, so a client can reconnect. Its methods are safe for
// concurrent use.
type Proxy struct {
	upstream string
	accept   func(*Conn) Session
	ln       net.Listener // nil until Listen
	delay    atomic.Int64 // nanoseconds added to every forwarded chunk

	partitioned atomic.Bool
	mu          sync.Mutex
	healed      chan struct{} // closed by Heal; replaced by Partition
	conns       map[*Conn]struct{}
	closed      bool
	wg          sync.WaitGroup
}

// A Session is a protocol layer's part in one connection.
type Session interface {
	// Serve forwards the connection c once its upstream is dialled
	// (usually with c.Run) and returns when it is done with it; the
	// connection is then killed, if it is not already, and forgotten.
	Serve(c *Conn)
}

// ServeFunc is a Session that is only its Serve.
type ServeFunc func(c *Conn)

// Serve calls f(c).
func (f ServeFunc) Serve(c *Conn) { f(c) }

// New returns a proxy in front of the server at upstream (host:port) that
// is not listening yet (see Listen). accept is called for each accepted
// client connection, before the connection is tracked and its upstream
// dialled, and returns the connection's Session (Conn.Session): that is
// where a protocol layer counts connections and keeps a connection's state.
func New(upstream string, accept func(c *Conn) Session) *Proxy {
	return &Proxy{upstream: upstream, accept: accept, conns: map[*Conn]struct{}{}}
}

// Listen starts p listening on 127.0.0.1, on a free port, and accepting
// connections; it is called once, before p is shared. The upstream is
// dialled once per accepted connection; when it cannot be, the client's
// connection is closed at once.
func (p *Proxy) Listen() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.ln = ln
	p.wg.Add(1)
	go p.acceptLoop()
	return nil
}

// Addr is the host:port clients dial instead of the upstream's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the host:port the proxy dials.
func (p *Proxy) Upstream() string { return p.upstream }

// Close stops listening, kills every connection and returns once all the
// proxy's goroutines have ended. It must not be called from a goroutine of
// the proxy's (a Session's reader, or a function it calls).
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cs := slices.Collect(maps.Keys(p.conns))
	p.mu.Unlock()
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	for _, c := range cs {
		c.Kill()
	}
	p.wg.Wait()
	return err
}

// Closed reports whether Close has been called.
func (p *Proxy) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Conns returns the current connections (accepted and not yet ended,
// whether or not their upstream is dialled yet), in no order.
func (p *Proxy) Conns() []*Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.conns))
}

// Kill closes both sides of every current connection at once: each side
// reads EOF (or a reset). Bytes not yet forwarded are lost. New connections
// are accepted as usual.
func (p *Proxy) Kill() {
	for _, c := range p.Conns() {
		c.Kill()
	}
}

// Reset resets every current connection (Conn.Reset): both sides read a
// reset. New connections are accepted as usual.
func (p *Proxy) Reset() {
	for _, c := range p.Conns() {
		c.Reset()
	}
}

// Partition stops passing bytes in both directions of every connection,
// current and new, and keeps the sockets open. What is sent meanwhile is
// held, in order, and so is an end of stream passed on with Pipe.End. A
// connection accepted during the partition dials the upstream only after
// Heal.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.partitioned.Load() {
		p.healed = make(chan struct{})
		p.partitioned.Store(true)
	}
}

// Heal ends a partition: the held bytes are delivered, in order, and
// forwarding goes on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partitioned.Load() {
		p.partitioned.Store(false)
		close(p.healed)
	}
}

// Delay adds d of latency, each way, to every byte forwarded from now on,
// keeping their order (a request and its reply take 2d more). Zero or less
// removes it for what is passed on from then on.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// waitHealed blocks while a partition holds, and reports false if done is
// closed first.
func (p *Proxy) waitHealed(done <-chan struct{}) bool {
	for p.partitioned.Load() {
		p.mu.Lock()
		healed, still := p.healed, p.partitioned.Load()
		p.mu.Unlock()
		if !still {
			break
		}
		select {
		case <-healed:
		case <-done:
			return false
		}
	}
	return true
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or the like: let it pass.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c := p.NewConn(nc)
		c.session = p.accept(c)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Kill()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// Forward is a Pipe's reader that passes every byte on as it comes, and
// the end of stream after them: a Session that is only Run(Forward,
// Forward) forwards a protocol it need not read, with the Proxy's own
// faults (Kill, Partition, Delay).
func Forward(pp *Pipe) {
	buf := make([]byte, BufSize)
	for {
		n, err := pp.Read(buf)
		if n > 0 {
			var ok bool
			if buf, ok = pp.Forward(buf[:n]); !ok {
				return
			}
		}
		if err != nil {
			pp.End(err)
			return
		}
	}
}

// Listen starts a proxy in front of upstream that forwards both ways as
// they come (Forward), listening on a free port of 127.0.0.1.
func Listen(upstream string) (*Proxy, error) {
	p := New(upstream, func(*Conn) Session {
		return ServeFunc(func(c *Conn) { c.Run(Forward, Forward) })
	})
	if err := p.Listen(); err != nil {
		return nil, err
	}
	return p, nil
}
