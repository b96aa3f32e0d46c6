package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/url"
	"time"
)

// How long a connection attempt may take (TCP connect and AMQP
// handshake), well within lockprover's 30 s per operation; how long init
// keeps trying to connect (lockprover gives init 10 s), and the pause
// between its attempts.
const (
	connectTimeout = 5 * time.Second
	initPatience   = 6 * time.Second
	retryPause     = 200 * time.Millisecond
)

// acquireFailReasons are the reasons an acquire_fail may carry; other
// definite failures are errors.
var acquireFailReasons = map[string]bool{"full": true, "absent": true, "unavailable": true, "contended": true, "held": true}

// A request is one line of stdin, its fields undecoded.
type request map[string]json.RawMessage

// A reply is one line of stdout.
type reply map[string]any

func (r request) typ() string {
	var t string
	json.Unmarshal(r["type"], &t)
	return t
}

// badRequest is a malformed request: answered with a definite error.
type badRequest struct{ text string }

func (e *badRequest) Error() string { return e.text }

// intField is r's field as an integer (of at least min, if given).
func (r request) intField(field string, min ...int) (int, error) {
	var n int
	if err := json.Unmarshal(r[field], &n); err != nil || r[field] == nil {
		return 0, &badRequest{fmt.Sprintf("%s needs an integer %q", r.typ(), field)}
	}
	if len(min) > 0 && n < min[0] {
		return 0, &badRequest{fmt.Sprintf("%s needs an integer %q >= %d", r.typ(), field, min[0])}
	}
	return n, nil
}

// initRequest is what init says.
type initRequest struct {
	Client, Lock, Name, URL string
	HeartbeatMs             int
	// URLs are every node's, on a simulated cluster: URL's first, then
	// the other nodes', tried in order when URL's node refuses.
	URLs []string
}

// server is one lockprover process: a client (or admin) of one lock.
type server struct {
	defect string       // the seeded defect, or ""
	init   *initRequest // nil until init
	client *Client      // the current client, once connected
	exit   int          // the exit status once the server must stop after a reply, else -1
}

// handle answers one request with one reply. An operation that lost the
// connection connects again before it answers, so that the connection is
// not counted against the next operation; a verify does not, since
// lockprover judges what a verify sends: the next operation that needs
// the broker connects.
func (s *server) handle(req request) reply {
	r := s.answer(req)
	if req.typ() != "verify" {
		s.recover()
	}
	return r
}

func (s *server) answer(req request) reply {
	typ := req.typ()
	var r reply
	var err error
	switch h := s.handlers()[typ]; {
	case typ == "init":
		r, err = s.start(req)
	case s.init == nil:
		err = &badRequest{"the first request must be init"}
	case h == nil:
		r = reply{"type": "error", "code": "unsupported", "text": fmt.Sprintf("unsupported request type %q", typ), "definite": true}
	default:
		r, err = h(req)
	}
	if err != nil {
		r = failure(typ, err)
	}
	r["id"] = req["id"]
	return r
}

// failure is the reply to a request of type typ that failed with err.
func failure(typ string, err error) reply {
	var bad *badRequest
	var f *Failed
	switch {
	case errors.As(err, &bad):
		return reply{"type": "error", "code": "bad request", "text": bad.text, "definite": true}
	case errors.As(err, &f) && typ == "acquire" && acquireFailReasons[f.Reason]:
		return reply{"type": "acquire_fail", "reason": f.Reason}
	case errors.As(err, &f):
		return reply{"type": "error", "code": f.Reason, "text": f.Text, "definite": true}
	}
	log.Printf("%s: outcome unknown: %v", typ, err)
	return reply{"type": "error", "code": "broker", "text": err.Error()}
}

func (s *server) handlers() map[string]func(request) (reply, error) {
	if s.init == nil {
		return nil
	}
	if s.init.Lock == "mutex" {
		return map[string]func(request) (reply, error){"acquire": s.mutexAcquire, "verify": s.mutexVerify, "release": s.mutexRelease}
	}
	return map[string]func(request) (reply, error){
		"acquire": s.acquire, "verify": s.verify, "release": s.release,
		"create": s.create, "change": s.change, "count": s.count, "wait": s.wait, "destroy": s.destroy,
	}
}

// start answers init: it connects, trying again for a while if a fault
// strikes during the handshake, then answers init_ok anyway and leaves it
// to the first operation that needs the broker.
func (s *server) start(req request) (reply, error) {
	if s.init != nil {
		return nil, &badRequest{"init was already received"}
	}
	in := &initRequest{}
	for field, v := range map[string]*string{"client": &in.Client, "name": &in.Name, "url": &in.URL, "lock": &in.Lock} {
		if json.Unmarshal(req[field], v) != nil || req[field] == nil {
			s.exit = 1
			return nil, &badRequest{fmt.Sprintf("init needs a string %q", field)}
		}
	}
	if in.Lock != "semaphore" && in.Lock != "mutex" {
		s.exit = 1
		return nil, &badRequest{fmt.Sprintf("unknown lock kind %q", in.Lock)}
	}
	json.Unmarshal(req["heartbeat_ms"], &in.HeartbeatMs) // absent (or not a number): 0, none proposed
	json.Unmarshal(req["urls"], &in.URLs)                // absent: URL alone
	s.init = in
	log.SetPrefix(in.Client + " ")
	deadline := time.Now().Add(initPatience)
	for s.client == nil {
		c, err := s.connect(min(connectTimeout, max(time.Until(deadline), time.Second)))
		if err == nil {
			s.client = c
			break
		}
		log.Printf("init: %v", err)
		if time.Now().Add(retryPause).After(deadline) {
			break
		}
		time.Sleep(retryPause)
	}
	if s.defect != "" {
		// A defect is its own: as serve-reference's mutants, declare nothing.
		return reply{"type": "init_ok"}, nil
	}
	// amqp091-go ends a socket without a connection.close only when its
	// heartbeat read deadline passes; this server closes politely otherwise.
	return reply{"type": "init_ok", "abrupt_close": "heartbeat"}, nil
}

func (s *server) connect(timeout time.Duration) (*Client, error) {
	hb := time.Duration(max(s.init.HeartbeatMs, 0)) * time.Millisecond
	log.Printf("connecting (heartbeat %v, 0s: the broker's)", hb)
	urls := s.init.URLs
	if len(urls) == 0 {
		urls = []string{s.init.URL}
	}
	var err error
	for _, u := range urls {
		var c *Client
		if c, err = dial(u, hb, fmt.Sprintf("lockprover %s %s", s.init.Client, s.init.Name), timeout); err == nil {
			return c, nil
		}
		log.Printf("%s: %v", redact(u), err)
	}
	return nil, err // the last node's
}

// redact is u without its password.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "a URL"
}

// connected is the client, connecting first if it has no connection.
func (s *server) connected() (*Client, error) {
	if s.client != nil && !s.client.open() {
		s.client = nil
	}
	if s.client == nil {
		c, err := s.connect(connectTimeout)
		if err != nil {
			return nil, err
		}
		s.client = c
	}
	return s.client, nil
}

// recover connects again after a connection loss, so that the next
// operation finds a connection. One attempt per loss: if it fails, the
// next operation that needs the broker tries again.
func (s *server) recover() {
	if s.client == nil || s.client.open() {
		return
	}
	if _, err := s.connected(); err != nil {
		log.Printf("connecting again: %v", err)
	}
}

func (s *server) close() {
	if s.client != nil {
		s.client.close()
	}
}

// holder is the client for verify and release: they work on the current
// client even when its connection is gone (a new connection would hold
// nothing anyway). Not held if it never connected.
func (s *server) holder() (*Client, error) {
	if s.client == nil {
		return nil, &Failed{"not held", "never connected: nothing is held"}
	}
	return s.client, nil
}
