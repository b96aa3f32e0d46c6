package redis

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
)

// A Proxy is a fault-injecting TCP proxy in front of a redis-server that
// reads RESP: beside the faults of package faultnet (Kill, Partition,
// Heal), it can lose the reply to one command (DropReply): the server has
// applied the command, and its reply never reaches the client, whose
// connection is cut instead, as when a network fails after the server
// answered. It frames what passes both ways (RESP2 and RESP3, commands as
// arrays of bulk strings), so that the reply lost is the whole reply to
// one command of the lock's, never a connection's handshake (HELLO,
// CLIENT, SELECT, PING, and INFO: ioredis's ready check, which a client
// connecting late, on a loaded machine, sends after the arm) nor a
// NOSCRIPT error (after which go-redis sends
// the script again as EVAL: the reply lost is then EVAL's, a command the
// server applied).
type Proxy struct {
	fn     *faultnet.Proxy
	armed  atomic.Bool
	onDrop atomic.Pointer[func()]
	// Tracer's Trace is what the proxy saw of every connection, in
	// order: each command it read from the client (its name), the
	// server's answer to it (its first line, cut), a reply it lost, and
	// each side's end, at the time it read them (a partition holds what
	// it read: a reply read before a heal may reach the client after it).
	faultnet.Tracer

	mu     sync.Mutex
	rounds []Round
}

// A Round is one command and its answer, as the proxy saw them (a
// connection's handshake too: a client that dials for each operation
// waits for its answer first): when it read the command from the client, and when it read the
// server's answer, whether or not the client was still there to take it
// (Gone: it had ended its connection first, as a client does when its
// deadline passes). A Round's length is the server's: how long it took
// to answer, the proxy's own hops included (a fraction of a millisecond
// on an idle machine).
type Round struct {
	Command        string
	Sent, Answered time.Time
	Gone           bool
}

// Rounds are every Round the proxy saw answered, in the order of the
// answers: the commands that need no waiting (not a blocking command, nor
// anything on a connection that subscribed, whose answers come when the
// server has something to say).
func (p *Proxy) Rounds() []Round {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rounds)
}

// Listen starts a Proxy in front of upstream (host:port), listening on a
// free port of 127.0.0.1.
func Listen(upstream string) (*Proxy, error) {
	p := &Proxy{}
	p.fn = faultnet.New(upstream, func(*faultnet.Conn) faultnet.Session {
		s := &respSession{p: p}
		return faultnet.ServeFunc(func(c *faultnet.Conn) { c.Run(s.toServer, s.toClient) })
	})
	if err := p.fn.Listen(); err != nil {
		return nil, err
	}
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.fn.Addr() }

// Close stops accepting and kills every connection.
func (p *Proxy) Close() error { return p.fn.Close() }

// Kill closes both sockets of every current connection.
func (p *Proxy) Kill() { p.fn.Kill() }

// Partition holds every byte both ways until Heal.
func (p *Proxy) Partition() { p.fn.Partition() }

// Heal lets what Partition held pass, in order.
func (p *Proxy) Heal() { p.fn.Heal() }

// DropReply arms the proxy: the next reply to a command of the lock's, on
// any of its connections, is lost and that connection cut (after the
// server applied the command). It strikes once; OnDrop hears when. A
// reply that comes after its client closed the connection (it gave up
// waiting) is lost to nobody: it does not spend the arm, which strikes a
// later reply the client still waits for.
func (p *Proxy) DropReply() { p.armed.Store(true) }

// OnDrop sets f to be called when a reply is lost, before the connection
// is cut (from the proxy's goroutine).
func (p *Proxy) OnDrop(f func()) { p.onDrop.Store(&f) }

// respSession is one connection: the commands sent and not yet
// answered, in order.
type respSession struct {
	p       *Proxy
	mu      sync.Mutex
	pending []sent
	// waits is set once the connection sent a command whose answer waits
	// on something other than the server's running (a blocking command,
	// a subscription): its answers time no Round from then on.
	waits bool
	// gone is set once the client's side ended (it closed the
	// connection): no reply can reach it any more.
	gone atomic.Bool
}

// toServer forwards the client's commands, noting each one's name.
func (s *respSession) toServer(pp *faultnet.Pipe) {
	br := bufio.NewReader(pp)
	var buf bytes.Buffer
	for {
		buf.Reset()
		name, err := readRESP(br, &buf, true)
		if err != nil {
			s.p.Note("-> the client's side ended (%v)", err)
			s.gone.Store(true)
			if buf.Len() > 0 {
				pp.Deliver(buf.Bytes())
			}
			pp.End(err)
			return
		}
		s.mu.Lock()
		s.pending = append(s.pending, sent{strings.ToUpper(name), time.Now()})
		s.waits = s.waits || waits(strings.ToUpper(name))
		s.mu.Unlock()
		s.p.Note("-> %s", strings.ToUpper(name))
		if !pp.Deliver(buf.Bytes()) {
			return
		}
	}
}

// toClient forwards the server's replies, losing one when armed.
func (s *respSession) toClient(pp *faultnet.Pipe) {
	br := bufio.NewReader(pp)
	var buf bytes.Buffer
	for {
		buf.Reset()
		_, err := readRESP(br, &buf, false)
		if err != nil {
			s.p.Note("<- the server's side ended (%v)", err)
			if buf.Len() > 0 {
				pp.Deliver(buf.Bytes())
			}
			pp.End(err)
			return
		}
		name := s.answered(buf.Bytes(), time.Now())
		if lockCommand(name) && !bytes.HasPrefix(buf.Bytes(), []byte("-NOSCRIPT")) && !s.gone.Load() && s.p.armed.CompareAndSwap(true, false) {
			s.p.Note("<- %s %s LOST (drop-reply), the connection cut", name, firstLine(buf.Bytes()))
			if f := s.p.onDrop.Load(); f != nil {
				(*f)()
			}
			pp.KillAfter(nil)
			return
		}
		s.p.Note("<- %s %s", name, firstLine(buf.Bytes()))
		if !pp.Deliver(buf.Bytes()) {
			return
		}
	}
}

// firstLine is a reply's first line, without its CRLF, cut at 40 bytes.
func firstLine(reply []byte) string {
	line, _, _ := bytes.Cut(reply, []byte("\r\n"))
	if len(line) > 40 {
		return string(line[:40]) + "..."
	}
	return string(line)
}

// sent is a command read from the client, and when.
type sent struct {
	name string
	at   time.Time
}

// answered pops the name of the command a reply, read at at, answers (""
// for a push the server sent unasked), noting its Round.
func (s *respSession) answered(reply []byte, at time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 || (len(reply) > 0 && reply[0] == '>') {
		return ""
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	if !s.waits {
		s.p.mu.Lock()
		s.p.rounds = append(s.p.rounds, Round{Command: c.name, Sent: c.at, Answered: at, Gone: s.gone.Load()})
		s.p.mu.Unlock()
	}
	return c.name
}

// waits says whether command name's answer may wait, by design, for
// something other than the server's running: a blocking command, a
// subscription (after which the server sends when it has news).
func waits(name string) bool {
	switch name {
	case "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP",
		"XREAD", "XREADGROUP", "WAIT", "WAITAOF", "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR":
		return true
	}
	return false
}

// lockCommand says whether a reply to command name may be lost: the
// commands a lock sends, not a connection's own (a handshake, a client's
// ready check: INFO, COMMAND, ECHO). Losing INFO's reply to ioredis's
// ready check struck no operation of the lock's, yet was recorded as a
// lost reply, and the plan's acquire then went through untouched.
func lockCommand(name string) bool {
	switch name {
	case "", "HELLO", "CLIENT", "SELECT", "PING", "AUTH", "QUIT", "RESET", "INFO", "COMMAND", "ECHO":
		return false
	}
	return true
}

// readRESP reads one RESP value (RESP2 or RESP3) from r, appending its
// bytes to buf, and returns, when first is set and the value is an array,
// its first element as a string (a command's name).
func readRESP(r *bufio.Reader, buf *bytes.Buffer, first bool) (string, error) {
	line, err := r.ReadBytes('\n')
	buf.Write(line)
	if err != nil {
		return "", err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("redis proxy: not a RESP line: %q", line)
	}
	head := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return head, nil
	case '$', '=', '!':
		n, err := strconv.Atoi(head)
		if err != nil || n < 0 {
			return "", err // a null bulk string, or garbage
		}
		b := make([]byte, n+2)
		_, err = io.ReadFull(r, b)
		buf.Write(b)
		return string(b[:max(0, min(n, len(b)))]), err
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(head)
		if err != nil || n < 0 {
			return "", err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		var name string
		for i := range n {
			s, err := readRESP(r, buf, false)
			if err != nil {
				return "", err
			}
			if i == 0 && first {
				name = s
			}
		}
		if line[0] == '|' { // attributes come before the reply they qualify
			return readRESP(r, buf, first)
		}
		return name, nil
	}
	return "", errors.New("redis proxy: not a RESP type: " + strconv.Quote(string(line[:1])))
}
