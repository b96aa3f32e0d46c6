package pgadvisoryprotocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// ServeOptions are Serve's choices.
type ServeOptions struct {
	// Defects are a mutant's; the zero value serves the reference.
	Defects pgadvisory.Defects
	// Log, if set, receives one line per failed operation (stderr, say).
	Log io.Writer
}

// Serve speaks the protocol for PostgreSQL advisory locks
// (docs/protocol.md, "PostgreSQL advisory locks") as an implementation:
// it reads requests from r and answers on w until r ends, serving the
// reference (pgadvisoryrun.NewReference) on the server and key init names.
// It is what `lockprover serve-reference --kind pg-advisory` runs.
func Serve(r io.Reader, w io.Writer, o ServeOptions) error {
	s := &server{o: o, Logger: leaseprotocol.Logger{Log: o.Log}}
	defer s.close()
	h := leaseprotocol.Handler{Init: s.init, Ready: func() bool { return s.c != nil }, Op: s.op}
	return process.Server{Handle: h.Handle}.Serve(r, w)
}

// server is one process's reference: the lock init made.
type server struct {
	leaseprotocol.Logger
	o       ServeOptions
	c       pgadvisoryrun.Client
	timeout time.Duration
}

func (s *server) close() {
	if c, ok := s.c.(interface{ Close() }); ok {
		c.Close()
	}
}

// op answers a request after init: acquire, refresh, release.
func (s *server) op(typ string, f *process.Fields) map[string]any {
	var token string
	switch typ {
	case "acquire":
	case "refresh", "release":
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
		t, err := s.c.Acquire(ctx)
		switch {
		case err == nil:
			return map[string]any{"type": "acquire_ok", "token": t}
		case errors.Is(err, pgadvisory.ErrFull):
			return map[string]any{"type": "acquire_fail", "reason": "held"}
		case errors.Is(err, pgadvisory.ErrNotSent):
			s.Logf("acquire: not sent: %v", err)
			return process.Refuse("not-sent", err.Error())
		}
		s.Logf("acquire: outcome unknown: %v", err)
		return leaseprotocol.Failure("server", err)
	case "refresh":
		return s.changed(typ, s.c.Refresh(ctx, token))
	}
	return s.changed(typ, s.c.Release(ctx, token))
}

// changed answers a refresh or release (typ) that ended with err.
func (s *server) changed(typ string, err error) map[string]any {
	switch {
	case err == nil:
		return map[string]any{"type": typ + "_ok"}
	case errors.Is(err, pgadvisory.ErrLost):
		return map[string]any{"type": typ + "_fail", "reason": "expired"}
	}
	s.Logf("%s: outcome unknown: %v", typ, err)
	return leaseprotocol.Failure("server", err)
}

// init makes the lock on init's server and key.
func (s *server) init(f *process.Fields) map[string]any {
	if s.c != nil {
		return process.Refuse("bad request", "init was already received")
	}
	var lock, url string
	var key int64
	f.Get("client", &s.Client)
	f.Get("lock", &lock)
	f.Get("url", &url)
	f.Get("key", &key)
	ttl := time.Duration(f.Positive("ttl_ms")) * time.Millisecond
	switch {
	case f.Bad != nil:
		return process.Refuse("bad request", f.Bad.Error())
	case lock != pgadvisoryrun.Kind:
		return process.Refuse("unsupported", fmt.Sprintf("lock kind %q: this server serves %s", lock, pgadvisoryrun.Kind))
	case !strings.HasPrefix(url, "postgres://"):
		return process.Refuse("bad request", fmt.Sprintf("url %q: want a postgres:// URL", url))
	}
	s.c = pgadvisoryrun.NewReference(s.Client, pgadvisoryrun.Session{URL: url, Key: key, TTL: ttl}, s.o.Defects)
	// Under the protocol's 30 s, so that a stuck operation is answered as
	// an error, not a killed process.
	s.timeout = min(2*ttl+time.Second, 20*time.Second)
	return map[string]any{"type": "init_ok"}
}
