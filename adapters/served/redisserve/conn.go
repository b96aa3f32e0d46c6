package redisserve

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/sim/redissim"
)

// A conn is one TCP connection of a process to one server: read by its
// own goroutine (commands into events), answered in the World (by the
// coroutine, and by the server's step that replies).
type conn struct {
	p     *Process
	port  *port
	nc    net.Conn
	id    int // CLIENT ID
	downs int // its server's downs when it was made

	wmu sync.Mutex

	// The World's own: its name (CLIENT SETNAME), its command in the World
	// (busy, and how to abandon it), a transaction being queued, and
	// whether it is over for the World (dead) or ends after its reply
	// (quit).
	name    string
	resp    int // 2 or 3 (HELLO 3)
	busy    bool
	abandon func()
	multi   [][]string
	inMulti bool
	dirty   bool // a command of the transaction could not be queued
	dead    bool
	quit    bool

	// Its subscriptions (SUBSCRIBE): how to end each, by channel, in the
	// order made; and the replies of a SUBSCRIBE still being confirmed,
	// written in order as their confirmations come.
	subs     map[string]func()
	subOrder []string
	pending  []*subReply
}

// subReply is one channel's confirmation of a SUBSCRIBE, written once it
// and those before it are ready.
type subReply struct {
	v     any
	ready bool
}

func newConn(p *Process, pt *port, nc net.Conn) *conn {
	return &conn{p: p, port: pt, nc: nc, id: p.s.nextID(), downs: pt.downs, resp: 2}
}

// tag names the connection's server in the log: s0, s1...
func (c *conn) tag() string { return fmt.Sprintf("s%d", c.port.Key) }

func (c *conn) String() string {
	return fmt.Sprintf("%s's connection %d to server %d", c.p.name, c.id, c.port.Key)
}

// read reads the connection's commands until it ends or sends what is
// not RESP.
func (c *conn) read() {
	defer c.p.wg.Done()
	r := bufio.NewReaderSize(c.nc, 16*1024)
	for {
		args, err := readCommand(r)
		var pe protoError
		switch {
		case errors.As(err, &pe):
			c.p.put(event{c: c, kind: evBad, err: err})
			return
		case err != nil:
			c.p.put(event{c: c, kind: evGone, err: err})
			return
		}
		c.p.put(event{c: c, kind: evCommand, args: args})
	}
}

// write sends a reply; any goroutine may.
func (c *conn) write(v any) {
	b := appendReply(nil, v, c.resp)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.nc.Write(b)
}

// handle takes one event of the connection into the World.
func (c *conn) handle(e event) {
	if c.dead {
		return
	}
	if e.kind == evBad {
		c.p.s.Refuse("%s: %v", c, e.err)
		c.write(redissim.Error(e.err.Error()))
		c.end()
		return
	}
	c.command(e.args)
	if c.quit && !c.busy {
		c.end()
	}
}

// command answers one command: on the connection (what clients send on
// connecting, a transaction's framing and queueing), or in the World.
func (c *conn) command(args []string) {
	name := strings.ToUpper(args[0])
	if c.inMulti {
		switch name {
		case "EXEC":
			c.exec()
		case "DISCARD":
			c.inMulti, c.dirty, c.multi = false, false, nil
			c.write(status("OK"))
		case "MULTI":
			c.write(redissim.Error("ERR MULTI calls can not be nested"))
		case "WATCH":
			c.write(redissim.Error("ERR WATCH inside MULTI is not allowed"))
		default:
			if err := redissim.Queueable(args); err != nil {
				c.unknown(args, err)
				c.dirty = true
				c.write(err)
				return
			}
			c.multi = append(c.multi, args)
			c.write(status("QUEUED"))
		}
		return
	}
	switch name {
	case "MULTI":
		c.inMulti = true
		c.write(status("OK"))
		return
	case "EXEC":
		c.write(redissim.Error("ERR EXEC without MULTI"))
		return
	case "DISCARD":
		c.write(redissim.Error("ERR DISCARD without MULTI"))
		return
	}
	switch name {
	case "SUBSCRIBE", "UNSUBSCRIBE":
		c.pubsub(name, args)
		return
	}
	if c.subscribed() && c.resp == 2 {
		switch name {
		case "PING":
			msg := ""
			if len(args) > 1 {
				msg = args[1]
			}
			c.write([]any{"pong", msg})
			return
		case "QUIT", "RESET", "PSUBSCRIBE", "PUNSUBSCRIBE", "SSUBSCRIBE", "SUNSUBSCRIBE":
		default:
			c.write(redissim.Error(fmt.Sprintf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", strings.ToLower(args[0]))))
			return
		}
	}
	if r, ok := c.local(args); ok {
		c.write(r)
		return
	}
	if err := redissim.Queueable(args); err != nil {
		c.unknown(args, err)
		c.write(err)
		return
	}
	c.send(func(done func(redissim.Result)) func() { return c.p.wp.Send(c.port.Key, args, done) },
		func(v any) any { return shape(args, v) })
}

// unknown names a command the servers do not serve.
func (c *conn) unknown(args []string, err error) {
	if strings.HasPrefix(err.Error(), "ERR unknown command") {
		c.p.s.Unserve(strings.ToUpper(args[0]))
	}
}

// exec sends the queued transaction as one, or refuses it.
func (c *conn) exec() {
	tx, dirty := c.multi, c.dirty
	c.inMulti, c.dirty, c.multi = false, false, nil
	if dirty {
		c.write(redissim.Error("EXECABORT Transaction discarded because of previous errors."))
		return
	}
	if len(tx) == 0 {
		c.write([]any{})
		return
	}
	c.send(func(done func(redissim.Result)) func() { return c.p.wp.SendTx(c.port.Key, tx, done) },
		func(v any) any { return shapeTx(tx, v) })
}

// send puts a command into the World (a scheduling point of the
// process); its reply is written once it comes. A failure to get one (a
// reset, the server down) resets the connection, as the client would see
// it on a real server.
func (c *conn) send(post func(func(redissim.Result)) func(), shaped func(any) any) {
	c.busy = true
	c.p.flight++
	c.abandon = post(func(r redissim.Result) {
		if !c.busy {
			return
		}
		c.busy, c.abandon = false, nil
		c.p.flight--
		var se redissim.Error
		switch {
		case c.dead:
		case errors.As(r.Err, &se):
			c.write(se)
		case r.Err != nil:
			c.reset()
		default:
			c.write(shaped(r.Val))
			if c.quit {
				c.end()
			}
		}
	})
}

// subscribed says whether the connection is in RESP2's subscribed mode.
func (c *conn) subscribed() bool { return len(c.subs) > 0 || len(c.pending) > 0 }

// pubsub is SUBSCRIBE channel... (each a subscription in the World,
// confirmed once its server registered it) and UNSUBSCRIBE [channel...].
func (c *conn) pubsub(name string, args []string) {
	if c.subs == nil {
		c.subs = map[string]func(){}
	}
	if name == "UNSUBSCRIBE" {
		chans := args[1:]
		if len(chans) == 0 {
			chans = slices.Clone(c.subOrder)
			if len(chans) == 0 {
				c.write(push{"unsubscribe", nil, int64(0)})
				return
			}
		}
		for _, ch := range chans {
			if end, ok := c.subs[ch]; ok {
				end()
				delete(c.subs, ch)
				c.subOrder = slices.DeleteFunc(c.subOrder, func(x string) bool { return x == ch })
			}
			c.write(push{"unsubscribe", ch, int64(len(c.subs))})
		}
		return
	}
	if len(args) < 2 {
		c.write(arityError("subscribe"))
		return
	}
	c.busy = true
	c.p.flight++
	for _, ch := range args[1:] {
		r := &subReply{}
		c.pending = append(c.pending, r)
		if _, ok := c.subs[ch]; ok {
			r.v, r.ready = push{"subscribe", ch, int64(len(c.subs))}, true
			continue
		}
		c.subs[ch] = nil
		c.subOrder = append(c.subOrder, ch)
		n := int64(len(c.subs))
		c.subs[ch] = c.p.wp.Subscribe(c.port.Key, ch,
			func(err error) {
				if err != nil {
					c.reset()
					return
				}
				r.v, r.ready = push{"subscribe", ch, n}, true
				c.confirm()
			},
			func(msg string) {
				if !c.dead {
					c.write(push{"message", ch, msg})
				}
			},
			func(error) { c.reset() })
	}
	c.confirm()
}

// confirm writes the SUBSCRIBE's confirmations that are ready, in order;
// the connection takes its next command once all are.
func (c *conn) confirm() {
	for len(c.pending) > 0 && c.pending[0].ready {
		if !c.dead {
			c.write(c.pending[0].v)
		}
		c.pending = c.pending[1:]
	}
	if len(c.pending) == 0 && c.busy && c.abandon == nil {
		c.busy = false
		c.p.flight--
	}
}

// unsubscribeAll ends the connection's subscriptions in the World.
func (c *conn) unsubscribeAll() {
	for _, ch := range c.subOrder {
		if end := c.subs[ch]; end != nil {
			end()
		}
	}
	c.subs, c.subOrder, c.pending = nil, nil, nil
}

// lost is the client's close (or its socket's failure), taken in the
// World: a command it has there is abandoned (a blocked BLPOP is
// forgotten).
func (c *conn) lost() {
	if c.dead {
		return
	}
	c.dead = true
	c.drop()
	c.nc.Close()
}

// drop abandons the connection's command in the World, if it has one,
// and its subscriptions.
func (c *conn) drop() {
	c.unsubscribeAll()
	if c.busy {
		c.busy = false
		c.p.flight--
		if c.abandon != nil {
			c.abandon()
		}
		c.abandon = nil
	}
}

// reset ends the connection as a crashed server's: with a reset.
func (c *conn) reset() {
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.end()
}

// end closes the connection for the World and on the wire.
func (c *conn) end() {
	if c.dead {
		return
	}
	c.dead = true
	c.drop()
	c.nc.Close()
}

// describe is a command as the log shows it: a script by its SHA1, not
// its source.
func describe(args []string) string {
	if len(args) >= 2 && (strings.EqualFold(args[0], "EVAL") || strings.EqualFold(args[0], "SCRIPT") && len(args) == 3 && strings.EqualFold(args[1], "LOAD")) {
		cp := append([]string(nil), args...)
		i := 1
		if strings.EqualFold(args[0], "SCRIPT") {
			i = 2
		}
		cp[i] = "sha1:" + sha1hex(args[i])
		return strings.Join(cp, " ")
	}
	return strings.Join(args, " ")
}
