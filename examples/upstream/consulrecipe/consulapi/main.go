// Command consulapi serves lockprover's process protocol for Consul's
// semaphore (docs/protocol.md, "Consul's semaphore") with
// github.com/hashicorp/consul/api, called through its public API and
// unchanged: its Semaphore by default, its Lock (a mutex: limit 1) with
// --lock. One process is one lockprover client of one prefix.
//
//	lockprover validate-impl --kind consul-semaphore --impl /tmp/consulapi
//	lockprover validate-impl --kind consul-semaphore --impl '/tmp/consulapi --lock --lock-delay 1ms'
//
// Each acquire creates a session of its own, as the library does when it
// is given none (api.SessionEntry with the TTL asked for, and the
// library's own name and behaviour: delete for the Semaphore, release and
// the --lock-delay for the Lock), and passes it as the options' Session:
// given a session, the library starts no RenewPeriodic of its own, so
// that the session lives exactly as lockprover's refreshes keep it. The
// token is the session's ID.
//
//   - Semaphore: SemaphoreOpts{Prefix: name, Limit: limit, Session: id,
//     SemaphoreTryOnce: true, SemaphoreWaitTime: --wait}, then
//     Acquire(nil). Its lock key is name/.lock, {"Limit","Holders"}, and its
//     contender keys name/<session>, the recipe's. Acquire's (nil, nil),
//     "could not acquire within the wait", is acquire_fail full (every
//     slot held, or check-and-sets lost to other contenders for the whole
//     wait). "semaphore limit conflict" is a definite mismatch; an error
//     of its final check-and-set of the lock key ("failed to update lock")
//     is an unknown outcome; any other error came before any write of the
//     lock key, or after check-and-sets that answered false, so it is
//     definite: no slot was taken. The library gives no fence.
//   - Lock (--lock): LockOpts{Key: name/.lock, Session: id, LockTryOnce:
//     true, LockWaitTime: --wait}, then Lock(nil); a limit other than 1
//     is refused as a definite unsupported. (nil, nil) is full; "failed
//     to acquire lock" (its ?acquire write) is unknown; other errors are
//     definite. The fence is Consul's sequencer, the key's LockIndex, read
//     by the adapter (a consistent GET right after Lock returns, kept only
//     if the key is still held by the session): Lock returns none, but
//     Consul's documentation tells its users to take (Key, LockIndex,
//     Session) as a sequencer. --no-fence leaves it out.
//
// refresh is Session().Renew (404, "no such session", is expired); verify
// is whether the channel Acquire or Lock returned is still open (the
// library's own notice of a lost hold: its monitor closes it), and false
// once Release or Unlock was called (the monitor closes the channel only
// once it sees the release, a moment later); release is
// Release or Unlock, then Session().Destroy (the library's own clean-up
// when it made the session). A Release or Unlock that answers "not held"
// (the library's record says released already) is expired; any other
// answer of theirs is passed on as it is: in particular both answer nil
// for a hold their session lost (see docs/verdicts.md). Whatever an
// acquire that was not granted created is destroyed again (its session,
// and with it the contender key).
//
// The library's Semaphore and Lock take no context: each operation is
// bounded by the protocol loop's own deadline (protoloop.OpTimeout), and
// the calls of the adapter's own (session create, renew, destroy, the
// fence's GET) by a context. A refresh, verify or release of a token this
// process never granted answers expired or held:false without a call.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/lockprover/lockprover/examples/upstream/consulrecipe/protoloop"
)

func main() {
	mutex := flag.Bool("lock", false, "serve the library's Lock (a mutex, limit 1) instead of its Semaphore")
	lockDelay := flag.Duration("lock-delay", 0, "the Lock's sessions' LockDelay (0: not sent, Consul's default of 15s, as the library leaves it)")
	wait := flag.Duration("wait", 50*time.Millisecond, "SemaphoreWaitTime / LockWaitTime: how long a try-once acquire may wait")
	noFence := flag.Bool("no-fence", false, "with --lock, say no fence (the key's LockIndex otherwise)")
	flag.Parse()
	if *wait <= 0 || *lockDelay < 0 {
		fmt.Fprintln(os.Stderr, "consulapi: --wait must be positive and --lock-delay not negative")
		os.Exit(2)
	}
	open := func(in protoloop.Init) (protoloop.Lock, error) {
		if in.Backend != "consul" {
			return nil, &protoloop.Definite{Code: "unsupported", Err: fmt.Errorf("backend %q: consul/api speaks to Consul only", in.Backend)}
		}
		c, err := api.NewClient(&api.Config{Address: in.Addr, Scheme: "http"})
		if err != nil {
			return nil, err
		}
		return &adapter{c: c, name: in.Name, mutex: *mutex, lockDelay: *lockDelay, wait: *wait, fence: !*noFence,
			held: map[string]*hold{}}, nil
	}
	if err := protoloop.Serve(os.Stdin, os.Stdout, open); err != nil {
		fmt.Fprintf(os.Stderr, "consulapi: %v\n", err)
		os.Exit(1)
	}
}

// adapter is the library's Semaphore (or Lock) of one prefix, one session
// per acquire.
type adapter struct {
	c         *api.Client
	name      string
	mutex     bool
	lockDelay time.Duration
	wait      time.Duration
	fence     bool

	mu   sync.Mutex
	held map[string]*hold // by token: every grant of this process
}

// hold is one grant: the library's object that holds it, the channel it
// returned, and whether Release or Unlock was called on it (the library's
// own isHeld, which it does not export).
type hold struct {
	sem      *api.Semaphore
	lock     *api.Lock
	lost     <-chan struct{}
	released bool
}

func (a *adapter) grant(token string) *hold {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[token]
}

func (a *adapter) Acquire(ctx context.Context, limit int, ttl time.Duration) (protoloop.Grant, error) {
	if a.mutex && limit != 1 {
		return protoloop.Grant{}, &protoloop.Definite{Code: "unsupported", Err: fmt.Errorf("limit %d: consul/api's Lock is a mutex (limit 1)", limit)}
	}
	se := &api.SessionEntry{Name: api.DefaultSemaphoreSessionName, TTL: ttl.String(), Behavior: api.SessionBehaviorDelete}
	if a.mutex {
		se = &api.SessionEntry{Name: api.DefaultLockSessionName, TTL: ttl.String(), LockDelay: a.lockDelay}
	}
	id, _, err := a.c.Session().Create(se, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		// No slot can be taken without a session.
		return protoloop.Grant{}, &protoloop.Definite{Code: "session", Err: fmt.Errorf("creating the session: %w", err)}
	}
	h, fence, err := a.take(ctx, id, limit)
	if h == nil {
		// Not granted: what the acquire made goes again (best effort; it
		// expires with the session otherwise).
		a.destroy(id)
		if err == nil {
			return protoloop.Grant{}, protoloop.ErrFull
		}
		return protoloop.Grant{}, err
	}
	a.mu.Lock()
	a.held[id] = h
	a.mu.Unlock()
	return protoloop.Grant{Token: id, Fence: fence}, nil
}

// take runs the library's acquire with session id: a hold, or nil and
// nil for "could not acquire", or nil and the error, classified.
func (a *adapter) take(ctx context.Context, id string, limit int) (*hold, *uint64, error) {
	if !a.mutex {
		sem, err := a.c.SemaphoreOpts(&api.SemaphoreOptions{Prefix: a.name, Limit: limit, Session: id,
			SemaphoreTryOnce: true, SemaphoreWaitTime: a.wait})
		if err != nil {
			return nil, nil, &protoloop.Definite{Code: "library", Err: err}
		}
		lost, err := sem.Acquire(nil)
		switch {
		case err == nil && lost == nil:
			return nil, nil, nil
		case err == nil:
			return &hold{sem: sem, lost: lost}, nil, nil
		case strings.HasPrefix(err.Error(), "semaphore limit conflict"):
			return nil, nil, &protoloop.Definite{Code: "mismatch", Err: err}
		case strings.HasPrefix(err.Error(), "failed to update lock"):
			return nil, nil, err // the lock key's check-and-set got no answer
		}
		return nil, nil, &protoloop.Definite{Code: "library", Err: err}
	}
	key := path.Join(a.name, api.DefaultSemaphoreKey)
	lock, err := a.c.LockOpts(&api.LockOptions{Key: key, Session: id, LockTryOnce: true, LockWaitTime: a.wait})
	if err != nil {
		return nil, nil, &protoloop.Definite{Code: "library", Err: err}
	}
	lost, err := lock.Lock(nil)
	switch {
	case err == nil && lost == nil:
		return nil, nil, nil
	case err == nil:
		return &hold{lock: lock, lost: lost}, a.sequencer(ctx, key, id), nil
	case strings.HasPrefix(err.Error(), "failed to acquire lock"):
		return nil, nil, err // the ?acquire write got no answer
	}
	return nil, nil, &protoloop.Definite{Code: "library", Err: err}
}

// sequencer is the LockIndex of key, read consistently, if the key is
// held by session id (nil otherwise, or with --no-fence).
func (a *adapter) sequencer(ctx context.Context, key, id string) *uint64 {
	if !a.fence {
		return nil
	}
	pair, _, err := a.c.KV().Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil || pair.Session != id {
		fmt.Fprintf(os.Stderr, "consulapi: no fence for session %s: the key read %v, %v\n", id, pair, err)
		return nil
	}
	return &pair.LockIndex
}

// destroy ends session id, as the library does with the sessions it made.
func (a *adapter) destroy(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.c.Session().Destroy(id, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		fmt.Fprintf(os.Stderr, "consulapi: destroying session %s: %v\n", id, err)
	}
}

func (a *adapter) isReleased(h *hold) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return h.released
}

func (a *adapter) Refresh(ctx context.Context, token string) (time.Duration, error) {
	if a.grant(token) == nil {
		return 0, protoloop.ErrExpired
	}
	entry, _, err := a.c.Session().Renew(token, (&api.WriteOptions{}).WithContext(ctx))
	switch {
	case err != nil:
		return 0, err
	case entry == nil:
		return 0, protoloop.ErrExpired
	}
	return 0, nil
}

func (a *adapter) Verify(_ context.Context, token string) (bool, error) {
	h := a.grant(token)
	if h == nil || a.isReleased(h) {
		return false, nil
	}
	select {
	case <-h.lost:
		return false, nil
	default:
		return true, nil
	}
}

func (a *adapter) Release(_ context.Context, token string) error {
	h := a.grant(token)
	if h == nil {
		return protoloop.ErrExpired
	}
	a.mu.Lock()
	h.released = true
	a.mu.Unlock()
	var err error
	if h.sem != nil {
		err = h.sem.Release()
	} else {
		err = h.lock.Unlock()
	}
	if errors.Is(err, api.ErrSemaphoreNotHeld) || errors.Is(err, api.ErrLockNotHeld) {
		return protoloop.ErrExpired
	}
	if err != nil {
		return err
	}
	a.destroy(token)
	return nil
}
