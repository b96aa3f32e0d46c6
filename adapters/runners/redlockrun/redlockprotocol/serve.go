package redlockprotocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	ref "github.com/lockprover/lockprover/model/redlock"
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
	// Priority serves the priority Redlock (init's lock
	// priority-redlock): each acquire says its priority, and the lost
	// notices are written as the reference tells them, before it
	// acknowledges the thief.
	Priority bool
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
	s := &server{o: o, Logger: leaseprotocol.Logger{Log: o.Log}, leases: map[string]ref.Lease{}, out: process.NewLines(w)}
	defer s.close()
	h := leaseprotocol.Handler{Init: s.init, Ready: func() bool { return s.rl != nil }, Op: s.op}
	return process.Server{Handle: h.Handle, Out: s.out}.Serve(r, w)
}

// lock is the reference the server serves: a Redlock, or a priority
// Redlock whose acquire is told the request's priority.
type lock interface {
	Refresh(ctx context.Context, l ref.Lease, ttl time.Duration) (ref.Lease, error)
	Release(ctx context.Context, l ref.Lease) error
	Close() error
}

// server is one process's reference: the lock init made, and the client
// it serves (Logger.Client), which its log names.
type server struct {
	leaseprotocol.Logger
	o   ServeOptions
	out *process.Lines
	key string
	rl  lock
	// acquire is rl's acquire of key for ttl, at priority prio (the
	// priority Redlock's; Redlock's ignores it).
	acquire func(ctx context.Context, key string, ttl time.Duration, prio int64) (ref.Lease, error)
	env     *clockEnv
	// leases are the grants this process made, by token, so that a
	// refresh or release names one by its token alone.
	leases map[string]ref.Lease
}

// clockEnv is the real Env, noting the lock's first reading of its clock
// in each operation (start, 0 until then). For the priority Redlock,
// whose watchers read the clock at any time from goroutines of their own,
// the operation's start is noted by opEnv instead (marked).
type clockEnv struct {
	ref.Env
	start  int64
	marked *opEnv
}

func (e *clockEnv) Now() int64 {
	t := e.Env.Now()
	if e.start == 0 && e.marked == nil {
		e.start = t
	}
	return t
}

// begin starts an operation.
func (e *clockEnv) begin() {
	e.start = 0
	if e.marked != nil {
		e.marked.start.Store(0)
	}
}

// started is the operation's start.
func (e *clockEnv) started() int64 {
	if e.marked != nil {
		return e.marked.start.Load()
	}
	return e.start
}

// opKey marks the context of a request's operation (opEnv).
type opKey struct{}

// opEnv is the priority Redlock's real PriorityEnv, noting when the
// operation (its context marked with opKey) first sends to the servers:
// after the lock read its start, so that the validity claimed from there
// is no more than the lock claims from its own start.
type opEnv struct {
	ref.PriorityEnv
	start atomic.Int64
}

func (e *opEnv) Send(ctx context.Context, timeout time.Duration, cmds []ref.Cmd) []ref.Result {
	if ctx.Value(opKey{}) != nil {
		e.start.CompareAndSwap(0, e.Now())
	}
	return e.PriorityEnv.Send(ctx, timeout, cmds)
}

func (s *server) close() {
	if s.rl != nil {
		s.rl.Close()
	}
	if s.env != nil && s.env.marked != nil {
		s.env.Close()
	}
}

// failure is an error reply of unknown outcome (not definite).
func failure(err error) map[string]any { return leaseprotocol.Failure("redis", err) }

// op answers a request after init: acquire, refresh, release.
func (s *server) op(typ string, f *process.Fields) map[string]any {
	var token string
	if typ == "refresh" || typ == "release" {
		token = leaseprotocol.Token(f)
	}
	ttl := 0
	if typ == "acquire" || typ == "refresh" {
		ttl = f.Positive("ttl_ms")
	}
	var prio int64
	if typ == "acquire" && s.o.Priority {
		f.Get("priority", &prio)
	}
	if f.Bad != nil {
		return process.Refuse("bad request", f.Bad.Error())
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), opKey{}, true), s.o.OpTimeout)
	defer cancel()
	s.env.begin()
	d := time.Duration(ttl) * time.Millisecond
	switch typ {
	case "acquire":
		return s.grant(ctx, d, prio)
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

func (s *server) grant(ctx context.Context, ttl time.Duration, prio int64) map[string]any {
	l, err := s.acquire(ctx, s.key, ttl, prio)
	switch {
	case err == nil:
		s.leases[l.Token] = l
		return s.granted(map[string]any{"type": "acquire_ok", "token": l.Token, "fence": l.Fence}, l)
	case errors.Is(err, ref.ErrHeld) && !errors.Is(err, ref.ErrLeftBehind):
		return map[string]any{"type": "acquire_fail", "reason": "held"}
	case errors.Is(err, ref.ErrStolen), errors.Is(err, ref.ErrOutwaited):
		// Taken by a higher priority while it waited for its own
		// victims, or its own key expired everywhere meanwhile: it
		// certainly holds nothing, as the in-process runner records it.
		code := "stolen"
		if errors.Is(err, ref.ErrOutwaited) {
			code = "outwaited"
		}
		s.Logf("acquire: %v", err)
		return map[string]any{"type": "error", "code": code, "text": err.Error(), "definite": true}
	}
	// Too few servers, no validity left, or keys possibly left behind:
	// they may hold the lock for a while, as a grant of unknown outcome.
	s.Logf("acquire: %v", err)
	return failure(err)
}

// granted adds a grant's claim to its reply: the validity left now and
// the time since the lock's start, in fractional milliseconds.
func (s *server) granted(m map[string]any, l ref.Lease) map[string]any {
	now := s.env.Env.Now()
	m["validity_ms"] = max(float64(l.ValidUntil-now), 0) / float64(time.Millisecond)
	m["elapsed_ms"] = float64(now-s.env.started()) / float64(time.Millisecond)
	return m
}

// changeFailed is the reply to a refresh or release that failed: a lease
// expired or taken by a higher priority (stolen) is not held.
func (s *server) changeFailed(typ, token string, err error) map[string]any {
	if errors.Is(err, ref.ErrExpired) || errors.Is(err, ref.ErrStolen) {
		delete(s.leases, token)
		return map[string]any{"type": typ + "_fail", "reason": "expired"}
	}
	s.Logf("%s: outcome unknown: %v", typ, err)
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
	f.Get("client", &s.Client)
	f.Get("lock", &lock)
	f.Get("name", &key)
	f.Get("addrs", &addrs)
	ttl := time.Duration(f.Positive("ttl_ms")) * time.Millisecond
	limit := 1
	if _, ok := f.Req["limit"]; ok {
		limit = f.Positive("limit")
	}
	switch {
	case f.Bad != nil:
		return process.Refuse("bad request", f.Bad.Error())
	case limit > 1:
		// The reference is a mutex: a semaphore's plan is not its to serve.
		return process.Refuse("unsupported", fmt.Sprintf("limit %d: the reference is a mutex", limit))
	case len(key) > 255 || key == "":
		return process.Refuse("bad request", fmt.Sprintf("name: a key of %d bytes: must be 1 to 255", len(key)))
	case len(addrs) == 0:
		return process.Refuse("bad request", `field "addrs" is empty: want the servers' host:port`)
	case lock != s.kind():
		return process.Refuse("unsupported", fmt.Sprintf("lock kind %q: this server serves %s", lock, s.kind()))
	}
	// Each server's bound on a round, as the prover gives the reference
	// it runs itself on real servers: a machine under load may take tens
	// of milliseconds to answer.
	o := ref.Options{Defects: s.o.Defects, Timeout: max(ttl/2, 100*time.Millisecond)}
	if s.o.Priority {
		return s.initPriority(key, addrs, o)
	}
	env := &clockEnv{Env: ref.RedisEnv(addrs)}
	rl, err := ref.NewOn(env, o)
	if err != nil {
		env.Close()
		return process.Refuse("unsupported", err.Error())
	}
	s.key, s.rl, s.env = key, rl, env
	s.acquire = func(ctx context.Context, key string, ttl time.Duration, _ int64) (ref.Lease, error) {
		return rl.Acquire(ctx, key, ttl)
	}
	return map[string]any{"type": "init_ok"}
}

// kind is the lock kind the server serves.
func (s *server) kind() string {
	if s.o.Priority {
		return redlockrun.PriorityKind
	}
	return redlockrun.Kind
}

// initPriority makes the priority lock on addrs, whose lost notices the
// server writes as the lock tells them: before it acknowledges the thief.
func (s *server) initPriority(key string, addrs []string, o ref.Options) map[string]any {
	o.OnLost = func(x ref.Lost) {
		if err := s.out.Write(map[string]any{"type": "lost", "token": x.Token, "thief": x.Thief}); err != nil {
			s.Logf("lost notice of %s: %v", x.Token, err)
		}
	}
	env := &opEnv{PriorityEnv: ref.RedisPriorityEnv(addrs)}
	pl, err := ref.NewPriorityOn(env, o)
	if err != nil {
		env.Close()
		return process.Refuse("unsupported", err.Error())
	}
	s.key, s.rl, s.env = key, pl, &clockEnv{Env: ref.RedisEnv(nil), marked: env}
	s.acquire = pl.Acquire
	return map[string]any{"type": "init_ok"}
}
