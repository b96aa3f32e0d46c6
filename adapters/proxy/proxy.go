// Package proxy is a TCP proxy between AMQP 0-9-1 clients and a broker that
// reads the frames it forwards. lockprover puts one Proxy in front of each
// client it runs, whatever language the client is written in, to
//
//   - inject faults into that client's connections: Kill, Partition and
//     Heal, DropReply (the broker applies a method but its reply never
//     arrives, then the connection dies), Delay;
//   - count the AMQP methods the client sends and receives (Counts), from
//     which the efficiency properties are judged ("verify is one
//     basic.publish and its confirm").
//
// Only plain AMQP 0-9-1 (amqp://) can pass: the proxy must read the frames.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Proxy listens on a local port and forwards each accepted client
// connection to the broker address. Faults apply to the connections open at
// the time (and, for Partition and Delay, to later ones until lifted); the
// proxy keeps accepting connections after Kill, so a client can reconnect.
// Its methods are safe for concurrent use.
type Proxy struct {
	brokerAddr string
	ln         net.Listener
	counts     *counters
	armed      atomic.Uint32 // methodID whose next request's reply DropReply drops; 0: none; anyMethod: any
	sent       atomic.Int64  // methods the client has sent, for AfterMethods
	hookMu     sync.Mutex
	hooks      map[int64]func()
	delay      atomic.Int64 // nanoseconds added to every forwarded chunk

	partitioned atomic.Bool
	mu          sync.Mutex
	healed      chan struct{} // closed by Heal; replaced by Partition
	conns       map[*conn]struct{}
	closed      bool
	wg          sync.WaitGroup
}

// Listen starts a proxy on 127.0.0.1 (a free port) in front of the broker at
// brokerAddr (host:port, for example "127.0.0.1:5672"). The broker is dialled
// once per accepted client connection.
func Listen(brokerAddr string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(brokerAddr); err != nil {
		return nil, fmt.Errorf("proxy: broker address %q is not host:port: %w", brokerAddr, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := newProxy(brokerAddr)
	p.ln = ln
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func newProxy(brokerAddr string) *Proxy {
	return &Proxy{brokerAddr: brokerAddr, counts: newCounters(), conns: map[*conn]struct{}{}}
}

// Addr is the host:port clients dial instead of the broker's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns brokerURL (amqp://user:pass@host:port/vhost?options) with its
// host and port replaced by the proxy's, keeping credentials, vhost and
// options. amqps:// is refused: the proxy could not read encrypted frames.
func (p *Proxy) URL(brokerURL string) (string, error) {
	u, err := parseBrokerURL(brokerURL)
	if err != nil {
		return "", err
	}
	u.Host = p.Addr()
	return u.String(), nil
}

// Close stops listening, closes both sides of every connection and returns
// once all the proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cs := slices.Collect(maps.Keys(p.conns))
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range cs {
		c.kill()
	}
	p.wg.Wait()
	return err
}

// Counts returns the totals over every connection so far.
func (p *Proxy) Counts() Counts { return p.counts.snapshot() }

// Kill closes both sides of every current connection at once, with no AMQP
// close: the client reads EOF (or a reset), the broker sees its socket
// close and releases the connection's exclusive queues within milliseconds.
// Bytes not yet forwarded are lost. New connections are accepted as usual.
func (p *Proxy) Kill() {
	p.mu.Lock()
	cs := slices.Collect(maps.Keys(p.conns))
	p.mu.Unlock()
	for _, c := range cs {
		c.kill()
	}
}

// Partition stops passing bytes in both directions of every connection,
// current and new, and keeps the sockets open: neither side learns anything
// until a heartbeat timeout. What is sent meanwhile is held, in order, as
// TCP would hold and retransmit it, and so is an end of stream: a side that
// gives up and closes its socket is not seen closing by the other side
// before Heal. A connection accepted during the partition dials the broker
// only after Heal.
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

// DropReply arms a lost reply. The next request named method (a client
// method with a reply: "queue.declare", "queue.delete", "channel.open",
// "confirm.select", "basic.get", ...) that the client sends after the call is
// forwarded, so the broker applies it, but its reply is dropped, with
// everything after it on that connection, and the connection is killed
// (see Kill). The reply is the method's -ok (or any of them, for basic.get),
// or the channel.close or connection.close the broker sends instead.
//
// For "basic.publish" the request must go on a confirm channel (a publish
// elsewhere has no reply and is not chosen); its reply is the basic.ack or
// basic.nack that confirms it (a multiple one included) and a basic.return
// that precedes it: the proxy holds a return until the next confirm on that
// channel shows whose return it was.
//
// Only one request is chosen per call: once its reply is dropped, or its
// connection died first, the arm is spent. A request already sent before the
// call is never chosen. A new call replaces an arm not yet spent;
// DropReply("") disarms. Requests sent with no-wait are not chosen. An
// unknown method name, or one without a reply, is an error.
//
// DropReply("*") chooses the next request of any method that has a reply.
func (p *Proxy) DropReply(method string) error {
	switch method {
	case "":
		p.armed.Store(0)
		return nil
	case "*":
		p.armed.Store(anyMethod)
		return nil
	}
	i, ok := methodByName[method]
	if !ok || methods[i].replies == nil && methods[i].id != basicPublish {
		return fmt.Errorf("proxy: DropReply(%q): not an AMQP 0-9-1 client method with a reply", method)
	}
	p.armed.Store(uint32(methods[i].id))
	return nil
}

// anyMethod arms DropReply for any method with a reply.
const anyMethod = ^uint32(0)

// take spends the DropReply arm for a request of method id, if armed for it.
func (p *Proxy) take(id methodID) bool {
	a := p.armed.Load()
	return (a == uint32(id) || a == anyMethod) && p.armed.CompareAndSwap(a, 0)
}

// AfterMethods runs f (in a goroutine of its own) once the client has sent
// n methods in all through this proxy and the n-th has been forwarded to the
// broker: a fault aimed at the middle of an operation. f may call the
// proxy's fault methods.
func (p *Proxy) AfterMethods(n int, f func()) {
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	if p.hooks == nil {
		p.hooks = map[int64]func(){}
	}
	p.hooks[int64(n)] = f
}

// clientSent counts a method from the client and fires a due hook, after a
// moment so that the method reaches the broker first.
func (p *Proxy) clientSent() {
	n := p.sent.Add(1)
	p.hookMu.Lock()
	f := p.hooks[n]
	delete(p.hooks, n)
	p.hookMu.Unlock()
	if f != nil {
		go func() {
			time.Sleep(time.Millisecond)
			f()
		}()
	}
}

// BrokerSide returns the local addresses of the proxy's current connections
// to the broker: the broker lists each connection under the name
// "LOCAL -> BROKER", which is how rabbitmqctl finds a client's connections.
func (p *Proxy) BrokerSide() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var addrs []string
	for c := range p.conns {
		c.mu.Lock()
		if c.broker != nil {
			addrs = append(addrs, c.broker.LocalAddr().String())
		}
		c.mu.Unlock()
	}
	slices.Sort(addrs)
	return addrs
}

// Delay adds d of latency, each way, to every byte forwarded from now on,
// keeping their order (a request and its reply take 2d more). Zero or less
// removes it for what is read from then on.
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

func (p *Proxy) accept() {
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
		p.counts.connections.Add(1)
		ctx, cancel := context.WithCancel(context.Background())
		c := &conn{p: p, client: nc, ctx: ctx, cancel: cancel}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			cancel()
			nc.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// conn is one client connection and its broker connection.
type conn struct {
	p      *Proxy
	client net.Conn
	ctx    context.Context // cancelled by kill
	cancel context.CancelFunc

	mu     sync.Mutex
	broker net.Conn // nil until dialled
}

// kill closes both sockets; every goroutine of the connection then ends.
func (c *conn) kill() {
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.client.Close()
	if c.broker != nil {
		c.broker.Close()
	}
}

const (
	bufSize  = 32 << 10 // read buffer
	queueLen = 16       // chunks read and not yet written, per direction
)

// pipe is one direction of a connection: its reader decides what may pass
// and writes it to dst itself when nothing is queued, no delay applies and
// no partition holds (the common case, and the fastest); otherwise it hands
// the bytes to the direction's writer, which waits as needed.
type pipe struct {
	dst    io.Writer
	out    chan chunk
	free   chan []byte  // buffers the writer is done with, for the reader
	queued atomic.Int32 // chunks handed to the writer and not yet written
}

func newPipe(dst io.Writer) *pipe {
	return &pipe{dst: dst, out: make(chan chunk, queueLen), free: make(chan []byte, queueLen+2)}
}

// chunk is bytes read from one side and decided, on their way to the other
// side, and what to do after writing them.
type chunk struct {
	data []byte
	at   time.Time // not before (Delay); zero: at once
	end  end
}

type end uint8

const (
	endNone end = iota
	endEOF      // the source closed: half-close the destination
	endKill     // kill the connection
)

func (c *conn) run() {
	defer c.p.wg.Done()
	defer func() {
		c.kill()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	if !c.p.waitHealed(c.ctx.Done()) {
		return
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	b, err := d.DialContext(c.ctx, "tcp", c.p.brokerAddr)
	if err != nil {
		return // the client sees its connection close
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		b.Close()
		return
	}
	c.broker = b
	c.mu.Unlock()

	sess := newSession()
	var wg sync.WaitGroup
	start := func(dir int, src, dst net.Conn) {
		pp := newPipe(dst)
		wg.Add(2)
		go func() {
			defer wg.Done()
			c.write(pp)
		}()
		go func() {
			defer wg.Done()
			st := newStream(dir, sess, c.p.counts, c.p.take, make([]byte, bufSize))
			st.sent = c.p.clientSent
			c.read(src, st, pp)
		}()
	}
	start(toBroker, c.client, b)
	start(toClient, b, c.client)
	wg.Wait()
}

// read reads one side, decides the frames and passes on what may pass.
func (c *conn) read(src io.Reader, st *stream, pp *pipe) {
	done := c.ctx.Done()
	send := func(ck chunk) bool {
		pp.queued.Add(1)
		select {
		case pp.out <- ck:
			return true
		case <-done:
			return false
		}
	}
	for {
		if !c.p.waitHealed(done) {
			return
		}
		if st.n == len(st.buf) { // only while holding frames after a basic.return
			st.buf = append(st.buf, make([]byte, len(st.buf))...)
		}
		k, err := src.Read(st.buf[st.n:])
		st.n += k
		if k > 0 {
			release, kill, perr := st.process()
			if perr != nil {
				c.p.counts.malformed.Add(1)
				c.kill()
				return
			}
			ck := chunk{data: st.buf[:release]}
			if d := c.p.delay.Load(); d > 0 {
				ck.at = time.Now().Add(time.Duration(d))
			}
			switch {
			case kill:
				ck.end = endKill
				send(ck)
				return
			case release == 0:
			case ck.at.IsZero() && pp.queued.Load() == 0 && !c.p.partitioned.Load():
				// The writer is idle and only this reader gives it
				// work: write here, saving a hand-over.
				if _, err := pp.dst.Write(ck.data); err != nil {
					c.kill()
					return
				}
				st.consumed(release, st.buf)
			default:
				var next []byte
				select {
				case next = <-pp.free:
				default:
					next = make([]byte, bufSize)
				}
				st.consumed(release, next)
				if !send(ck) {
					return
				}
			}
		}
		if err != nil {
			ck := chunk{end: endEOF}
			if !errors.Is(err, io.EOF) {
				ck.end = endKill
			}
			send(ck)
			return
		}
	}
}

// write writes what a reader hands over, once its delay is over and no
// partition holds.
func (c *conn) write(pp *pipe) {
	done := c.ctx.Done()
	var timer *time.Timer
	for {
		var ck chunk
		select {
		case ck = <-pp.out:
		case <-done:
			return
		}
		if !ck.at.IsZero() {
			if wait := time.Until(ck.at); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-timer.C:
				case <-done:
					timer.Stop()
					return
				}
			}
		}
		if !c.p.waitHealed(done) {
			return
		}
		if len(ck.data) > 0 {
			if _, err := pp.dst.Write(ck.data); err != nil {
				c.kill()
				return
			}
		}
		if cap(ck.data) == bufSize {
			select {
			case pp.free <- ck.data[:bufSize]:
			default:
			}
		}
		switch ck.end {
		case endEOF:
			if cw, ok := pp.dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			c.kill()
			return
		case endKill:
			c.kill()
			return
		}
		pp.queued.Add(-1)
	}
}
