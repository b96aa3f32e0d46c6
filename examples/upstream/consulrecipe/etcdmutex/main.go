// Command etcdmutex serves lockprover's process protocol for Consul's
// semaphore (docs/protocol.md, "Consul's semaphore") with etcd's
// go.etcd.io/etcd/client/v3/concurrency Mutex, called through its public
// API and unchanged: a mutex (limit 1) on etcd. One process is one
// lockprover client of one prefix.
//
//	lockprover validate-impl --kind consul-semaphore --backend etcd --impl /tmp/etcdmutex
//
// Each acquire grants a lease of its own, of the TTL asked for in whole
// seconds, rounded up (Grant; the TTL etcd grants is said as ttl_ms), and
// makes a concurrency.Session on it (NewSession with WithLease), a Mutex
// on the prefix (NewMutex(session, name): its keys are name/<lease id in
// hex>), and calls TryLock. The token is the lease ID (%016x); the fence
// is the Mutex's Header().Revision, the revision of the transaction that
// put its key, which is the grant's (a Mutex is owned by the key of least
// create revision, so grants take effect in the order of their keys'
// revisions).
//
// NewSession always starts a KeepAlive of the lease (whether it granted
// the lease or was given it with WithLease), which renews it every third
// of its TTL for as long as the process lives and reaches etcd. Beside
// lockprover's refreshes that would keep every lease alive past the
// refreshes lockprover asked for; the adapter ends it at once with the
// session's Orphan() ("ends the refresh for the session lease"), before
// TryLock, so that the lease lives exactly as lockprover's refreshes keep
// it. --keepalive leaves the library's KeepAlive running, as a user of
// NewSession gets it.
//
// --wait D calls Lock, bounded by D, instead of TryLock: an acquire that
// waits for the holder, as a user of Lock does (and as Jepsen's etcd 3.4.3
// lock test did). A Lock that runs out of D is acquire_fail full (it
// deletes its key; the lease is revoked too); its ErrSessionExpired (the
// lease, and with it the key, gone while it waited) is a definite
// acquire_fail session-expired; another error is an unknown outcome.
//
// A limit other than 1 is refused as a definite unsupported. TryLock's
// ErrLocked is acquire_fail full; another error of TryLock is an unknown
// outcome (its transaction may have put the key); an error of Grant or
// NewSession is definite (no key was put). refresh is the client's
// KeepAliveOnce (ErrLeaseNotFound is expired); verify is a transaction
// If(mutex.IsOwner()), the library's own test of ownership; release is
// Unlock, then the session's Close (which revokes the lease:
// ErrLeaseNotFound is expired). Whatever an acquire that was not granted
// made is revoked again. A refresh, verify or release of a token this
// process never granted answers expired or held:false without a call.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/lockprover/lockprover/examples/upstream/consulrecipe/protoloop"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

func main() {
	keepAlive := flag.Bool("keepalive", false, "leave the concurrency.Session's own KeepAlive of each lease running")
	wait := flag.Duration("wait", 0, "call Lock, bounded by this long, instead of TryLock (0: TryLock)")
	flag.Parse()
	var cli *clientv3.Client
	open := func(in protoloop.Init) (protoloop.Lock, error) {
		if in.Backend != "etcd" {
			return nil, &protoloop.Definite{Code: "unsupported", Err: fmt.Errorf("backend %q: etcd's concurrency package speaks to etcd only", in.Backend)}
		}
		// New dials lazily (no DialTimeout: no blocking dial), so that
		// init answers at once; each call has its own deadline.
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + in.Addr}, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		cli = c
		return &adapter{cli: c, name: in.Name, keepAlive: *keepAlive, wait: *wait, held: map[string]*hold{}}, nil
	}
	err := protoloop.Serve(os.Stdin, os.Stdout, open)
	if cli != nil {
		cli.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdmutex: %v\n", err)
		os.Exit(1)
	}
}

// adapter is the library's Mutex on one prefix, one lease per acquire.
type adapter struct {
	cli       *clientv3.Client
	name      string
	keepAlive bool
	wait      time.Duration // Lock bounded by it instead of TryLock, if not 0

	mu   sync.Mutex
	held map[string]*hold // by token: every grant of this process
}

// hold is one grant: its lease, session and mutex.
type hold struct {
	lease clientv3.LeaseID
	sess  *concurrency.Session
	mutex *concurrency.Mutex
}

func (a *adapter) grant(token string) *hold {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[token]
}

func (a *adapter) Acquire(ctx context.Context, limit int, ttl time.Duration) (protoloop.Grant, error) {
	if limit != 1 {
		return protoloop.Grant{}, &protoloop.Definite{Code: "unsupported", Err: fmt.Errorf("limit %d: etcd's concurrency.Mutex is a mutex (limit 1)", limit)}
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	lease, err := a.cli.Grant(ctx, secs)
	if err != nil {
		return protoloop.Grant{}, &protoloop.Definite{Code: "lease", Err: fmt.Errorf("granting the lease: %w", err)}
	}
	sess, err := concurrency.NewSession(a.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(context.Background()))
	if err != nil {
		a.revoke(lease.ID)
		return protoloop.Grant{}, &protoloop.Definite{Code: "session", Err: err}
	}
	if !a.keepAlive {
		sess.Orphan()
	}
	m := concurrency.NewMutex(sess, a.name)
	if a.wait > 0 {
		if err := a.lock(ctx, m); err != nil {
			sess.Orphan()
			a.revoke(lease.ID)
			return protoloop.Grant{}, err
		}
	} else if err := m.TryLock(ctx); err != nil {
		// Not granted (or not known to be): the lease goes again, and
		// with it the mutex's key.
		sess.Orphan()
		a.revoke(lease.ID)
		if errors.Is(err, concurrency.ErrLocked) {
			return protoloop.Grant{}, protoloop.ErrFull
		}
		return protoloop.Grant{}, err
	}
	token := fmt.Sprintf("%016x", int64(lease.ID))
	a.mu.Lock()
	a.held[token] = &hold{lease: lease.ID, sess: sess, mutex: m}
	a.mu.Unlock()
	fence := uint64(m.Header().Revision)
	return protoloop.Grant{Token: token, Fence: &fence, TTL: time.Duration(lease.TTL) * time.Second}, nil
}

// lock calls m's Lock bounded by a.wait (--wait), saying what its error
// means for the acquire: running out of the wait is full, a session
// expired while waiting definite, any other error unknown.
func (a *adapter) lock(ctx context.Context, m *concurrency.Mutex) error {
	wctx, cancel := context.WithTimeout(ctx, a.wait)
	defer cancel()
	err := m.Lock(wctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, concurrency.ErrSessionExpired):
		return &protoloop.Definite{Code: "session-expired", Err: err}
	case wctx.Err() != nil && ctx.Err() == nil:
		return protoloop.ErrFull
	}
	return err
}

// revoke ends a lease an acquire made and did not hold with (best
// effort: it expires otherwise).
func (a *adapter) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.cli.Revoke(ctx, id); err != nil {
		fmt.Fprintf(os.Stderr, "etcdmutex: revoking lease %016x: %v\n", int64(id), err)
	}
}

func (a *adapter) Refresh(ctx context.Context, token string) (time.Duration, error) {
	h := a.grant(token)
	if h == nil {
		return 0, protoloop.ErrExpired
	}
	resp, err := a.cli.KeepAliveOnce(ctx, h.lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return 0, protoloop.ErrExpired
	case err != nil:
		return 0, err
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

func (a *adapter) Verify(ctx context.Context, token string) (bool, error) {
	h := a.grant(token)
	if h == nil {
		return false, nil
	}
	resp, err := a.cli.Txn(ctx).If(h.mutex.IsOwner()).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (a *adapter) Release(ctx context.Context, token string) error {
	h := a.grant(token)
	if h == nil {
		return protoloop.ErrExpired
	}
	if err := h.mutex.Unlock(ctx); err != nil {
		return err
	}
	err := h.sess.Close()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return protoloop.ErrExpired
	}
	return err
}
