// Command bsmredislock serves lockprover's process protocol for Redlock
// (docs/protocol.md, "Redlock") with github.com/bsm/redislock, called
// through its public API and unchanged: one process is one lockprover
// client of one key, on the first server init names (redislock is a lock
// on one Redis server).
//
//	lockprover validate-impl --kind redlock --impl 'examples/upstream/bsmredislock/bsmredislock'
//	lockprover prove --kind redlock --servers 1 --impl 'examples/upstream/bsmredislock/bsmredislock'
//
// One go-redis client (its address only, go-redis's defaults otherwise)
// and one redislock.Client over it, as redislock's README shows. Each
// acquire is Client.Obtain(ctx, name, ttl, nil): the default options, a
// random token and no retry (the protocol's acquire never waits); the
// token is the Lock's Token(), and refresh and release call Refresh(ctx,
// ttl, nil) and Release(ctx) on the Lock that token names.
//
// Results map onto the protocol as follows:
//
//   - acquire: nil is acquire_ok; ErrNotObtained (the key is held) is
//     acquire_fail held; anything else (a network error, a timeout) is an
//     error without definite: unknown outcome, as the script may have run.
//   - refresh: nil is refresh_ok; ErrNotObtained (the key no longer holds
//     our value) is refresh_fail expired; anything else unknown.
//   - release: nil is release_ok; ErrLockNotHeld is release_fail expired;
//     anything else unknown.
//   - no validity is claimed (redislock claims none at a grant) and no
//     fence is given (the token is random).
//
// --refresh-retry N passes Options{RetryStrategy: LimitRetry(LinearBackoff(50ms), N)}
// to Refresh: v0.10.0's retry of a refresh over transient errors.
//
// A refresh or release of a token this process never granted answers
// expired without calling redislock. Each operation runs under a context
// of 20 s (lockprover waits 30 s).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

const opTimeout = 20 * time.Second

func main() {
	retries := flag.Int("refresh-retry", 0, "retry a refresh over transient errors this many times, every 50ms")
	flag.Parse()
	fmt.Fprintf(os.Stderr, "bsm/redislock adapter: refresh retries %d\n", *retries)
	s := &server{out: bufio.NewWriter(os.Stdout), locks: map[string]*redislock.Lock{}}
	if *retries > 0 {
		s.refreshOpt = &redislock.Options{RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(50*time.Millisecond), *retries)}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		s.serve(in.Bytes())
	}
	if s.rdb != nil {
		s.rdb.Close()
	}
}

type server struct {
	out        *bufio.Writer
	rdb        *redis.Client
	locker     *redislock.Client
	name       string
	locks      map[string]*redislock.Lock
	refreshOpt *redislock.Options
}

func (s *server) serve(line []byte) {
	var req map[string]json.RawMessage
	var id int64
	if err := json.Unmarshal(line, &req); err != nil || json.Unmarshal(req["id"], &id) != nil {
		fmt.Fprintf(os.Stderr, "a request that is not a JSON object with an id: %s\n", line)
		return
	}
	var typ string
	json.Unmarshal(req["type"], &typ)
	r := s.handle(typ, req)
	r["id"] = id
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	s.out.Write(append(b, '\n'))
	s.out.Flush()
}

func refuse(code, text string) map[string]any {
	return map[string]any{"type": "error", "code": code, "text": text, "definite": true}
}

func unknown(err error) map[string]any {
	return map[string]any{"type": "error", "code": "redis", "text": err.Error()}
}

func (s *server) handle(typ string, req map[string]json.RawMessage) map[string]any {
	switch typ {
	case "init":
		var lock string
		var addrs []string
		json.Unmarshal(req["lock"], &lock)
		json.Unmarshal(req["addrs"], &addrs)
		if lock != "redlock" || len(addrs) == 0 {
			return refuse("unsupported", "bsm/redislock is a lock on one Redis server")
		}
		if json.Unmarshal(req["name"], &s.name) != nil || s.name == "" {
			return refuse("bad request", `"name" must be a non-empty string`)
		}
		s.rdb = redis.NewClient(&redis.Options{Addr: addrs[0]})
		s.locker = redislock.New(s.rdb)
		return map[string]any{"type": "init_ok"}
	case "acquire", "refresh", "release":
	default:
		return refuse("unsupported", fmt.Sprintf("request type %q", typ))
	}
	if s.locker == nil {
		return refuse("not initialised", "the first request must be init")
	}
	var token string
	var ttlMS int64
	if typ != "acquire" {
		if json.Unmarshal(req["token"], &token) != nil || token == "" {
			return refuse("bad request", `"token" must be a non-empty string`)
		}
	}
	if typ != "release" {
		if json.Unmarshal(req["ttl_ms"], &ttlMS) != nil || ttlMS <= 0 {
			return refuse("bad request", `"ttl_ms" must be a positive integer`)
		}
	}
	ttl := time.Duration(ttlMS) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	switch typ {
	case "acquire":
		l, err := s.locker.Obtain(ctx, s.name, ttl, nil)
		switch {
		case err == nil:
			s.locks[l.Token()] = l
			return map[string]any{"type": "acquire_ok", "token": l.Token()}
		case errors.Is(err, redislock.ErrNotObtained):
			return map[string]any{"type": "acquire_fail", "reason": "held"}
		}
		return unknown(err)
	case "refresh":
		l := s.locks[token]
		if l == nil {
			return map[string]any{"type": "refresh_fail", "reason": "expired"}
		}
		err := l.Refresh(ctx, ttl, s.refreshOpt)
		switch {
		case err == nil:
			return map[string]any{"type": "refresh_ok"}
		case errors.Is(err, redislock.ErrNotObtained):
			return map[string]any{"type": "refresh_fail", "reason": "expired"}
		}
		return unknown(err)
	default: // release
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
		return unknown(err)
	}
}
