// Package postgres runs private PostgreSQL servers and injects faults into
// their clients' sessions, for lockprover's PostgreSQL advisory-lock family
// (adapters/runners/pgadvisoryrun). It is to PostgreSQL what adapters/servers/mariadb is to
// MariaDB.
//
// # The private server
//
// StartPrivate initialises a data directory with initdb and starts a
// postgres of the caller's own on a free port of 127.0.0.1 (as user
// postgres when the caller is root: PostgreSQL refuses root); Restart (a
// fast shutdown), Crash (an immediate one) and Stop act on it, and Stop
// removes its data. Terminate ends chosen sessions from the server's side
// (pg_terminate_backend), as an administrator, a pooler or the server's
// own timeouts (idle_session_timeout) would; AdvisoryHolders says which
// sessions hold an advisory lock, from pg_locks.
//
// # The proxy
//
// A Proxy is a TCP proxy that lockprover puts in front of each client
// process it runs, whatever its language, to strike the process's
// connections in the ways a network strikes a session-bound lock:
//
//   - Kill (both sides read an end of stream) and Reset (both read a
//     reset): the server ends the session and releases its advisory locks
//     at once, the client learns it at its next read;
//   - Partition and Heal: no byte passes, both ways, and none is lost; the
//     session and its locks live on, and on Heal everything is delivered;
//   - Cut: the current connections go silent for good (what either side
//     sends is dropped, and neither is told): the client believes it holds
//     its locks, and the server keeps them as long as its session lives,
//     which only the server's own timers end (idle_session_timeout, a
//     statement's timeout); a TCP keepalive to the proxy is answered, as a
//     half-open connection behind a NAT is;
//   - Sever: a Cut after which the server's side is closed, as the
//     server's TCP keepalive or tcp_user_timeout closes a connection whose
//     peer has gone silent: the session ends and its locks are released,
//     and the client, still silent, is never told;
//   - Delay: latency each way.
//
// It reads nothing of the PostgreSQL protocol: these faults need none. The
// network half (listening, dialling, Kill, Reset, Partition, Heal, Delay)
// is package adapters/host/faultnet's.
package postgres

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
)

// A Proxy listens on a free port of 127.0.0.1 and forwards each accepted
// client connection to the upstream server. Faults apply to the
// connections open at the time (and, for Partition and Delay, to later
// ones until lifted); the proxy keeps accepting connections after any of
// them, so a client can reconnect. Its methods are safe for concurrent use.
type Proxy struct {
	fn       *faultnet.Proxy
	accepted atomic.Int64
}

// session is one connection's state: whether it is cut.
type session struct {
	cut atomic.Bool
}

// NewProxy starts a proxy in front of the server at upstream (host:port).
// The caller must Close it.
func NewProxy(upstream string) (*Proxy, error) {
	p := &Proxy{}
	p.fn = faultnet.New(upstream, func(*faultnet.Conn) faultnet.Session {
		p.accepted.Add(1)
		return &session{}
	})
	if err := p.fn.Listen(); err != nil {
		return nil, err
	}
	return p, nil
}

// Serve forwards both ways.
func (s *session) Serve(c *faultnet.Conn) { c.Run(s.forward, s.forward) }

// forward passes what it reads on until the connection is cut; from then
// on it drops everything, the end of stream included, so that the other
// side is never told.
func (s *session) forward(pp *faultnet.Pipe) {
	buf := make([]byte, faultnet.BufSize)
	for {
		if !pp.Conn().WaitHealed() {
			return
		}
		n, err := pp.Read(buf)
		if n > 0 && !s.cut.Load() {
			var ok bool
			if buf, ok = pp.Forward(buf[:n]); !ok {
				return
			}
		}
		if err != nil {
			if !s.cut.Load() {
				pp.End(err)
			}
			return
		}
	}
}

// Addr is the host:port clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.fn.Addr() }

// URL is a connection URL for user postgres through the proxy (URL).
func (p *Proxy) URL() string { return URL(p.fn.Addr()) }

// Accepted is how many connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Open is how many connections are open through the proxy now (cut ones
// included, until both their sides have closed).
func (p *Proxy) Open() int { return len(p.fn.Conns()) }

// UpstreamPorts are the local ports of the current connections' server
// sides (those dialled): the server's pg_stat_activity.client_port of the
// sessions the proxy carries (Server.SessionsFrom).
func (p *Proxy) UpstreamPorts() []int {
	var ports []int
	for _, c := range p.fn.Conns() {
		if up := c.Upstream(); up != nil {
			if a, ok := up.LocalAddr().(*net.TCPAddr); ok {
				ports = append(ports, a.Port)
			}
		}
	}
	return ports
}

// Kill closes both sides of every current connection.
func (p *Proxy) Kill() { p.fn.Kill() }

// Reset resets both sides of every current connection.
func (p *Proxy) Reset() { p.fn.Reset() }

// Partition holds every byte, both ways, on every connection, current and
// new, until Heal.
func (p *Proxy) Partition() { p.fn.Partition() }

// Heal ends a partition: what was held is delivered, in order.
func (p *Proxy) Heal() { p.fn.Heal() }

// Delay adds d of latency each way to what is forwarded from now on; zero
// removes it.
func (p *Proxy) Delay(d time.Duration) { p.fn.Delay(d) }

// Cut silences every current connection for good: bytes either way are
// dropped, ends of stream too, and the sockets stay open until each side
// closes its own (the proxy then closes the other). New connections pass
// as usual.
func (p *Proxy) Cut() { p.cut(false) }

// Sever cuts every current connection (Cut), then closes its server side,
// as the server's keepalive would close it once the client went silent:
// the server ends the session; the client is never told.
func (p *Proxy) Sever() { p.cut(true) }

func (p *Proxy) cut(sever bool) {
	for _, c := range p.fn.Conns() {
		s, ok := c.Session().(*session)
		if !ok {
			continue
		}
		s.cut.Store(true)
		if sever {
			if up := c.Upstream(); up != nil {
				up.Close()
			}
		}
	}
}

// Close stops listening, closes every connection and returns once all the
// proxy's goroutines have ended.
func (p *Proxy) Close() error { return p.fn.Close() }
