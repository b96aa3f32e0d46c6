package consulserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/consulsim"
)

// A conn is one TCP connection of a process to the agent: its requests
// read by the HTTP server's goroutine (into events), answered in the
// World (by the coroutine, and by the agent's step that replies).
type conn struct {
	p      *Process
	nc     net.Conn
	id     int
	downs  int // the agent's downs when it was made
	closes int // the process's connections closed (force-close) when it was made

	// The World's own: its request in the World (busy; blocking, a
	// blocking query's; and how to abandon it), and whether it is over
	// for the World (dead).
	busy     bool
	blocking bool
	abandon  func()
	dead     bool
}

// A request is one HTTP request as the coroutine takes it, and where its
// answer goes.
type request struct {
	method, path string
	query        url.Values
	body         []byte
	fingerprint  string
	// logged is the log's step a replay matched it with ("" when
	// recording): its ?wait is the one the World waits.
	logged string
	reply  chan response // buffered: the answer, once
}

// A response is what the handler writes, or a reset of the connection.
type response struct {
	status int
	header map[string]string
	body   []byte
	reset  bool
}

// answer hands the handler its response (once).
func (r *request) answer(resp response) {
	select {
	case r.reply <- resp:
	default:
	}
}

type connKey struct{}

// connContext registers a connection the port accepted.
func (p *Process) connContext(ctx context.Context, nc net.Conn) context.Context {
	c := &conn{p: p, nc: nc, id: p.s.nextID()}
	p.mu.Lock()
	c.downs, c.closes = p.downs, p.wp.Connection()
	p.conns[nc] = c
	p.mu.Unlock()
	return context.WithValue(ctx, connKey{}, c)
}

// connState notes a connection's end: the coroutine takes it.
func (p *Process) connState(nc net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	p.mu.Lock()
	c := p.conns[nc]
	p.mu.Unlock()
	if c != nil {
		p.put(event{c: c, kind: evGone})
	}
}

// handle is the HTTP server's: the request goes to the coroutine, and its
// answer back to the client (or the connection resets).
func (p *Process) handle(w http.ResponseWriter, hr *http.Request) {
	c, _ := hr.Context().Value(connKey{}).(*conn)
	body, err := io.ReadAll(hr.Body)
	if c == nil || err != nil {
		return
	}
	req := &request{method: hr.Method, path: hr.URL.Path, query: hr.URL.Query(), body: body, reply: make(chan response, 1)}
	req.fingerprint = fingerprint(req)
	p.put(event{c: c, kind: evRequest, req: req})
	var resp response
	select {
	case resp = <-req.reply:
	case <-hr.Context().Done():
		p.put(event{c: c, kind: evGone})
		return
	case <-p.gone:
		return
	}
	if resp.reset {
		c.resetSocket()
		return
	}
	for k, v := range resp.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.status)
	w.Write(resp.body)
}

// fingerprint is a request as the log names it: its method, path and
// parameters (sorted), not its body.
func fingerprint(r *request) string {
	s := r.method + " " + r.path
	if q := r.query.Encode(); q != "" {
		s += "?" + q
	}
	return s
}

// take takes one request of the connection into the World: answered on
// the connection (what the agent answers without its state: a bad
// request, a path not served), or sent to the agent.
func (c *conn) take(req *request) {
	if c.dead {
		req.answer(response{reset: true})
		return
	}
	ar, local := c.p.s.read(req)
	if local != nil {
		req.answer(*local)
		return
	}
	if req.logged != "" {
		ar.Wait = waitOf(req.logged, ar.Wait)
	}
	c.busy, c.blocking = true, ar.Index > 0
	if !c.blocking {
		c.p.flight++
	}
	c.abandon = c.p.wp.Send(ar, func(rep consulsim.APIReply, err error) {
		if !c.busy {
			return
		}
		c.done()
		switch {
		case c.dead:
		case err != nil:
			req.answer(response{reset: true})
			c.dead = true
		default:
			req.answer(c.p.s.render(req, ar, rep))
		}
	})
}

// done ends the connection's request in the World.
func (c *conn) done() {
	if !c.blocking {
		c.p.flight--
	}
	c.busy, c.blocking, c.abandon = false, false, nil
}

// lost is the client's close (or its socket's failure), taken in the
// World: a request it has there is abandoned (a blocking query is
// forgotten).
func (c *conn) lost() {
	if c.dead {
		return
	}
	c.dead = true
	c.drop()
	c.nc.Close()
}

// drop abandons the connection's request in the World, if it has one.
func (c *conn) drop() {
	if c.busy {
		abandon := c.abandon
		c.done()
		if abandon != nil {
			abandon()
		}
	}
}

// reset ends the connection as a crashed agent's: with a reset.
func (c *conn) reset() {
	if c.dead {
		return
	}
	c.dead = true
	c.drop()
	c.resetSocket()
}

// resetSocket closes the socket with a reset (RST, not FIN).
func (c *conn) resetSocket() {
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.nc.Close()
}

// waitOf is the ?wait of the logged request fp, or def if it has none or
// it cannot be read.
func waitOf(fp string, def time.Duration) time.Duration {
	i := strings.IndexByte(fp, '?')
	if i < 0 {
		return def
	}
	q, err := url.ParseQuery(fp[i+1:])
	if err != nil || q.Get("wait") == "" {
		return def
	}
	d, err := parseWait(q.Get("wait"))
	if err != nil {
		return def
	}
	return d
}

// matches says whether got, a request's fingerprint, is want, the log's,
// but for the value of its ?wait (which a client may draw from its own
// clock).
func matches(want, got string) bool {
	return want == got || withoutWait(want) == withoutWait(got)
}

// withoutWait is a fingerprint with its ?wait's value left out.
func withoutWait(fp string) string {
	i := strings.IndexByte(fp, '?')
	if i < 0 {
		return fp
	}
	q, err := url.ParseQuery(fp[i+1:])
	if err != nil || !q.Has("wait") {
		return fp
	}
	q.Set("wait", "*")
	return fp[:i+1] + q.Encode()
}
