package consulsem

import (
	"context"
	"errors"
	"time"
)

// store is what the recipe needs of a backend: sessions with a TTL, keys
// bound to them, a listing of a prefix at one index, a conditional write of
// the lock key, and a wait for a change.
type store interface {
	timing() Timing
	// createSession creates a session of ttl (release: Consul's Behavior
	// release; lockDelay: Consul's LockDelay, 0 for none, ignored by
	// etcd), answering its token and the TTL granted.
	createSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (tok string, granted time.Duration, err error)
	// renewSession renews it; errGone when it no longer exists.
	renewSession(ctx context.Context, tok string) error
	// destroySession ends it (nil when it was gone already).
	destroySession(ctx context.Context, tok string) error
	// putContender creates key, bound to session tok if bound, unless it
	// exists: false when the backend refused it.
	putContender(ctx context.Context, key, tok string, bound bool) (bool, error)
	// list reads every key under prefix/ at one index.
	list(ctx context.Context, prefix string, stale bool) (listing, error)
	// writeLock writes the lock key as w says, answering the index the
	// write took effect at; errCASLost when the lock key's index was not
	// w.index any more, errNotLive when w.live was not held by w.session.
	writeLock(ctx context.Context, w lockWrite) (uint64, error)
	// deleteKey deletes key (nil when it was gone already).
	deleteKey(ctx context.Context, key string) error
	// waitChange returns once something under prefix/ changed after index,
	// or after max.
	waitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error
	close() error
}

var (
	errGone    = errors.New("session gone")
	errCASLost = errors.New("the lock key changed since it was read")
	errNotLive = errors.New("the contender key is not held by the session")
)

// An entry is a key of a listing.
type entry struct {
	Key   string
	Value []byte
	// Owner is the token of the session holding the key ("" for none):
	// Consul's Session, etcd's lease.
	Owner string
	// ModIndex is the index of the key's last write: Consul's
	// ModifyIndex, etcd's ModRevision. CAS compares it.
	ModIndex uint64
	// LockIndex is the key's own counter, restarting with each new key:
	// Consul's LockIndex, etcd's Version (Defects.FenceRestarts).
	LockIndex uint64
}

// A listing is every key under a prefix at one index.
type listing struct {
	Index   uint64 // the backend's index at the read (to wait for a change after it)
	Entries map[string]entry
}

func (l listing) get(key string) (entry, bool) {
	e, ok := l.Entries[key]
	return e, ok
}

// A lockWrite is a write of the lock key.
type lockWrite struct {
	key   string
	value []byte
	// cas: write only if the key's ModIndex is still index (0: only if it
	// does not exist).
	cas   bool
	index uint64
	// live, if not "", is a key that session must hold for the write to
	// happen.
	live, session string
}
