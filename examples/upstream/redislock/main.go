// Command redislock serves lockprover's process protocol for Redlock
// (docs/protocol.md, "Redlock") with github.com/bsm/redislock (go.mod's
// version), called through its public API and unchanged: one process is
// one lockprover client of one key.
//
//	lockprover validate-impl --kind redlock --impl 'examples/upstream/redislock/redislock-adapter'
//	lockprover prove --target redis --kind redlock --servers 1 --impl 'examples/upstream/redislock/redislock-adapter'
//
// bsm/redislock is a single-instance lock: a Client wraps one go-redis
// client. The adapter connects to init's first address only (every
// client of a plan does, so they share that one server); plans are
// meant to be run with --servers 1, so that every fault drawn falls on
// the lock's server. The go-redis client has the options the library's
// README shows (the address only, go-redis's defaults otherwise).
//
// The mapping (one redislock.Client per process):
//
//   - acquire: Client.Obtain(ctx, name, ttl, nil) (the default: no
//     retry, a random token). nil is acquire_ok with the lock's Token();
//     ErrNotObtained is acquire_fail held; any other error is an error
//     without definite (an unknown outcome: the script may have run).
//   - refresh: Lock.Refresh(ctx, ttl, nil): nil is refresh_ok;
//     ErrNotObtained is refresh_fail expired; anything else an error.
//   - release: Lock.Release(ctx): nil is release_ok; ErrLockNotHeld is
//     release_fail expired; anything else an error.
//   - validity_ms, elapsed_ms, fence: none. The library keeps no clock
//     of its own for a lease (Lock.TTL asks Redis), so it claims no
//     validity, and validity-sound has nothing of it to judge; its
//     tokens are random and order nothing.
//
// A refresh or release of a token this process never granted answers
// expired without calling the library (there is no Lock for it). Each
// operation runs under a context of 20 s (lockprover waits 30 s), so
// that one stuck on a partitioned server is answered as an error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lockprover/lockprover/examples/upstream/internal/serve"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

const opTimeout = 20 * time.Second

func main() {
	fmt.Fprintln(os.Stderr, "redislock adapter: github.com/bsm/redislock (go.mod's version)")
	s := &server{locks: map[string]*redislock.Lock{}}
	serve.Lines(os.Stdin, os.Stdout, func() string { return s.client }, s.handle)
	if s.rc != nil {
		s.rc.Close()
	}
}

type server struct {
	client string
	name   string
	rc     *redis.Client
	lc     *redislock.Client
	// locks are the grants of this process, by token.
	locks map[string]*redislock.Lock
}

// failure is an error of unknown outcome (not definite).
func (s *server) failure(op string, err error) serve.Reply {
	return serve.Failure(s.client, "redislock", op, err)
}

func (s *server) handle(typ string, req serve.Request) serve.Reply {
	if typ == "init" {
		return s.init(req)
	}
	token, ttl, refusal := serve.Lease(typ, req, s.lc != nil, true)
	if refusal != nil {
		return refusal
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	switch typ {
	case "acquire":
		l, err := s.lc.Obtain(ctx, s.name, ttl, nil)
		switch {
		case err == nil:
			s.locks[l.Token()] = l
			return map[string]any{"type": "acquire_ok", "token": l.Token()}
		case errors.Is(err, redislock.ErrNotObtained):
			return map[string]any{"type": "acquire_fail", "reason": "held"}
		}
		return s.failure(typ, err)
	case "refresh":
		l := s.locks[token]
		if l == nil {
			return map[string]any{"type": "refresh_fail", "reason": "expired"}
		}
		err := l.Refresh(ctx, ttl, nil)
		switch {
		case err == nil:
			return map[string]any{"type": "refresh_ok"}
		case errors.Is(err, redislock.ErrNotObtained):
			return map[string]any{"type": "refresh_fail", "reason": "expired"}
		}
		return s.failure(typ, err)
	default:
		l := s.locks[token]
		if l == nil {
			return map[string]any{"type": "release_fail", "reason": "expired"}
		}
		err := l.Release(ctx)
		switch {
		case err == nil:
			return map[string]any{"type": "release_ok"}
		case errors.Is(err, redislock.ErrLockNotHeld):
			return map[string]any{"type": "release_fail", "reason": "expired"}
		}
		return s.failure(typ, err)
	}
}

func (s *server) init(req serve.Request) serve.Reply {
	if s.lc != nil {
		return serve.Refuse("bad request", "init was already received")
	}
	var lock string
	var addrs []string
	json.Unmarshal(req["client"], &s.client)
	json.Unmarshal(req["lock"], &lock)
	json.Unmarshal(req["name"], &s.name)
	json.Unmarshal(req["addrs"], &addrs)
	switch {
	case lock != "redlock":
		return serve.Refuse("unsupported", fmt.Sprintf("lock kind %q: this adapter serves redlock", lock))
	case s.name == "" || len(addrs) == 0 || addrs[0] == "":
		return serve.Refuse("bad request", `init needs "name" and "addrs"`)
	}
	s.rc = redis.NewClient(&redis.Options{Addr: addrs[0]})
	s.lc = redislock.New(s.rc)
	return map[string]any{"type": "init_ok"}
}
