package consulsem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is a Semaphore on etcd v3 through c (which the caller keeps and
// closes). The recipe maps onto etcd as: session = lease (Grant,
// KeepAliveOnce, Revoke); contender key bound to it = a key put with the
// lease, only if absent; listing = a linearizable range read of prefix/
// (serializable with StaleReads); check-and-set = a transaction comparing
// the lock key's ModRevision, and that the contender key exists with the
// acquirer's lease; blocking query = a watch from the listing's revision.
func Etcd(c *clientv3.Client, o Options) (*Semaphore, error) {
	if c == nil {
		return nil, errors.New("consulsem: Etcd: no client")
	}
	return newSemaphore(&etcdStore{c: c}, o)
}

type etcdStore struct {
	c *clientv3.Client
}

func (e *etcdStore) timing() Timing { return etcdTiming }
func (e *etcdStore) close() error   { return nil }

// token is a lease id as a token: 16 hex digits.
func token(id clientv3.LeaseID) string { return fmt.Sprintf("%016x", int64(id)) }

func leaseID(tok string) (clientv3.LeaseID, error) {
	n, err := strconv.ParseUint(tok, 16, 64)
	if err != nil || len(tok) != 16 {
		return 0, fmt.Errorf("token %q: want an etcd lease id, 16 hex digits", tok)
	}
	return clientv3.LeaseID(n), nil
}

// createSession: Grant of ttl rounded up to whole seconds; etcd raises it
// to its floor, and the answer says the TTL granted.
func (e *etcdStore) createSession(ctx context.Context, ttl time.Duration, _ bool, _ time.Duration) (string, time.Duration, error) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	g, err := e.c.Grant(ctx, secs)
	if err != nil {
		return "", 0, err
	}
	return token(g.ID), time.Duration(g.TTL) * time.Second, nil
}

// renewSession: KeepAliveOnce; ErrLeaseNotFound (or a TTL of 0) when the
// lease is gone.
func (e *etcdStore) renewSession(ctx context.Context, tok string) error {
	id, err := leaseID(tok)
	if err != nil {
		return errGone
	}
	r, err := e.c.KeepAliveOnce(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return errGone
	}
	if err != nil {
		return err
	}
	if r.TTL <= 0 {
		return errGone
	}
	return nil
}

// destroySession: Revoke, which deletes the keys bound to the lease.
func (e *etcdStore) destroySession(ctx context.Context, tok string) error {
	id, err := leaseID(tok)
	if err != nil {
		return nil
	}
	_, err = e.c.Revoke(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

// putContender: Txn(If(CreateRevision(key) = 0)).Then(Put(key, lease)).
// A put with a lease that is gone fails with ErrLeaseNotFound: refused.
func (e *etcdStore) putContender(ctx context.Context, key, tok string, bound bool) (bool, error) {
	var opts []clientv3.OpOption
	if bound {
		id, err := leaseID(tok)
		if err != nil {
			return false, err
		}
		opts = append(opts, clientv3.WithLease(id))
	}
	r, err := e.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "", opts...)).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return r.Succeeded, nil
}

// list: Get(prefix/, WithPrefix()), linearizable (or serializable).
func (e *etcdStore) list(ctx context.Context, prefix string, stale bool) (listing, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if stale {
		opts = append(opts, clientv3.WithSerializable())
	}
	r, err := e.c.Get(ctx, prefix+"/", opts...)
	if err != nil {
		return listing{}, err
	}
	l := listing{Index: uint64(r.Header.Revision), Entries: map[string]entry{}}
	for _, kv := range r.Kvs {
		en := entry{Key: string(kv.Key), Value: kv.Value, ModIndex: uint64(kv.ModRevision), LockIndex: uint64(kv.Version)}
		if kv.Lease != 0 {
			en.Owner = token(clientv3.LeaseID(kv.Lease))
		}
		l.Entries[en.Key] = en
	}
	return l, nil
}

// writeLock: Txn(If(ModRevision(lock) = index, CreateRevision(live) > 0,
// LeaseValue(live) = session)).Then(Put(lock)).Else(Get(live)); the fence
// is the transaction's revision. The Else tells a lost CAS from a dead
// contender.
func (e *etcdStore) writeLock(ctx context.Context, w lockWrite) (uint64, error) {
	var cmps []clientv3.Cmp
	if w.cas {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(w.key), "=", int64(w.index)))
	}
	var id clientv3.LeaseID
	if w.live != "" {
		var err error
		if id, err = leaseID(w.session); err != nil {
			return 0, err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(w.live), ">", 0),
			clientv3.Compare(clientv3.LeaseValue(w.live), "=", id))
	}
	var els []clientv3.Op
	if w.live != "" {
		els = append(els, clientv3.OpGet(w.live))
	}
	r, err := e.c.Txn(ctx).If(cmps...).Then(clientv3.OpPut(w.key, string(w.value))).Else(els...).Commit()
	if err != nil {
		return 0, err
	}
	if r.Succeeded {
		return uint64(r.Header.Revision), nil
	}
	if w.live != "" {
		kvs := r.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || clientv3.LeaseID(kvs[0].Lease) != id {
			return 0, fmt.Errorf("%w: %s", errNotLive, w.live)
		}
	}
	return 0, fmt.Errorf("%w: %s", errCASLost, w.key)
}

// deleteKey: Delete.
func (e *etcdStore) deleteKey(ctx context.Context, key string) error {
	_, err := e.c.Delete(ctx, key)
	return err
}

// waitChange: Watch(prefix/, WithPrefix(), WithRev(index+1)) until its
// first event, or max.
func (e *etcdStore) waitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), max)
	defer cancel()
	wch := e.c.Watch(wctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(int64(index)+1))
	select {
	case <-wch:
	case <-wctx.Done():
	}
	return ctx.Err()
}
