// Package protoloop serves lockprover's process protocol for Consul's
// semaphore (docs/protocol.md, "Consul's semaphore") over stdin and
// stdout, for an adapter that wraps a library: it reads one request a
// line, checks its fields, calls the library's Lock under a deadline of
// its own, and writes the reply. The adapters of this module (consulapi,
// etcdmutex) say only what their library does.
package protoloop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Kind is the lock kind these adapters serve.
const Kind = "consul-semaphore"

// OpTimeout bounds each operation (lockprover waits 30 s): a library call
// still running then is answered as an error of unknown outcome, and
// left to finish in the background, as a caller that gives up on it
// would.
const OpTimeout = 20 * time.Second

// Init is what an init request says.
type Init struct {
	Client  string
	Name    string // the semaphore's prefix
	Backend string // "consul" or "etcd"
	Addr    string // host:port of the process's own proxy to the server
	Limit   int
	TTL     time.Duration
}

// Grant is an acquire's success.
type Grant struct {
	Token string  // the grant's session ID (Consul) or lease ID as %016x (etcd)
	Fence *uint64 // nil where the library gives none
	// TTL is the TTL granted, 0 if the one asked for; said in the reply
	// where it differs from that.
	TTL time.Duration
}

// Lock is one library's semaphore, as one lockprover client uses it.
// Each method answers one of the errors below, or another error, which is
// an unknown outcome.
type Lock interface {
	Acquire(ctx context.Context, limit int, ttl time.Duration) (Grant, error)
	// Refresh renews the lease of token; ttl is the TTL granted, 0 if as
	// asked.
	Refresh(ctx context.Context, token string) (ttl time.Duration, err error)
	Verify(ctx context.Context, token string) (held bool, err error)
	Release(ctx context.Context, token string) error
}

var (
	// ErrFull: the acquire took no slot, every slot being held (or the
	// library could not tell why it took none: its own "could not
	// acquire").
	ErrFull = errors.New("full")
	// ErrExpired: the lease is not held (refresh, release).
	ErrExpired = errors.New("expired")
)

// Definite is a certain failure of an acquire: it took no slot.
type Definite struct {
	Code string // "mismatch", "unsupported", or the library's
	Err  error
}

func (d *Definite) Error() string { return d.Code + ": " + d.Err.Error() }
func (d *Definite) Unwrap() error { return d.Err }

// Serve answers the requests of in on out until in ends. open makes the
// Lock from init (a *Definite error refuses init).
func Serve(in io.Reader, out io.Writer, open func(Init) (Lock, error)) error {
	s := &server{open: open, out: bufio.NewWriter(out)}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := s.serve(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

type server struct {
	open   func(Init) (Lock, error)
	out    *bufio.Writer
	client string
	lock   Lock
}

// request is every field a request of this kind may carry.
type request struct {
	ID      *int64  `json:"id"`
	Type    string  `json:"type"`
	Client  string  `json:"client"`
	Lock    string  `json:"lock"`
	Name    string  `json:"name"`
	Backend string  `json:"backend"`
	Addr    string  `json:"addr"`
	Limit   *int    `json:"limit"`
	TTLMs   *int64  `json:"ttl_ms"`
	Token   *string `json:"token"`
}

type reply map[string]any

func refuse(code, format string, a ...any) reply {
	return reply{"type": "error", "code": code, "text": fmt.Sprintf(format, a...), "definite": true}
}

func (s *server) serve(line []byte) error {
	var req request
	if err := json.Unmarshal(line, &req); err != nil || req.ID == nil {
		fmt.Fprintf(os.Stderr, "%s: a request that is not a JSON object with an integer id: %s\n", s.client, line)
		return nil
	}
	r := s.handle(&req)
	r["id"] = *req.ID
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the reply to request %d: %w", *req.ID, err)
	}
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		return err
	}
	return s.out.Flush()
}

func (s *server) handle(req *request) reply {
	if req.Type == "init" {
		return s.init(req)
	}
	switch req.Type {
	case "acquire", "refresh", "verify", "release":
	default:
		return refuse("unsupported", "request type %q", req.Type)
	}
	if s.lock == nil {
		return refuse("bad request", "the first request must be init")
	}
	if req.Type == "acquire" {
		if req.Limit == nil || *req.Limit < 1 || req.TTLMs == nil || *req.TTLMs < 1 {
			return refuse("bad request", `acquire needs "limit" and "ttl_ms", positive integers`)
		}
		return s.acquire(*req.Limit, time.Duration(*req.TTLMs)*time.Millisecond)
	}
	if req.Token == nil || *req.Token == "" {
		return refuse("bad request", `%s needs "token", a non-empty string`, req.Type)
	}
	return s.leaseOp(req.Type, *req.Token)
}

func (s *server) init(req *request) reply {
	if s.lock != nil {
		return refuse("bad request", "init was already received")
	}
	s.client = req.Client
	switch {
	case req.Lock != Kind:
		return refuse("unsupported", "lock kind %q: this adapter serves %s", req.Lock, Kind)
	case req.Name == "" || req.Addr == "" || req.Backend == "":
		return refuse("bad request", `init needs "name", "backend" and "addr"`)
	case req.Limit == nil || *req.Limit < 1 || req.TTLMs == nil || *req.TTLMs < 1:
		return refuse("bad request", `init needs "limit" and "ttl_ms", positive integers`)
	}
	l, err := s.open(Init{Client: req.Client, Name: req.Name, Backend: req.Backend, Addr: req.Addr,
		Limit: *req.Limit, TTL: time.Duration(*req.TTLMs) * time.Millisecond})
	if d := (*Definite)(nil); errors.As(err, &d) {
		return refuse(d.Code, "%v", d.Err)
	}
	if err != nil {
		return reply{"type": "error", "code": "library", "text": err.Error()}
	}
	s.lock = l
	return reply{"type": "init_ok"}
}

// call runs f under OpTimeout; a call still running then is left to
// finish in the background, and answered as a timeout.
func call[T any](f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(OpTimeout + time.Second):
		var zero T
		return zero, fmt.Errorf("no answer from the library within %v", OpTimeout)
	}
}

func (s *server) acquire(limit int, ttl time.Duration) reply {
	g, err := call(func(ctx context.Context) (Grant, error) { return s.lock.Acquire(ctx, limit, ttl) })
	if d := (*Definite)(nil); errors.As(err, &d) {
		return refuse(d.Code, "%v", d.Err)
	}
	switch {
	case errors.Is(err, ErrFull):
		return reply{"type": "acquire_fail", "reason": "full"}
	case err != nil:
		return s.unknown("acquire", err)
	}
	r := reply{"type": "acquire_ok", "token": g.Token}
	if g.Fence != nil {
		r["fence"] = *g.Fence
	}
	if g.TTL > 0 && g.TTL != ttl {
		r["ttl_ms"] = g.TTL.Milliseconds()
	}
	return r
}

func (s *server) leaseOp(typ, token string) reply {
	switch typ {
	case "refresh":
		ttl, err := call(func(ctx context.Context) (time.Duration, error) { return s.lock.Refresh(ctx, token) })
		switch {
		case errors.Is(err, ErrExpired):
			return reply{"type": "refresh_fail", "reason": "expired"}
		case err != nil:
			return s.unknown(typ, err)
		}
		r := reply{"type": "refresh_ok"}
		if ttl > 0 {
			r["ttl_ms"] = ttl.Milliseconds()
		}
		return r
	case "verify":
		held, err := call(func(ctx context.Context) (bool, error) { return s.lock.Verify(ctx, token) })
		if err != nil {
			return s.unknown(typ, err)
		}
		return reply{"type": "verify_ok", "held": held}
	}
	_, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, s.lock.Release(ctx, token) })
	switch {
	case errors.Is(err, ErrExpired):
		return reply{"type": "release_fail", "reason": "expired"}
	case err != nil:
		return s.unknown(typ, err)
	}
	return reply{"type": "release_ok"}
}

// unknown is an error of unknown outcome (not definite), logged on stderr.
func (s *server) unknown(op string, err error) reply {
	fmt.Fprintf(os.Stderr, "%s: %s: %v\n", s.client, op, err)
	return reply{"type": "error", "code": "library", "text": err.Error()}
}
