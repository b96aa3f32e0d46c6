// Package mariadb injects faults into MariaDB (and MySQL) clients and
// servers, for lockprover's database families (the database counting
// semaphore, package dbsem). It is to MariaDB what package adapters/servers/rabbitmq/amqpproxy is
// to RabbitMQ.
//
// # The proxy
//
// A Proxy is a TCP proxy that reads the MySQL client/server protocol it
// forwards. lockprover puts one in front of each client process it runs,
// whatever language the client is written in (DSN and Config point a
// go-sql-driver client at it), to
//
//   - strike the process's connections: Kill (both sides closed at once),
//     Partition and Heal (bytes held both ways; new connections hang),
//     DropCommitReply (a COMMIT is applied by the server but its reply never
//     reaches the client, whose connection then dies: the outcome is
//     unknown to it), AfterStatements (run a fault right after the n-th
//     statement was applied, before the client hears its reply);
//   - count the client's statements by kind and its commands (Counts), from
//     which efficiency properties are judged ("a master-row acquire of a key
//     already set up is 8 statements");
//   - skew the clock of the process's database sessions (Skew), by sending
//     SET @@timestamp before each of its statements;
//   - name the server's ids of the process's connections (ConnectionIDs),
//     for KillConnections, the server-side close.
//
// The proxy reads plain connections only. Its greeting to the client never
// offers TLS or compression (nor MySQL 8's query attributes, MariaDB's
// progress reports or metadata cache), so a client does not ask for them:
// go-sql-driver's default, tls=false, works, tls=preferred falls back to
// plain text, and tls=true (or a named TLS config) fails with the driver's
// "TLS requested but server does not support TLS". A client that asks
// anyway is disconnected (Counts.Refused). The upstream is dialled over
// TCP. The network half of the proxy (listening, dialling, Kill, Partition
// and Heal) is package adapters/host/faultnet's, as it is adapters/servers/rabbitmq/amqpproxy's; this
// package reads the packets and decides what passes.
//
// # Clock skew
//
// A session's clock is what NOW(), UTC_TIMESTAMP(), CURRENT_TIMESTAMP and
// UNIX_TIMESTAMP() read: the statement's start, by the server's clock,
// unless the session set @@timestamp. After SET @@timestamp = X the
// session's clock stands still at X (every statement reads X) until SET
// @@timestamp = DEFAULT; SYSDATE() ignores it. A client can therefore skew
// its own sessions with SET @@timestamp = UNIX_TIMESTAMP(NOW(6)) + offset,
// but the clock is then frozen, which is a jump, not a skew. Proxy.Skew
// makes a skewed clock that runs: before each statement of the client it
// sends SET @@timestamp = (the true time + offset) of its own, so that each
// statement reads a clock offset from the true one. See Skew for what that
// changes besides the clock.
//
// # Server faults
//
// KillConnections closes chosen connections from the server's side (KILL
// CONNECTION), as a server restart or an administrator would, with the
// ids ConnectionIDs gives. StartPrivate starts a MariaDB server of the
// test's own, in a directory of its own, for faults that must not touch the
// machine's shared server: Restart (stop, down for a while, start again on
// the same port and data), Crash (SIGKILL, then start again) and Stop.
package mariadb

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
)

// A Proxy listens on a local port and forwards each accepted client
// connection to the upstream server. Faults apply to the connections open
// at the time (and, for Partition and Skew, to later ones until lifted);
// the proxy keeps accepting connections after Kill, so a client can
// reconnect. Its methods are safe for concurrent use.
type Proxy struct {
	fn     *faultnet.Proxy
	counts *counters

	dropArm atomic.Bool  // DropCommitReply is armed
	sent    atomic.Int64 // statements the client has sent, for AfterStatements
	skew    atomic.Int64 // Skew's offset in nanoseconds; 0: none
	hookMu  sync.Mutex
	hooks   []hook // by n
}

// Listen starts a proxy on 127.0.0.1 (a free port) in front of the MariaDB
// or MySQL server at upstream (host:port, for example "127.0.0.1:3306").
// The server is dialled once per accepted client connection; when it cannot
// be (a server down for a restart), the client's connection is closed at
// once, so the client reads EOF where it would have read "connection
// refused".
func Listen(upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("mysql proxy: upstream %q is not host:port: %w", upstream, err)
	}
	p := &Proxy{counts: newCounters()}
	p.fn = faultnet.New(upstream, func(fc *faultnet.Conn) faultnet.Session {
		p.counts.connections.Add(1)
		return newConn(p, fc)
	})
	if err := p.fn.Listen(); err != nil {
		return nil, fmt.Errorf("mysql proxy: listen: %w", err)
	}
	return p, nil
}

// Addr is the host:port clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.fn.Addr() }

// DSN returns the go-sql-driver DSN dsn rewritten to reach the server
// through the proxy: the same user, password, database and parameters, over
// TCP to Addr, with tls=false and without compression, which the proxy
// could not read (tls=false is the driver's default already). dsn's address
// is replaced whatever it was; it should name the proxy's upstream.
func (p *Proxy) DSN(dsn string) (string, error) {
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("mysql proxy: %w", err)
	}
	return p.Config(cfg).FormatDSN(), nil
}

// Config is DSN for a parsed configuration: a copy of cfg that reaches the
// server through the proxy (cfg itself is not changed). A BeforeConnect
// function that changes the address defeats it.
func (p *Proxy) Config(cfg *driver.Config) *driver.Config {
	c := cfg.Clone()
	c.Net, c.Addr = "tcp", p.Addr()
	c.TLS, c.TLSConfig, c.AllowFallbackToPlaintext = nil, "false", false
	c.Apply(driver.EnableCompression(false))
	return c
}

// Close stops listening, closes both sides of every connection and returns
// once all the proxy's goroutines have ended. It must not be called from a
// function AfterStatements runs.
func (p *Proxy) Close() error { return p.fn.Close() }

// Counts returns the totals over every connection so far.
func (p *Proxy) Counts() Counts { return p.counts.snapshot() }

// Kill closes both sides of every current connection at once: the client
// reads EOF (go-sql-driver: "invalid connection" for a statement under
// way; an idle pooled connection is discarded before its next use and
// database/sql dials again), and the server sees its socket close and
// rolls back the connection's open transaction, releasing its row locks. Bytes not yet forwarded are lost.
// New connections are accepted as usual (a client that must stay cut off
// is partitioned instead).
func (p *Proxy) Kill() { p.fn.Kill() }

// Partition stops passing bytes in both directions of every connection,
// current and new, and keeps the sockets open: neither side learns anything
// until a timeout of its own. What is sent meanwhile is held, in order, as
// TCP would hold and retransmit it, and so is an end of stream: a side that
// gives up and closes its socket is not seen closing by the other side
// before Heal. A connection accepted during the partition dials the server
// only after Heal. A server-side transaction stays open, its row locks
// held, for as long as the partition lasts.
func (p *Proxy) Partition() { p.fn.Partition() }

// Heal ends a partition: the held bytes are delivered, in order, and
// forwarding goes on.
func (p *Proxy) Heal() { p.fn.Heal() }

// DropCommitReply arms a lost reply: the next COMMIT the client sends after
// the call (a statement of KindCommit, COM_QUERY or a prepared one's
// COM_STMT_EXECUTE: "COMMIT", "commit", "COMMIT WORK"...) is forwarded, so
// the server applies it, but its reply (OK, or an error) is read and
// dropped, and the connection is killed (see Kill): the transaction
// committed, or failed, and the client cannot know which. Counts.Dropped
// counts it. One COMMIT is chosen per call; once its reply is dropped, or
// its connection died first, the arm is spent; a second call before then
// changes nothing. A COMMIT already sent is never chosen, nor an implicit
// one (an autocommit statement, DDL).
func (p *Proxy) DropCommitReply() { p.dropArm.Store(true) }

// takeDrop spends DropCommitReply's arm, if armed.
func (p *Proxy) takeDrop() bool { return p.dropArm.Load() && p.dropArm.CompareAndSwap(true, false) }

// AfterStatements runs f right after the client's n-th statement through
// this proxy (counting from the proxy's start, over all its connections;
// statements are COM_QUERY and COM_STMT_EXECUTE, as in Counts.Statements,
// without Skew's) has been forwarded to the server and the server's whole
// reply has been read, and before that reply is passed to the client: the
// statement took effect and the client does not know yet. That is where a
// fault "in the middle of an operation" strikes: f may Kill (the reply is
// then lost with the connection), Partition, KillConnections, stop the
// client process, or sleep (the client waits for its reply meanwhile).
//
// Precisely, as package sim/mariadbsim's World.AfterStatements does, f runs at
// the first statement numbered n or more whose reply is read, or whose
// connection ends without one (a fault planned after a statement strikes
// whatever became of it, unless the proxy is being closed). So a hook set
// for a statement already sent runs after the next one; and when several
// connections are busy at once, a hook may run at a later statement whose
// reply came first. Hooks due together run in the order of their n.
//
// f runs on the goroutine that reads the connection's server side, and the
// reply waits for it to return: f must not wait for that connection's
// client to make progress, nor call Close.
func (p *Proxy) AfterStatements(n int, f func()) {
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	p.hooks = append(p.hooks, hook{int64(n), f})
	slices.SortStableFunc(p.hooks, func(a, b hook) int { return cmp.Compare(a.n, b.n) })
}

type hook struct {
	n int64
	f func()
}

// runHooks runs, in order, the hooks due at statement n: those set for n
// or an earlier statement.
func (p *Proxy) runHooks(n int64) {
	p.hookMu.Lock()
	i := 0
	for i < len(p.hooks) && p.hooks[i].n <= n {
		i++
	}
	due := slices.Clone(p.hooks[:i])
	p.hooks = slices.Delete(p.hooks, 0, i)
	p.hookMu.Unlock()
	for _, h := range due {
		h.f()
	}
}

// Skew makes every statement the client sends from now on, on every
// connection, read a session clock offset from the true one (the proxy's
// clock: the server's, on one machine). Before each COM_QUERY and
// COM_STMT_EXECUTE of the client the proxy sends, on the same connection,
// SET @@timestamp = <the true Unix time + offset, to the microsecond> of its
// own and swallows its OK, so that the session's clock runs at the true
// rate, offset. The SET is an exchange of its own, sent ahead of the
// client's command on the same connection (pipelined) and answered first:
// every command starts its sequence ids at 0, so neither the client's
// packets nor the server's replies to them need renumbering. Skew(0) ends
// the skew: each connection the proxy skewed is sent SET @@timestamp =
// DEFAULT before its next statement.
//
// What this changes besides the clock: ROW_COUNT() would read the SET's
// (0), so a statement whose text mentions ROW_COUNT gets no SET before it
// and reads the clock the previous one set (warnings, FOUND_ROWS() and
// LAST_INSERT_ID() are not changed by the SET); a SET @@timestamp of the
// client's own lasts until its next statement only; each statement costs a
// pipelined round trip more; and the clock stands still within one
// statement, as it always does. Counts.Injected counts the SETs. The
// skewed clock is the session's, which is what UTC_TIMESTAMP(6) and
// NOW(6) read: expiry tests the server runs with them see it, InnoDB's
// lock wait timeouts and event scheduler do not.
func (p *Proxy) Skew(offset time.Duration) { p.skew.Store(int64(offset)) }

// ConnectionIDs returns the server's connection ids (CONNECTION_ID(), the
// Id of SHOW PROCESSLIST, the argument of KILL) of the proxy's current
// connections, ascending, as the server's greeting on each told them.
func (p *Proxy) ConnectionIDs() []int64 {
	var ids []int64
	for _, fc := range p.fn.Conns() {
		if id := fc.Session().(*conn).connID(); id != 0 {
			ids = append(ids, int64(id))
		}
	}
	slices.Sort(ids)
	return ids
}
