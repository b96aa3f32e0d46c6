package faultnet

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the dialling of the upstream.
const dialTimeout = 10 * time.Second

// A Conn is one client connection and its upstream connection.
type Conn struct {
	p       *Proxy
	client  net.Conn
	ctx     context.Context // cancelled by Kill
	cancel  context.CancelFunc
	session Session

	mu       sync.Mutex
	upstream net.Conn // nil until dialled
	reset    bool     // Reset: an upstream dialled after it is reset too
	// struck says Kill (or Reset, or a KillAfter) ended the connection:
	// a fault, or its proxy's decision, not the end of its sockets.
	struck atomic.Bool
}

// NewConn returns a connection of p's over client that p neither tracks
// nor serves, and that dials nothing: a protocol layer's tests drive its
// Pipes with it (Conn.Pipe). p's faults (Partition, Delay) apply to it,
// Kill and Close do not.
func (p *Proxy) NewConn(client net.Conn) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &Conn{p: p, client: client, ctx: ctx, cancel: cancel}
}

// Kill closes both sockets; every goroutine of the connection then ends.
// Bytes not yet forwarded are lost. Struck reports it after.
func (c *Conn) Kill() {
	c.struck.Store(true)
	c.teardown()
}

// Struck reports whether Kill, Reset or a KillAfter ended the connection,
// rather than its sockets' own end: once one side has ended, the proxy
// tears the other down (closing it, or failing to write to a peer gone),
// which closes Done too but is no kill. A protocol layer tells by it what
// a fault did from what a side of the connection did.
func (c *Conn) Struck() bool { return c.struck.Load() }

// teardown closes both sockets, as Kill does, without striking the
// connection: its end, or a write that failed.
func (c *Conn) teardown() {
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.client.Close()
	if c.upstream != nil {
		c.upstream.Close()
	}
}

// Reset kills the connection as Kill does, but each socket is closed
// with a reset (SO_LINGER 0) rather than an end of stream: each side reads
// "connection reset by peer", as after a middlebox's or a rebooted host's
// RST.
func (c *Conn) Reset() {
	c.mu.Lock()
	c.reset = true
	for _, s := range []net.Conn{c.client, c.upstream} {
		if tc, ok := s.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	c.mu.Unlock()
	c.Kill()
}

// Done is closed once the connection is killed or torn down.
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

// Session is what the proxy's accept function returned for c.
func (c *Conn) Session() Session { return c.session }

// ClientAddr is the client's address on its connection to the proxy:
// what the client's own errors name as their local end ("read tcp
// CLIENT->PROXY: i/o timeout").
func (c *Conn) ClientAddr() net.Addr { return c.client.RemoteAddr() }

// Upstream is the connection to the upstream, nil until it is dialled.
func (c *Conn) Upstream() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.upstream
}

// WaitHealed blocks while a partition holds, and reports false if the
// connection is killed first.
func (c *Conn) WaitHealed() bool { return c.p.waitHealed(c.ctx.Done()) }

func (c *Conn) run() {
	defer c.p.wg.Done()
	defer func() {
		c.teardown()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	if !c.WaitHealed() {
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(c.ctx, "tcp", c.p.upstream)
	if err != nil {
		return // the client sees its connection close
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		if tc, ok := up.(*net.TCPConn); ok && c.reset {
			tc.SetLinger(0) // reset while it was being dialled
		}
		c.mu.Unlock()
		up.Close()
		return
	}
	c.upstream = up
	c.mu.Unlock()
	c.session.Serve(c)
}

// Run forwards the two directions of c, once its upstream is dialled: the
// client's bytes to the upstream through a Pipe read by toUpstream, the
// upstream's to the client through one read by toClient, each in a
// goroutine of its own (see Pipe.Run). It returns once both have ended.
func (c *Conn) Run(toUpstream, toClient func(*Pipe)) {
	up := c.Upstream()
	var wg sync.WaitGroup
	wg.Go(func() { c.Pipe(c.client, up).Run(toUpstream) })
	wg.Go(func() { c.Pipe(up, c.client).Run(toClient) })
	wg.Wait()
}

const (
	// BufSize is the size of the buffers a Pipe hands back to its reader
	// (Forward) and recycles: a reader reading into buffers of this size
	// allocates none while it forwards.
	BufSize  = 32 << 10
	queueLen = 16 // chunks passed on and not yet written, per direction
)

// A Pipe is one direction of a connection: a source its reader reads and a
// destination its writer writes. The reader (the function Run is given)
// reads the source (Read), decides what may pass, and passes it on, in
// order, with Forward, Deliver, KillAfter and End; the Pipe writes it to
// the destination once its Delay is over and no partition holds. The
// reader writes itself when nothing passed on before is still waiting, no
// Delay applies and no partition holds (the common case, and the fastest);
// otherwise it hands the bytes to a writer goroutine, started then, which
// waits as needed. Only the reader may call a Pipe's methods.
type Pipe struct {
	c      *Conn
	src    io.Reader
	dst    io.Writer
	out    chan chunk   // to the writer; nil until it is started
	free   chan []byte  // buffers the writer is done with, for the reader
	queued atomic.Int32 // chunks handed to the writer and not yet written
	wg     sync.WaitGroup
}

// Pipe returns the direction of c that reads src and writes dst. If dst
// has a CloseWrite method, End passes an end of stream on with it.
func (c *Conn) Pipe(src io.Reader, dst io.Writer) *Pipe {
	return &Pipe{c: c, src: src, dst: dst}
}

// Run calls read (the Pipe's reader) and returns once it has returned and
// the writer has written what was passed on, or the connection is killed.
func (pp *Pipe) Run(read func(*Pipe)) {
	read(pp)
	if pp.out != nil {
		close(pp.out)
	}
	pp.wg.Wait()
}

// Conn is the connection the Pipe is a direction of.
func (pp *Pipe) Conn() *Conn { return pp.c }

// Read reads the source, partition or not: a reader that must not read
// during a partition calls Conn.WaitHealed first.
func (pp *Pipe) Read(b []byte) (int, error) { return pp.src.Read(b) }

// chunk is bytes passed on, and what to do after writing them.
type chunk struct {
	data    []byte
	at      time.Time // not before (Delay); zero: at once
	end     end
	written chan struct{} // Deliver's: closed once data is written
}

type end uint8

const (
	endNone   end = iota
	endEOF        // the source closed: half-close the destination
	endKill       // the source failed: tear the connection down
	endStrike     // a KillAfter: kill the connection
)

// Forward passes b on. It returns the buffer the reader may read into
// next: b's own (b[:cap(b)]) when b was written at once, otherwise a free
// one of BufSize bytes, b then belonging to the writer until it is
// written; and false if the connection is dead (a failed write kills it).
func (pp *Pipe) Forward(b []byte) (next []byte, ok bool) {
	ck := chunk{data: b, at: pp.at()}
	if pp.direct(ck) {
		return b[:cap(b)], pp.write(b)
	}
	select {
	case next = <-pp.free:
	default:
		next = make([]byte, BufSize)
	}
	return next, pp.send(ck)
}

// Deliver passes b on, as Forward does, and returns once b is written (b
// is the reader's again), or false once the connection is dead: the reader
// waits meanwhile, for a partition to heal among others.
func (pp *Pipe) Deliver(b []byte) bool {
	ck := chunk{data: b, at: pp.at()}
	if pp.direct(ck) {
		return pp.write(b)
	}
	ck.written = make(chan struct{})
	if !pp.send(ck) {
		return false
	}
	select {
	case <-ck.written:
		return true
	case <-pp.c.Done():
		return false
	}
}

// KillAfter passes b on, as Forward does, then kills the connection: a
// protocol layer's decision to end the connection at this point of the
// stream, which waits, as b does (even if b is empty), for its Delay and
// for a partition to heal. The reader passes nothing on after it.
func (pp *Pipe) KillAfter(b []byte) {
	pp.send(chunk{data: b, at: pp.at(), end: endStrike})
}

// End passes on the end of the source, which read err, once what was
// passed on before is written (it is not delayed itself, and waits for a
// partition to heal): for io.EOF, the destination is closed for writing
// (the connection is killed if it cannot be); for any other error the
// connection is killed. The reader passes nothing on after it.
func (pp *Pipe) End(err error) {
	ck := chunk{end: endEOF}
	if !errors.Is(err, io.EOF) {
		ck.end = endKill
	}
	pp.send(ck)
}

// at is when bytes passed on now may be written.
func (pp *Pipe) at() time.Time {
	if d := pp.c.p.delay.Load(); d > 0 {
		return time.Now().Add(time.Duration(d))
	}
	return time.Time{}
}

// direct reports whether the reader may write ck itself, at once.
func (pp *Pipe) direct(ck chunk) bool {
	return ck.at.IsZero() && pp.queued.Load() == 0 && !pp.c.p.partitioned.Load()
}

// write writes b to the destination, killing the connection if it fails.
func (pp *Pipe) write(b []byte) bool {
	if _, err := pp.dst.Write(b); err != nil {
		pp.c.teardown()
		return false
	}
	return true
}

// send hands ck to the writer, starting it the first time; false if the
// connection died first.
func (pp *Pipe) send(ck chunk) bool {
	if pp.out == nil {
		pp.out = make(chan chunk, queueLen)
		pp.free = make(chan []byte, queueLen+2)
		pp.wg.Add(1)
		go pp.writer()
	}
	pp.queued.Add(1)
	select {
	case pp.out <- ck:
		return true
	case <-pp.c.Done():
		return false
	}
}

// writer writes what the reader hands over, once its delay is over and no
// partition holds.
func (pp *Pipe) writer() {
	defer pp.wg.Done()
	done := pp.c.Done()
	var timer *time.Timer
	for {
		var ck chunk
		select {
		case c, ok := <-pp.out:
			if !ok {
				return
			}
			ck = c
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
		if !pp.c.WaitHealed() {
			return
		}
		if len(ck.data) > 0 && !pp.write(ck.data) {
			return
		}
		if ck.written == nil && cap(ck.data) == BufSize {
			select {
			case pp.free <- ck.data[:BufSize]:
			default:
			}
		}
		switch ck.end {
		case endEOF:
			if cw, ok := pp.dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			pp.c.teardown()
			return
		case endKill:
			pp.c.teardown()
			return
		case endStrike:
			pp.c.Kill()
			return
		}
		pp.queued.Add(-1)
		if ck.written != nil {
			close(ck.written)
		}
	}
}
