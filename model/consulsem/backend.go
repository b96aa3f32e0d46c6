package consulsem

import (
	"context"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Backend is what the recipe needs of a store, for a backend another
// package supplies (the simulator of package sim/consulsim): sessions with
// a TTL, keys bound to them, a listing of a prefix at one index, a
// conditional write of the lock key, and a wait for a change. Its methods
// are the calls Consul and Etcd make, one each (ConsulBackend and
// EtcdBackend are those two as Backends). A Semaphore on a Backend (On)
// reads no clock but Now.
type Backend interface {
	// Timing is what the backend does with TTLs.
	Timing() Timing
	// Now is the clock Options.Wait is measured on.
	Now() time.Time
	// CreateSession creates a session of ttl (release: Consul's Behavior
	// release, not delete; lockDelay: Consul's LockDelay, 0 for none,
	// which etcd ignores), answering its token and the TTL granted.
	CreateSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (tok string, granted time.Duration, err error)
	// RenewSession renews it; ErrSessionGone when it no longer exists.
	RenewSession(ctx context.Context, tok string) error
	// DestroySession ends it (nil when it was gone already).
	DestroySession(ctx context.Context, tok string) error
	// PutContender creates key, bound to session tok if bound, unless it
	// exists: false when the backend refused it.
	PutContender(ctx context.Context, key, tok string, bound bool) (bool, error)
	// List reads every key under prefix/ at one index.
	List(ctx context.Context, prefix string, stale bool) (Listing, error)
	// WriteLock writes the lock key as w says, answering the index the
	// write took effect at; ErrCASLost when the lock key's index was not
	// w.Index any more, ErrNotLive when w.Live was not held by w.Session.
	WriteLock(ctx context.Context, w LockWrite) (uint64, error)
	// DeleteKey deletes key (nil when it was gone already).
	DeleteKey(ctx context.Context, key string) error
	// WaitChange returns once something under prefix/ changed after index,
	// or after max.
	WaitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error
	// Close closes what the backend opened.
	Close() error
}

// The errors a Backend answers (possibly wrapped) for what the recipe
// must tell apart.
var (
	ErrSessionGone = errGone
	ErrCASLost     = errCASLost
	ErrNotLive     = errNotLive
)

// An Entry is a key of a Listing.
type Entry struct {
	Key   string
	Value []byte
	// Owner is the token of the session holding the key ("" for none):
	// Consul's Session, etcd's lease.
	Owner string
	// ModIndex is the index of the key's last write: Consul's
	// ModifyIndex, etcd's ModRevision. CAS compares it.
	ModIndex uint64
	// LockIndex is the key's own counter, restarting with each new key:
	// Consul's LockIndex, etcd's Version.
	LockIndex uint64
}

// A Listing is every key under a prefix at one index.
type Listing struct {
	Index   uint64 // the backend's index at the read (to wait for a change after it)
	Entries map[string]Entry
}

// A LockWrite is a write of the lock key.
type LockWrite struct {
	Key   string
	Value []byte
	// CAS: write only if the key's ModIndex is still Index (0: only if it
	// does not exist).
	CAS   bool
	Index uint64
	// Live, if not "", is a key that Session must hold for the write to
	// happen.
	Live, Session string
}

// On is a Semaphore on b, with o.
func On(b Backend, o Options) (*Semaphore, error) {
	s, err := newSemaphore(backendStore{b}, o)
	if err != nil {
		return nil, err
	}
	s.now = b.Now
	return s, nil
}

// ConsulBackend is the Backend Consul uses: the agent at addr through hc
// (as Consul's arguments).
func ConsulBackend(addr string, hc *http.Client) (Backend, error) {
	s, err := Consul(addr, hc, Options{})
	if err != nil {
		return nil, err
	}
	return storeBackend{s.st}, nil
}

// EtcdBackend is the Backend Etcd uses, on c.
func EtcdBackend(c *clientv3.Client) (Backend, error) {
	s, err := Etcd(c, Options{})
	if err != nil {
		return nil, err
	}
	return storeBackend{s.st}, nil
}

// backendStore is a Backend as a store.
type backendStore struct{ b Backend }

func (s backendStore) timing() Timing { return s.b.Timing() }
func (s backendStore) close() error   { return s.b.Close() }
func (s backendStore) createSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (string, time.Duration, error) {
	return s.b.CreateSession(ctx, ttl, release, lockDelay)
}
func (s backendStore) renewSession(ctx context.Context, tok string) error {
	return s.b.RenewSession(ctx, tok)
}
func (s backendStore) destroySession(ctx context.Context, tok string) error {
	return s.b.DestroySession(ctx, tok)
}
func (s backendStore) putContender(ctx context.Context, key, tok string, bound bool) (bool, error) {
	return s.b.PutContender(ctx, key, tok, bound)
}
func (s backendStore) list(ctx context.Context, prefix string, stale bool) (listing, error) {
	l, err := s.b.List(ctx, prefix, stale)
	out := listing{Index: l.Index, Entries: make(map[string]entry, len(l.Entries))}
	for k, e := range l.Entries {
		out.Entries[k] = entry(e)
	}
	return out, err
}
func (s backendStore) writeLock(ctx context.Context, w lockWrite) (uint64, error) {
	return s.b.WriteLock(ctx, LockWrite{Key: w.key, Value: w.value, CAS: w.cas, Index: w.index, Live: w.live, Session: w.session})
}
func (s backendStore) deleteKey(ctx context.Context, key string) error {
	return s.b.DeleteKey(ctx, key)
}
func (s backendStore) waitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error {
	return s.b.WaitChange(ctx, prefix, index, max)
}

// storeBackend is a store of this package as a Backend.
type storeBackend struct{ st store }

func (b storeBackend) Timing() Timing { return b.st.timing() }
func (b storeBackend) Now() time.Time { return time.Now() }
func (b storeBackend) Close() error   { return b.st.close() }
func (b storeBackend) CreateSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (string, time.Duration, error) {
	return b.st.createSession(ctx, ttl, release, lockDelay)
}
func (b storeBackend) RenewSession(ctx context.Context, tok string) error {
	return b.st.renewSession(ctx, tok)
}
func (b storeBackend) DestroySession(ctx context.Context, tok string) error {
	return b.st.destroySession(ctx, tok)
}
func (b storeBackend) PutContender(ctx context.Context, key, tok string, bound bool) (bool, error) {
	return b.st.putContender(ctx, key, tok, bound)
}
func (b storeBackend) List(ctx context.Context, prefix string, stale bool) (Listing, error) {
	l, err := b.st.list(ctx, prefix, stale)
	out := Listing{Index: l.Index, Entries: make(map[string]Entry, len(l.Entries))}
	for k, e := range l.Entries {
		out.Entries[k] = Entry(e)
	}
	return out, err
}
func (b storeBackend) WriteLock(ctx context.Context, w LockWrite) (uint64, error) {
	return b.st.writeLock(ctx, lockWrite{key: w.Key, value: w.Value, cas: w.CAS, index: w.Index, live: w.Live, session: w.Session})
}
func (b storeBackend) DeleteKey(ctx context.Context, key string) error {
	return b.st.deleteKey(ctx, key)
}
func (b storeBackend) WaitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error {
	return b.st.waitChange(ctx, prefix, index, max)
}
