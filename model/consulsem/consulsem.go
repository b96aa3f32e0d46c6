// Package consulsem is the reference implementation of Consul's semaphore
// recipe (the Consul guide "Semaphore", and hashicorp/consul's
// api/semaphore.go): at most limit holders of a prefix at a time, each
// holding a session that expires unless renewed, on a real Consul over its
// HTTP API or on etcd v3, the same recipe mapped onto leases.
//
// An acquire creates a session with the lease's TTL, puts the contender key
// <prefix>/<session> bound to it (Consul ?acquire, etcd a key with the
// lease), reads the whole prefix, decodes the lock key <prefix>/.lock =
// {"Limit":n,"Holders":{"<session>":true}}, prunes the holders whose
// contender key is no longer held by their session, and, if fewer than
// limit remain, adds itself with one transaction that checks both that the
// lock key is unchanged since the read (its index) and that the contender
// key is still held by the acquirer's session. A holder is thus alive from
// that grant until its session dies; the session dying releases (or
// deletes) the contender key and so frees the slot for the next acquire's
// pruning. The limit is agreed: an acquire whose limit is not the lock
// key's fails with ErrMismatch.
//
// Acquire never waits for a slot unless Options.Wait says so: it grants a
// lease or answers ErrFull, after at most Options.CASRetries lost
// check-and-sets. Refresh renews the session; Release takes the holder out
// of the lock key (again checking that its session is alive), deletes its
// contender key and destroys its session; Verify says whether the holder is
// still among the holders with its session alive. A lease's token is its
// session's id (etcd: the lease id in hex); its fence is the index at which
// the grant was written (Consul: the lock key's new ModifyIndex; etcd: the
// transaction's revision), which increases in the order grants took
// effect.
//
// The backends invalidate sessions differently (Timing): Consul after two
// TTLs, etcd after one TTL of whole seconds, at least its floor; both give
// every session a fresh TTL after a restart or a new leader.
// Options.Defects switches on deliberate bugs, for the prover's mutants.
package consulsem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// Errors an operation may return. Any other error leaves a Refresh's or a
// Release's outcome unknown; an acquire's other errors mean it was not
// granted, except ErrUnknownOutcome.
var (
	// ErrFull: limit holders were alive when the acquire looked.
	ErrFull = errors.New("consulsem: every slot is held")
	// ErrNotGranted: the acquire gave up without a slot for a reason other
	// than a full semaphore (its session died before the grant, the
	// backend refused its contender key, it lost every check-and-set);
	// the message says which.
	ErrNotGranted = errors.New("consulsem: not granted")
	// ErrMismatch: the acquire's limit is not the one in the lock key (or
	// the lock key is not a semaphore of this recipe); the message says
	// both.
	ErrMismatch = errors.New("consulsem: the lock key disagrees")
	// ErrExpired: the lease's session is gone or it is no longer among the
	// holders (expired, released, pruned, or never granted), so refresh or
	// release did nothing.
	ErrExpired = errors.New("consulsem: the lease has expired")
	// ErrUnknownOutcome: the grant's write was sent but its answer did not
	// arrive, so the lease may or may not have been granted. The Lease
	// returned with it is the one that would have been granted: Release
	// its token to free the slot if it was; otherwise the slot is free
	// again once the session expires.
	ErrUnknownOutcome = errors.New("consulsem: the grant got no answer: granted or not, unknown")
)

// A Lease is a granted slot.
type Lease struct {
	// Token identifies the lease to Refresh, Release and Verify: the
	// session's id (Consul: a UUID; etcd: the lease id, 16 hex digits).
	Token string
	// Fence is the grant's index (Consul: the lock key's ModifyIndex after
	// the grant; etcd: the grant's revision), larger for every later grant
	// on the same backend (a Consul -dev agent that restarted starts again
	// from 1).
	Fence int64
	// TTL is the TTL the backend granted: the one asked for on Consul, on
	// etcd rounded up to whole seconds and at least the server's floor.
	TTL time.Duration
}

// A Semaphore is a client of the recipe on one backend: one semaphore per
// prefix. Besides its options it remembers only, for the defect
// VerifyHeldThroughFailures, the leases it granted. It is safe for
// concurrent use.
type Semaphore struct {
	st  store
	o   Options
	now func() time.Time // the clock Options.Wait is measured on (a Backend's, On)

	mu      sync.Mutex
	granted map[string]bool // tokens granted and not released (VerifyHeldThroughFailures)

	// pause, if set (by tests), is called at named points of an acquire so
	// that a test can interleave operations exactly.
	pause func(point string)
}

func newSemaphore(st store, o Options) (*Semaphore, error) {
	if err := o.check(st.timing().Backend); err != nil {
		return nil, err
	}
	return &Semaphore{st: st, o: o, now: time.Now, granted: map[string]bool{}}, nil
}

// Timing is what the backend does with TTLs.
func (s *Semaphore) Timing() Timing { return s.st.timing() }

// Close closes what the Semaphore opened (not an etcd client it was
// given).
func (s *Semaphore) Close() error { return s.st.close() }

// lockValue is the lock key's value, as api/semaphore.go writes it.
type lockValue struct {
	Limit   int
	Holders map[string]bool
}

// prefixRE: key segments of letters, digits, '-', '_' and '.', separated
// by single slashes, no slash at either end (a contender key is
// prefix/session; the listing reads prefix/ and nothing beside it).
var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)

func checkPrefix(prefix string) error {
	if len(prefix) > 200 || !prefixRE.MatchString(prefix) {
		return fmt.Errorf("consulsem: prefix %q: 1 to 200 of letters, digits, '-', '_', '.', and single slashes inside", prefix)
	}
	return nil
}

// tokenRE: what a session id can be (Consul: a UUID; etcd: 16 hex
// digits). A token that cannot be one was never granted; refusing it
// also keeps it from naming a key outside the prefix.
var tokenRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

func lockKey(prefix string) string           { return prefix + "/.lock" }
func contenderKey(prefix, tok string) string { return prefix + "/" + tok }

// state is what a listing says of the semaphore.
type state struct {
	l      listing
	exists bool      // the lock key exists
	index  uint64    // its ModifyIndex, 0 when it does not exist
	lock   lockValue // its value; Holders never nil
}

// read lists prefix and decodes the lock key.
func (s *Semaphore) read(ctx context.Context, prefix string, stale bool) (state, error) {
	l, err := s.st.list(ctx, prefix, stale)
	if err != nil {
		return state{}, err
	}
	st := state{l: l, lock: lockValue{Holders: map[string]bool{}}}
	if e, ok := l.get(lockKey(prefix)); ok {
		st.exists, st.index = true, e.ModIndex
		if err := json.Unmarshal(e.Value, &st.lock); err != nil {
			return state{}, fmt.Errorf("%w: %s is no semaphore lock key of this recipe: %v", ErrMismatch, lockKey(prefix), err)
		}
		if st.lock.Holders == nil {
			st.lock.Holders = map[string]bool{}
		}
	}
	return st, nil
}

// alive says whether the listing shows tok's contender key held by tok's
// session: a session that is gone has released or deleted it.
func (st state) alive(prefix, tok string) bool {
	e, ok := st.l.get(contenderKey(prefix, tok))
	return ok && e.Owner == tok
}

// prune drops the holders that are not alive.
func (st state) prune(prefix string) {
	for h := range st.lock.Holders {
		if !st.alive(prefix, h) {
			delete(st.lock.Holders, h)
		}
	}
}

// Acquire grants a lease on prefix for ttl if fewer than limit holders are
// alive, and answers ErrFull otherwise (after waiting up to Options.Wait
// for a slot). The first acquire of a prefix sets its limit; one that asks
// for another fails with ErrMismatch. An error other than these and
// ErrUnknownOutcome means the lease was not granted; what the acquire
// created (session, contender key) is then removed again.
func (s *Semaphore) Acquire(ctx context.Context, prefix string, limit int, ttl time.Duration) (Lease, error) {
	if err := checkPrefix(prefix); err != nil {
		return Lease{}, err
	}
	if limit < 1 {
		return Lease{}, fmt.Errorf("consulsem: limit %d: must be at least 1", limit)
	}
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("consulsem: ttl %v: must be positive", ttl)
	}
	lease, err := s.contend(ctx, prefix, ttl)
	if err != nil {
		return Lease{}, err
	}
	var until time.Time
	if s.o.Wait > 0 {
		until = s.now().Add(s.o.Wait)
	}
	for lost := 0; ; {
		st, err := s.decide(ctx, prefix, limit, lease, until)
		if err != nil {
			return Lease{}, err
		}
		if st == nil {
			continue // waited for a slot
		}
		done, err := s.grant(ctx, prefix, st, &lease)
		if done || err != nil {
			return lease, err
		}
		if lost++; lost >= s.o.casRetries() {
			s.abandon(prefix, lease.Token)
			return Lease{}, fmt.Errorf("%w: lost the check-and-set of %s %d times to other writers", ErrNotGranted, lockKey(prefix), lost)
		}
	}
}

// contend is the recipe's first steps: a session of the lease's own, and
// the contender key it holds under prefix.
func (s *Semaphore) contend(ctx context.Context, prefix string, ttl time.Duration) (Lease, error) {
	tok, granted, err := s.st.createSession(ctx, ttl, s.o.BehaviorRelease, s.o.LockDelay)
	if err != nil {
		return Lease{}, fmt.Errorf("consulsem: acquire: create session: %w", err)
	}
	ck := contenderKey(prefix, tok)
	ok, err := s.st.putContender(ctx, ck, tok, !s.o.Defects.PlainContender)
	if err != nil {
		s.abandon(prefix, tok)
		return Lease{}, fmt.Errorf("consulsem: acquire: put contender key: %w", err)
	}
	if !ok {
		s.abandon(prefix, tok)
		return Lease{}, fmt.Errorf("%w: the backend refused contender key %s (its session died?)", ErrNotGranted, ck)
	}
	return Lease{Token: tok, TTL: granted}, nil
}

// decide reads the prefix and decides whether lease may take a place: the
// state to write its grant from, nil after waiting for a slot (read
// again), or the error that ends the acquire (the lease abandoned).
func (s *Semaphore) decide(ctx context.Context, prefix string, limit int, lease Lease, until time.Time) (*state, error) {
	d, tok := s.o.Defects, lease.Token
	st, err := s.read(ctx, prefix, s.o.StaleReads)
	if err != nil {
		s.abandon(prefix, tok)
		if errors.Is(err, ErrMismatch) {
			return nil, err
		}
		return nil, fmt.Errorf("consulsem: acquire: list %s/: %w", prefix, err)
	}
	if st.exists && st.lock.Limit != limit && !d.LocalLimit {
		s.abandon(prefix, tok)
		return nil, fmt.Errorf("%w: %s has limit %d, the acquire asked for %d", ErrMismatch, lockKey(prefix), st.lock.Limit, limit)
	}
	st.lock.Limit = limit // a new lock key's; with LocalLimit, the caller's wins
	if !d.NoPrune {
		st.prune(prefix)
	}
	full := len(st.lock.Holders) >= limit
	if d.LimitGreater {
		full = len(st.lock.Holders) > limit
	}
	if full {
		if wait := until.Sub(s.now()); wait > 0 {
			if err := s.waitForSlot(ctx, prefix, tok, lease.TTL, st.l.Index, wait); err != nil {
				s.abandon(prefix, tok)
				return nil, err
			}
			return nil, nil
		}
		s.abandon(prefix, tok)
		return nil, fmt.Errorf("%w: %d holders alive, limit %d", ErrFull, len(st.lock.Holders), limit)
	}
	s.at("decided")
	if err := ctx.Err(); err != nil { // nothing written yet: not granted
		s.abandon(prefix, tok)
		return nil, fmt.Errorf("consulsem: acquire: %w", err)
	}
	return &st, nil
}

// grant writes the lock key with lease among its holders, checked against
// st's index (and the contender key's session): done when the write
// decided the acquire (granted, refused, or of unknown outcome: err says
// which), not done when another writer won the check-and-set first.
func (s *Semaphore) grant(ctx context.Context, prefix string, st *state, lease *Lease) (done bool, err error) {
	d, tok := s.o.Defects, lease.Token
	ck := contenderKey(prefix, tok)
	st.lock.Holders[tok] = true
	w := lockWrite{key: lockKey(prefix), value: mustJSON(st.lock), cas: !d.PlainPut, index: st.index}
	if !d.NoLiveCheck {
		w.live, w.session = ck, tok
	}
	fence, err := s.st.writeLock(ctx, w)
	switch {
	case err == nil:
		lease.Fence = int64(fence)
		if d.FenceRestarts {
			e, _ := st.l.get(ck)
			lease.Fence = int64(e.LockIndex)
		}
		s.remember(tok, true)
		return true, nil
	case errors.Is(err, errCASLost):
		return false, nil
	case errors.Is(err, errNotLive):
		s.abandon(prefix, tok)
		*lease = Lease{}
		return true, fmt.Errorf("%w: session %s no longer held its contender key at the grant (expired?)", ErrNotGranted, tok)
	default:
		return true, fmt.Errorf("%w: write %s: %w", ErrUnknownOutcome, lockKey(prefix), err)
	}
}

// waitForSlot renews the session and waits for the prefix to change after
// index, for at most wait and at most half the TTL (so that the session
// stays alive however long the caller waits).
func (s *Semaphore) waitForSlot(ctx context.Context, prefix, tok string, ttl time.Duration, index uint64, wait time.Duration) error {
	if err := s.st.renewSession(ctx, tok); err != nil {
		if errors.Is(err, errGone) {
			return fmt.Errorf("%w: the session expired while waiting for a slot", ErrNotGranted)
		}
		return fmt.Errorf("consulsem: acquire: renew while waiting: %w", err)
	}
	if wait > ttl/2 {
		wait = ttl / 2
	}
	if err := s.st.waitChange(ctx, prefix, index, wait); err != nil {
		return fmt.Errorf("consulsem: acquire: wait for a slot: %w", err)
	}
	return nil
}

// abandon removes what an acquire that was not granted created: its
// contender key and its session (best effort, on a context of its own: the
// caller's may be what ended the acquire).
func (s *Semaphore) abandon(prefix, tok string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.st.deleteKey(ctx, contenderKey(prefix, tok))
	s.st.destroySession(ctx, tok)
}

// Refresh renews the lease's session, giving it its TTL again from now. It
// answers ErrExpired when the session is gone (expired, released, never
// granted). Consul renews a session it has not yet invalidated, that is up
// to two TTLs after the last renewal.
func (s *Semaphore) Refresh(ctx context.Context, prefix, token string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	if !tokenRE.MatchString(token) {
		return fmt.Errorf("%w: no lease has token %q", ErrExpired, token)
	}
	if err := s.st.renewSession(ctx, token); err != nil {
		if errors.Is(err, errGone) {
			return fmt.Errorf("%w: session %s is gone", ErrExpired, token)
		}
		return fmt.Errorf("consulsem: refresh: %w", err)
	}
	return nil
}

// Release takes the lease's holder out of the lock key, with a
// check-and-set that also checks that its session still holds its
// contender key, then deletes the contender key and destroys the session.
// It answers ErrExpired when the holder was no longer among the holders or
// its session was gone: its slot was free already.
func (s *Semaphore) Release(ctx context.Context, prefix, token string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	if !tokenRE.MatchString(token) {
		return fmt.Errorf("%w: no lease has token %q", ErrExpired, token)
	}
	d := s.o.Defects
	ck := contenderKey(prefix, token)
	gone := func(why string) error {
		s.abandon(prefix, token)
		s.remember(token, false)
		if d.ReleaseOKAfterPruned {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrExpired, why)
	}
	for lost := 0; ; {
		st, err := s.read(ctx, prefix, false)
		if err != nil {
			return fmt.Errorf("consulsem: release: list %s/: %w", prefix, err)
		}
		switch {
		case !st.lock.Holders[token]:
			return gone("not among the holders of " + lockKey(prefix))
		case !st.alive(prefix, token):
			return gone("session " + token + " is gone")
		}
		delete(st.lock.Holders, token)
		w := lockWrite{key: lockKey(prefix), value: mustJSON(st.lock), cas: !d.PlainPut, index: st.index,
			live: ck, session: token}
		_, err = s.st.writeLock(ctx, w)
		switch {
		case err == nil:
			s.remember(token, false)
			s.st.deleteKey(ctx, ck)
			s.st.destroySession(ctx, token)
			return nil
		case errors.Is(err, errCASLost):
			if lost++; lost >= s.o.casRetries() {
				return fmt.Errorf("consulsem: release: lost the check-and-set of %s %d times to other writers", lockKey(prefix), lost)
			}
		case errors.Is(err, errNotLive):
			return gone("session " + token + " died before the release")
		default:
			return fmt.Errorf("consulsem: release: write %s: %w", lockKey(prefix), err)
		}
	}
}

// Verify says whether the lease is still held: its holder is in the lock
// key and its session holds its contender key, in one consistent read. A
// session that is gone has let go of the key, so held means the session
// was alive at the read. An error means the answer is unknown.
func (s *Semaphore) Verify(ctx context.Context, prefix, token string) (bool, error) {
	if err := checkPrefix(prefix); err != nil {
		return false, err
	}
	if !tokenRE.MatchString(token) {
		return false, nil
	}
	st, err := s.read(ctx, prefix, false)
	if s.o.Defects.VerifyHeldThroughFailures {
		if err != nil {
			return s.remembered(token), nil
		}
		return st.lock.Holders[token], nil
	}
	if err != nil {
		return false, fmt.Errorf("consulsem: verify: list %s/: %w", prefix, err)
	}
	return st.lock.Holders[token] && st.alive(prefix, token), nil
}

// remember notes a lease granted (or let go), for the defect
// VerifyHeldThroughFailures.
func (s *Semaphore) remember(tok string, held bool) {
	if !s.o.Defects.VerifyHeldThroughFailures {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if held {
		s.granted[tok] = true
	} else {
		delete(s.granted, tok)
	}
}

func (s *Semaphore) remembered(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted[tok]
}

// at lets a test stop an operation at a named point.
func (s *Semaphore) at(point string) {
	if s.pause != nil {
		s.pause(point)
	}
}

func mustJSON(v lockValue) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
