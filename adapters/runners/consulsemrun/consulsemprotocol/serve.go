package consulsemprotocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/model/consulsem"
)

// ServeOptions are Serve's choices.
type ServeOptions struct {
	// Options are the reference's (its correct variants, a mutant's
	// Defects); the zero value serves the recommended semaphore.
	// LockDelay is not read: LockDelay below asks for one.
	Options consulsem.Options
	// LockDelay (Consul) creates the sessions with a lock-delay of the
	// TTL init says, as prove --options lock-delay does.
	LockDelay bool
	// OpTimeout bounds each operation; 0 means the backend's expiry
	// factor plus one, times init's TTL, plus a second (the bound the
	// prover gives the reference it runs itself), at most 20 s (under
	// lockprover's 30 s, so that a stuck operation is answered as an
	// error, not a killed process).
	OpTimeout time.Duration
	// Log, if set, receives one line per failed operation (stderr, say).
	Log io.Writer
}

// maxOpTimeout is the longest the served reference lets an operation take.
const maxOpTimeout = 20 * time.Second

// Serve speaks the protocol for Consul's semaphore (docs/protocol.md,
// "Consul's semaphore") as an implementation: it reads requests from r
// and answers on w until r ends, serving the reference, package
// consulsem, on the Consul agent or etcd init names. It is what
// `lockprover serve-reference --kind consul-semaphore` runs. Each grant
// says its fence (the server's index) and the TTL the server granted.
func Serve(r io.Reader, w io.Writer, o ServeOptions) error {
	s := &server{o: o, Logger: leaseprotocol.Logger{Log: o.Log}}
	defer s.close()
	h := leaseprotocol.Handler{Init: s.init, Ready: func() bool { return s.sem != nil }, Op: s.op}
	return process.Server{Handle: h.Handle}.Serve(r, w)
}

// server is one process's reference: the semaphore init made, and the
// client it serves (Logger.Client), which its log names.
type server struct {
	leaseprotocol.Logger
	o       ServeOptions
	prefix  string
	timeout time.Duration
	sem     *consulsem.Semaphore
	etcd    *clientv3.Client // the etcd client the semaphore runs on, if any
}

func (s *server) close() {
	if s.sem != nil {
		s.sem.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
}

// failure is an error reply of unknown outcome (not definite).
func failure(err error) map[string]any { return leaseprotocol.Failure("server", err) }

// op answers a request after init: acquire, refresh, verify, release.
func (s *server) op(typ string, f *process.Fields) map[string]any {
	var token string
	limit, ttl := 0, 0
	switch typ {
	case "acquire":
		limit, ttl = f.Positive("limit"), f.Positive("ttl_ms")
	case "refresh", "verify", "release":
		token = leaseprotocol.Token(f)
	default:
		return nil // unsupported
	}
	if f.Bad != nil {
		return process.Refuse("bad request", f.Bad.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	switch typ {
	case "acquire":
		return s.acquire(ctx, limit, time.Duration(ttl)*time.Millisecond)
	case "verify":
		held, err := s.sem.Verify(ctx, s.prefix, token)
		if err != nil {
			s.Logf("verify: %v", err)
			return failure(err)
		}
		return map[string]any{"type": "verify_ok", "held": held}
	case "refresh":
		return s.changed(typ, s.sem.Refresh(ctx, s.prefix, token))
	}
	return s.changed(typ, s.sem.Release(ctx, s.prefix, token))
}

// acquire answers an acquire: the reference's errors but ErrFull and
// ErrUnknownOutcome certainly took no slot (definite).
func (s *server) acquire(ctx context.Context, limit int, ttl time.Duration) map[string]any {
	l, err := s.sem.Acquire(ctx, s.prefix, limit, ttl)
	switch {
	case err == nil:
		m := map[string]any{"type": "acquire_ok", "token": l.Token, "fence": l.Fence}
		if l.TTL != ttl {
			m["ttl_ms"] = l.TTL.Milliseconds()
		}
		return m
	case errors.Is(err, consulsem.ErrFull):
		return map[string]any{"type": "acquire_fail", "reason": "full"}
	case errors.Is(err, consulsem.ErrUnknownOutcome):
		s.Logf("acquire: outcome unknown: %v", err)
		return failure(err)
	case errors.Is(err, consulsem.ErrMismatch):
		return process.Refuse("mismatch", err.Error())
	}
	s.Logf("acquire: not granted: %v", err)
	return process.Refuse("not-granted", err.Error())
}

// changed answers a refresh or release (typ) that ended with err.
func (s *server) changed(typ string, err error) map[string]any {
	switch {
	case err == nil:
		return map[string]any{"type": typ + "_ok"}
	case errors.Is(err, consulsem.ErrExpired):
		return map[string]any{"type": typ + "_fail", "reason": "expired"}
	}
	s.Logf("%s: outcome unknown: %v", typ, err)
	return failure(err)
}

// init makes the semaphore on init's server. A request this server can
// never serve is a definite error.
func (s *server) init(f *process.Fields) map[string]any {
	if s.sem != nil {
		return process.Refuse("bad request", "init was already received")
	}
	var lock, prefix, backend, addr string
	f.Get("client", &s.Client)
	f.Get("lock", &lock)
	f.Get("name", &prefix)
	f.Get("backend", &backend)
	f.Get("addr", &addr)
	f.Positive("limit")
	ttl := time.Duration(f.Positive("ttl_ms")) * time.Millisecond
	switch {
	case f.Bad != nil:
		return process.Refuse("bad request", f.Bad.Error())
	case lock != consulsemrun.Kind:
		return process.Refuse("unsupported", fmt.Sprintf("lock kind %q: this server serves %s", lock, consulsemrun.Kind))
	case len(prefix) > 100 || !prefixRE.MatchString(prefix):
		return process.Refuse("bad request", fmt.Sprintf("name %q: want 1 to 100 bytes of letters, digits, '-', '_', '.' and '/' (not first or last)", prefix))
	case addr == "":
		return process.Refuse("bad request", `field "addr" is empty: want the server's host:port`)
	}
	o := s.o.Options
	if s.o.LockDelay {
		o.LockDelay = ttl
	}
	var err error
	switch backend {
	case consulsemrun.Consul:
		s.sem, err = consulsem.Consul(addr, nil, o)
	case consulsemrun.Etcd:
		s.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			s.sem, err = consulsem.Etcd(s.etcd, o)
		}
	default:
		return process.Refuse("unsupported", fmt.Sprintf("backend %q: this server serves %s and %s", backend, consulsemrun.Consul, consulsemrun.Etcd))
	}
	if err != nil {
		// An option the backend has not (lock-delay on etcd, say).
		s.close()
		s.sem, s.etcd = nil, nil
		return process.Refuse("unsupported", err.Error())
	}
	s.prefix, s.timeout = prefix, s.o.OpTimeout
	if s.timeout <= 0 {
		s.timeout = min(time.Duration((consulsemrun.Expiry(backend)+1)*float64(ttl))+time.Second, maxOpTimeout)
	}
	return map[string]any{"type": "init_ok"}
}
