// Package amqpproxy is a TCP proxy between AMQP 0-9-1 clients and a broker that
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
//
// The network half (listening, dialling the broker, Kill, Partition and
// Heal, Delay) is package adapters/host/faultnet's; this package reads the
// frames of each direction and decides what passes.
package amqpproxy

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
)

// A Proxy listens on a local port and forwards each accepted client
// connection to the broker address. Faults apply to the connections open at
// the time (and, for Partition and Delay, to later ones until lifted); the
// proxy keeps accepting connections after Kill, so a client can reconnect.
// Its methods are safe for concurrent use.
type Proxy struct {
	fn              *faultnet.Proxy
	counts          *counters
	armed           atomic.Uint32 // methodID whose next request's reply DropReply drops; 0: none; anyMethod: any
	sent            atomic.Int64  // methods the client has sent, for AfterMethods
	hookMu          sync.Mutex
	hooks           map[int64]func()
	evMu            sync.Mutex
	events          []ServerEvent // see ServerEvents
	faultnet.Tracer               // see Trace
}

// Listen starts a proxy on 127.0.0.1 (a free port) in front of the broker at
// brokerAddr (host:port, for example "127.0.0.1:5672"). The broker is dialled
// once per accepted client connection.
func Listen(brokerAddr string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(brokerAddr); err != nil {
		return nil, fmt.Errorf("proxy: broker address %q is not host:port: %w", brokerAddr, err)
	}
	p := newProxy(brokerAddr)
	if err := p.fn.Listen(); err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	return p, nil
}

// newProxy returns a proxy that is not listening yet.
func newProxy(brokerAddr string) *Proxy {
	watchStalls()
	p := &Proxy{counts: newCounters()}
	p.fn = faultnet.New(brokerAddr, func(*faultnet.Conn) faultnet.Session {
		p.counts.connections.Add(1)
		return faultnet.ServeFunc(p.serve)
	})
	return p
}

// Addr is the host:port clients dial instead of the broker's.
func (p *Proxy) Addr() string { return p.fn.Addr() }

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
func (p *Proxy) Close() error { return p.fn.Close() }

// Counts returns the totals over every connection so far.
func (p *Proxy) Counts() Counts { return p.counts.snapshot() }

// Kill closes both sides of every current connection at once, with no AMQP
// close: the client reads EOF (or a reset), the broker sees its socket
// close and releases the connection's exclusive queues within milliseconds.
// Bytes not yet forwarded are lost. New connections are accepted as usual.
func (p *Proxy) Kill() { p.fn.Kill() }

// Partition stops passing bytes in both directions of every connection,
// current and new, and keeps the sockets open: neither side learns anything
// until a heartbeat timeout. What is sent meanwhile is held, in order, as
// TCP would hold and retransmit it, and so is an end of stream: a side that
// gives up and closes its socket is not seen closing by the other side
// before Heal. A connection accepted during the partition dials the broker
// only after Heal.
func (p *Proxy) Partition() { p.fn.Partition() }

// Heal ends a partition: the held bytes are delivered, in order, and
// forwarding goes on.
func (p *Proxy) Heal() { p.fn.Heal() }

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

// Open is how many connections through the proxy are open (accepted and
// not yet ended on both sides).
func (p *Proxy) Open() int { return len(p.fn.Conns()) }

// BrokerSide returns the local addresses of the proxy's current connections
// to the broker: the broker lists each connection under the name
// "LOCAL -> BROKER", which is how rabbitmqctl finds a client's connections.
func (p *Proxy) BrokerSide() []string {
	var addrs []string
	for _, c := range p.fn.Conns() {
		if b := c.Upstream(); b != nil {
			addrs = append(addrs, b.LocalAddr().String())
		}
	}
	slices.Sort(addrs)
	return addrs
}

// Delay adds d of latency, each way, to every byte forwarded from now on,
// keeping their order (a request and its reply take 2d more). Zero or less
// removes it for what is read from then on.
func (p *Proxy) Delay(d time.Duration) { p.fn.Delay(d) }

// bufSize is the size of a stream's read buffer.
const bufSize = faultnet.BufSize

// serve forwards one connection, deciding its frames both ways.
func (p *Proxy) serve(c *faultnet.Conn) {
	sess := newSession()
	sess.mu.Lock()
	if a := c.ClientAddr(); a != nil {
		sess.client = a.String()
	}
	if up := c.Upstream(); up != nil {
		sess.local = up.LocalAddr().String()
	}
	sess.mu.Unlock()
	p.Note("connection %s opened, from the client's %s", sess.local, sess.client)
	start := func(dir int) func(*faultnet.Pipe) {
		return func(pp *faultnet.Pipe) {
			st := newStream(dir, sess, p.counts, p.take, make([]byte, bufSize))
			st.sent = p.clientSent
			read(pp, st)
			if dir == toClient && !c.Struck() {
				p.brokerEnded(sess, false)
			}
		}
	}
	c.Run(start(toBroker), start(toClient))
	// Struck, not Done: a connection one side ended is torn down after,
	// which is no kill (issue 55's soak: a reference client giving its
	// connection up, its end then left unrecorded as though lockprover
	// had killed it, and its lost hold judged a double hold).
	p.ended(sess, c.Struck())
}

// read reads one direction, decides its frames and passes on what may
// pass.
func read(pp *faultnet.Pipe, st *stream) {
	c := pp.Conn()
	for {
		if !c.WaitHealed() {
			return
		}
		if st.n == len(st.buf) { // only while holding frames after a basic.return
			st.buf = append(st.buf, make([]byte, len(st.buf))...)
		}
		k, err := pp.Read(st.buf[st.n:])
		st.n += k
		if k > 0 {
			st.sess.lastByte(st.dir, time.Now().UnixNano())
			release, kill, perr := st.process()
			switch {
			case perr != nil:
				st.count.malformed.Add(1)
				c.Kill()
				return
			case kill:
				pp.KillAfter(st.buf[:release])
				return
			case release > 0:
				next, ok := pp.Forward(st.buf[:release])
				if !ok {
					return
				}
				st.consumed(release, next)
			}
		}
		if err != nil {
			st.sess.sourceEnded(st.dir)
			pp.End(err)
			return
		}
	}
}
