package redlockprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/families/redlock"
	ref "github.com/lockprover/lockprover/redlock"
)

// ServeOptions are Serve's choices.
type ServeOptions struct {
	// Defects are the reference's deliberate bugs, to serve a mutant; the
	// zero value serves the reference.
	Defects ref.Defects
	// OpTimeout bounds each operation; 0 means 20 s (under lockprover's
	// 30 s, so that a stuck operation is answered as an error, not a
	// killed process).
	OpTimeout time.Duration
	// Log, if set, receives one line per failed operation (stderr, say).
	Log io.Writer
}

// Serve speaks the protocol for Redlock (docs/protocol.md, "Redlock") as
// an implementation: it reads requests from r and answers on w until r
// ends, serving the reference, package redlock, on the servers init
// names. It is what `lockprover serve-reference --kind redlock` runs.
// Each grant says its validity (validity_ms) and the time the operation
// took until then (elapsed_ms), from the lock's first reading of its
// clock.
func Serve(r io.Reader, w io.Writer, o ServeOptions) error {
	if o.OpTimeout <= 0 {
		o.OpTimeout = 20 * time.Second
	}
	s := &server{o: o, leases: map[string]ref.Lease{}}
	defer s.close()
	return process.Server{Handle: s.handle}.Serve(r, w)
}

type server struct {
	o      ServeOptions
	client string
	key    string
	rl     *ref.Redlock
	env    *clockEnv
	// leases are the grants this process made, by token, so that a
	// refresh or release names one by its token alone.
	leases map[string]ref.Lease
}

// clockEnv is the real Env, noting the lock's first reading of its clock
// in each operation (start, 0 until then).
type clockEnv struct {
	ref.Env
	start int64
}

func (e *clockEnv) Now() int64 {
	t := e.Env.Now()
	if e.start == 0 {
		e.start = t
	}
	return t
}

func (s *server) close() {
	if s.rl != nil {
		s.rl.Close()
	}
}

func (s *server) logf(format string, args ...any) {
	if s.o.Log != nil {
		fmt.Fprintf(s.o.Log, "%s: %s\n", s.client, fmt.Sprintf(format, args...))
	}
}

// failure is an error reply of unknown outcome (not definite).
func failure(err error) map[string]any {
	return map[string]any{"type": "error", "code": "redis", "text": err.Error()}
}

func (s *server) handle(typ string, req map[string]json.RawMessage) map[string]any {
	f := &process.Fields{Req: req}
	if typ == "init" {
		return s.init(f)
	}
	if s.rl == nil {
		return process.Refuse("not initialised", "the first request must be init")
	}
	var token string
	if typ == "refresh" || typ == "release" {
		f.Get("token", &token)
		if f.Bad == nil && token == "" {
			f.Bad = errors.New(`field "token" is empty`)
		}
	}
	ttl := 0
	if typ == "acquire" || typ == "refresh" {
		ttl = f.Positive("ttl_ms")
	}
	if f.Bad != nil {
		return process.Refuse("bad request", f.Bad.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
	defer cancel()
	s.env.start = 0
	d := time.Duration(ttl) * time.Millisecond
	switch typ {
	case "acquire":
		return s.acquire(ctx, d)
	case "refresh":
		l, err := s.rl.Refresh(ctx, s.lease(token), d)
		if err == nil {
			s.leases[token] = l
			return s.granted(map[string]any{"type": "refresh_ok"}, l)
		}
		return s.changeFailed(typ, token, err)
	case "release":
		err := s.rl.Release(ctx, s.lease(token))
		delete(s.leases, token)
		if err == nil {
			return map[string]any{"type": "release_ok"}
		}
		return s.changeFailed(typ, token, err)
	}
	return nil // unsupported
}

// lease is the grant token names: one this process made, or (a token it
// never granted) a lease of that token on the key, which no server holds.
func (s *server) lease(token string) ref.Lease {
	if l, ok := s.leases[token]; ok {
		return l
	}
	return ref.Lease{Key: s.key, Token: token}
}

func (s *server) acquire(ctx context.Context, ttl time.Duration) map[string]any {
	l, err := s.rl.Acquire(ctx, s.key, ttl)
	switch {
	case err == nil:
		s.leases[l.Token] = l
		return s.granted(map[string]any{"type": "acquire_ok", "token": l.Token, "fence": l.Fence}, l)
	case errors.Is(err, ref.ErrHeld) && !errors.Is(err, ref.ErrLeftBehind):
		return map[string]any{"type": "acquire_fail", "reason": "held"}
	}
	// Too few servers, no validity left, or keys possibly left behind:
	// they may hold the lock for a while, as a grant of unknown outcome.
	s.logf("acquire: %v", err)
	return failure(err)
}

// granted adds a grant's claim to its reply: the validity left now and
// the time since the lock's start, in fractional milliseconds.
func (s *server) granted(m map[string]any, l ref.Lease) map[string]any {
	now := s.env.Env.Now()
	m["validity_ms"] = max(float64(l.ValidUntil-now), 0) / float64(time.Millisecond)
	m["elapsed_ms"] = float64(now-s.env.start) / float64(time.Millisecond)
	return m
}

func (s *server) changeFailed(typ, token string, err error) map[string]any {
	if errors.Is(err, ref.ErrExpired) {
		delete(s.leases, token)
		return map[string]any{"type": typ + "_fail", "reason": "expired"}
	}
	s.logf("%s: outcome unknown: %v", typ, err)
	return failure(err)
}

// init makes the lock on init's servers. A request this server can never
// serve is a definite error.
func (s *server) init(f *process.Fields) map[string]any {
	if s.rl != nil {
		return process.Refuse("bad request", "init was already received")
	}
	var lock, key string
	var addrs []string
	f.Get("client", &s.client)
	f.Get("lock", &lock)
	f.Get("name", &key)
	f.Get("addrs", &addrs)
	ttl := time.Duration(f.Positive("ttl_ms")) * time.Millisecond
	switch {
	case f.Bad != nil:
		return process.Refuse("bad request", f.Bad.Error())
	case len(key) > 255 || key == "":
		return process.Refuse("bad request", fmt.Sprintf("name: a key of %d bytes: must be 1 to 255", len(key)))
	case len(addrs) == 0:
		return process.Refuse("bad request", `field "addrs" is empty: want the servers' host:port`)
	case lock != redlock.Kind:
		return process.Refuse("unsupported", fmt.Sprintf("lock kind %q: this server serves %s", lock, redlock.Kind))
	}
	env := &clockEnv{Env: ref.RedisEnv(addrs)}
	// Each server's bound on a round, as the prover gives the reference
	// it runs itself on real servers: a machine under load may take tens
	// of milliseconds to answer.
	rl, err := ref.NewOn(env, ref.Options{Defects: s.o.Defects, Timeout: max(ttl/2, 100*time.Millisecond)})
	if err != nil {
		env.Close()
		return process.Refuse("unsupported", err.Error())
	}
	s.key, s.rl, s.env = key, rl, env
	return map[string]any{"type": "init_ok"}
}
