// Command redsync serves lockprover's process protocol for Redlock
// (docs/protocol.md, "Redlock") with github.com/go-redsync/redsync/v4,
// called through its public API and unchanged: one process is one
// lockprover client of one key.
//
//	lockprover validate-impl --kind redlock --impl 'examples/upstream/redsync/redsync-adapter'
//
// Each acquire makes a new Mutex, as a redsync user does for each lock
// taken: NewMutex(name, WithExpiry(ttl_ms), WithTries(1)) (one attempt:
// the protocol's acquire never waits) and LockContext. The token is the
// mutex's Value(), and refresh and release call ExtendContext and
// UnlockContext on the mutex that token names. Each server of init's
// addrs gets one go-redis client with the options redsync's README shows
// (its address only, go-redis's defaults otherwise), and one pool
// (redis/goredis/v9's NewPool over it: v4.0.3, which has no v9 driver,
// uses its goredis/v8 one).
//
// Results map onto the protocol as follows (lib.go, lib_v4_0_3.go):
//
//   - acquire: nil is acquire_ok; ErrTaken, or errors that are all
//     ErrNodeTaken (every server that did not set the key said it was
//     taken), is acquire_fail held; anything else (a RedisError, or
//     ErrFailed, which with one try and no error means that a majority set
//     the key but the validity was gone) is an error without definite:
//     unknown outcome, as keys may be left behind until they expire.
//   - refresh, release: true is _ok; false with ErrTaken, or with errors
//     that are all ErrNodeTaken or ErrLockAlreadyExpired, is _fail
//     expired; anything else (a RedisError, ErrExtendFailed: extended on
//     a majority but too late) is an error without definite.
//   - validity_ms is Until() less now, where the version has Until()
//     (v4.0.3 has not: no validity is claimed there); elapsed_ms is the
//     time since the adapter's own start of the operation, read just
//     before it calls LockContext or ExtendContext. redsync reads its own
//     clock a little later (after making the value), and counts the
//     validity from there: Until() = its start + expiry - expiry *
//     driftFactor. The adapter logs on stderr each time redsync's start,
//     so reconstructed, came more than 1 ms after its own (a claim that
//     reaches past lockprover's bound by that much is the adaptation's);
//     --elapsed-from-redsync counts elapsed_ms from that reconstructed
//     start instead (which trusts redsync's formula, so that
//     validity-sound then judges only the validity left at the reply).
//     Without it, an acquire_ok also says started_ms: when redsync asked
//     for the mutex's value (WithGenValueFunc, making it as redsync's
//     own genValue does), measured, after the adapter's start; redsync
//     reads its clock right after, so its start is no earlier, and
//     validity-sound judges the claim from there, showing it as an
//     excuse where it needed it (docs/protocol.md, "Redlock").
//   - fence: none (redsync's value is random; it orders nothing).
//
// Flags: --setnx-on-extend adds redsync's WithSetNXOnExtend() to every
// mutex (the current release only); --elapsed-from-redsync, above.
//
// A refresh or release of a token this process never granted answers
// expired without calling redsync (there is no mutex for it). Each
// operation runs under a context of 20 s (lockprover waits 30 s), so
// that one stuck on a partitioned server is answered as an error, not
// killed; redsync bounds each server's acquire by its own timeoutFactor.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/lockprover/lockprover/examples/upstream/internal/serve"
)

// outcome is what a redsync call meant in the protocol's terms.
type outcome int

const (
	ok      outcome = iota
	refused         // acquire: held; refresh, release: expired
	unknown         // an error without definite
)

// lib is one version of redsync behind the adapter: a client of one key.
type lib interface {
	// acquire takes the lock for ttl; token is the mutex's value, until
	// its Until() (zero where the version has none). start is called
	// right before the library is; began when redsync asks for the
	// mutex's value (WithGenValueFunc), which it does right before it
	// reads its own clock.
	acquire(ctx context.Context, ttl time.Duration, start, began func()) (token string, until time.Time, o outcome, err error)
	// refresh extends the lease of token (one this process granted) to ttl.
	refresh(ctx context.Context, token string, ttl time.Duration, start func()) (until time.Time, o outcome, err error)
	// release ends the lease of token (one this process granted).
	release(ctx context.Context, token string) (o outcome, err error)
	// granted says whether token is one this process was granted.
	granted(token string) bool
	close()
}

const opTimeout = 20 * time.Second

func main() {
	setNX := flag.Bool("setnx-on-extend", false, "add redsync's WithSetNXOnExtend() to every mutex")
	fromRedsync := flag.Bool("elapsed-from-redsync", false, "count elapsed_ms from redsync's own start, reconstructed from Until()")
	flag.Parse()
	if *setNX && !hasSetNXOnExtend {
		fmt.Fprintf(os.Stderr, "redsync %s has no WithSetNXOnExtend\n", version)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "redsync adapter: redsync %s, setnx-on-extend %v\n", version, *setNX)
	s := &server{setNX: *setNX, fromRedsync: *fromRedsync}
	serve.Lines(os.Stdin, os.Stdout, func() string { return s.client }, s.handle)
	if s.l != nil {
		s.l.close()
	}
}

type server struct {
	setNX       bool
	fromRedsync bool
	client      string
	l           lib
}

func (s *server) handle(typ string, req serve.Request) serve.Reply {
	if typ == "init" {
		return s.init(req)
	}
	token, ttl, refusal := serve.Lease(typ, req, s.l != nil, true)
	if refusal != nil {
		return refusal
	}
	var start, libStart time.Time
	begin := func() { start = time.Now() }
	began := func() { libStart = time.Now() }
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	switch typ {
	case "acquire":
		token, until, o, err := s.l.acquire(ctx, ttl, begin, began)
		switch o {
		case ok:
			return s.claim(map[string]any{"type": "acquire_ok", "token": token}, start, libStart, until, ttl)
		case refused:
			return map[string]any{"type": "acquire_fail", "reason": "held"}
		}
		return s.failure(typ, err)
	case "refresh":
		if !s.l.granted(token) {
			return map[string]any{"type": "refresh_fail", "reason": "expired"}
		}
		until, o, err := s.l.refresh(ctx, token, ttl, begin)
		switch o {
		case ok:
			return s.claim(map[string]any{"type": "refresh_ok"}, start, time.Time{}, until, ttl)
		case refused:
			return map[string]any{"type": "refresh_fail", "reason": "expired"}
		}
		return s.failure(typ, err)
	default:
		if !s.l.granted(token) {
			return map[string]any{"type": "release_fail", "reason": "expired"}
		}
		o, err := s.l.release(ctx, token)
		switch o {
		case ok:
			return map[string]any{"type": "release_ok"}
		case refused:
			return map[string]any{"type": "release_fail", "reason": "expired"}
		}
		return s.failure(typ, err)
	}
}

// failure is an error of unknown outcome (not definite).
func (s *server) failure(op string, err error) serve.Reply {
	return serve.Failure(s.client, "redsync", op, err)
}

// claim adds a grant's validity (Until() less now) and the time since the
// operation's start, where the version has Until(); and, where libStart
// was measured (an acquire: the time redsync asked for the value, just
// before it read its own clock), started_ms, that time after the start.
func (s *server) claim(m map[string]any, start, libStart, until time.Time, ttl time.Duration) map[string]any {
	if until.IsZero() {
		return m
	}
	now := time.Now()
	// redsync's own start: Until() = start + expiry - expiry*driftFactor
	// (the default factor, 0.01).
	own := until.Add(-ttl + time.Duration(int64(float64(ttl)*0.01)))
	if gap := own.Sub(start); gap > time.Millisecond {
		fmt.Fprintf(os.Stderr, "%s: %s: redsync's own start came %v after the adapter's\n", s.client, m["type"], gap)
	}
	if s.fromRedsync {
		start = own
	}
	m["validity_ms"] = math.Max(float64(until.Sub(now))/float64(time.Millisecond), 0)
	m["elapsed_ms"] = float64(now.Sub(start)) / float64(time.Millisecond)
	if !s.fromRedsync && !libStart.IsZero() && libStart.After(start) {
		m["started_ms"] = float64(libStart.Sub(start)) / float64(time.Millisecond)
	}
	return m
}

func (s *server) init(req serve.Request) serve.Reply {
	if s.l != nil {
		return serve.Refuse("bad request", "init was already received")
	}
	var lock, name string
	var addrs []string
	json.Unmarshal(req["client"], &s.client)
	json.Unmarshal(req["lock"], &lock)
	json.Unmarshal(req["name"], &name)
	json.Unmarshal(req["addrs"], &addrs)
	switch {
	case lock != "redlock":
		return serve.Refuse("unsupported", fmt.Sprintf("lock kind %q: this adapter serves redlock", lock))
	case name == "" || len(addrs) == 0:
		return serve.Refuse("bad request", `init needs "name" and "addrs"`)
	}
	s.l = newLib(addrs, name, s.setNX)
	// redsync reads its clock after making the mutex's value (crypto/rand),
	// whose first use in a process may take milliseconds: done once here,
	// so that they do not lie between the adapter's start and redsync's.
	var b [16]byte
	rand.Read(b[:])
	return map[string]any{"type": "init_ok"}
}
