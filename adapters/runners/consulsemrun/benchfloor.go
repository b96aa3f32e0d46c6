package consulsemrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A floorClient sends, for each operation of the recipe, the round trips
// it needs, raw, with no lock library: the bench's floor. On an
// uncontended semaphore, an acquire needs a session, a contender key bound
// to it, a listing of the prefix (to count the live holders) and the
// lock key's check-and-set with the check that the session still holds
// its contender key; a refresh, the session's renewal; a release, the
// check-and-set taking the holder out at the index its grant left (a
// lease knows it: a lost check-and-set would read and try again), the
// contender key's delete and the session's end.
type floorClient interface {
	acquire(ctx context.Context, prefix string) (floorLease, error)
	refresh(ctx context.Context, l floorLease) error
	release(ctx context.Context, prefix string, l floorLease) error
	// describe says what each floor sends, for the report.
	describe() [][2]string
}

// A floorLease is what the floor remembers of its grant: the session, the
// index the grant left on the lock key, and the lock key's value without
// it.
type floorLease struct {
	tok   string
	index uint64
	rest  []byte
}

// floorGrant decides a grant from a listing: the lock key's value (nil
// when it does not exist) and each contender key's owner. It answers the
// lock key's value with tok among the live holders, and without it; an
// error when every slot is held.
func floorGrant(prefix string, lock []byte, owners map[string]string, tok string) (value, rest []byte, err error) {
	var v struct {
		Limit   int
		Holders map[string]bool
	}
	if lock != nil {
		if err := json.Unmarshal(lock, &v); err != nil {
			return nil, nil, fmt.Errorf("the floor's lock key: %w", err)
		}
	}
	live := map[string]bool{}
	for h := range v.Holders {
		if owners[prefix+"/"+h] == h {
			live[h] = true
		}
	}
	if len(live) >= benchLimit {
		return nil, nil, fmt.Errorf("the floor's semaphore is full: %d holders alive", len(live))
	}
	v.Limit, v.Holders = benchLimit, live
	rest, _ = json.Marshal(v)
	live[tok] = true
	value, _ = json.Marshal(v)
	return value, rest, nil
}

// consulFloor is the floor on Consul's HTTP API, through net/http.
type consulFloor struct {
	base string
	hc   *http.Client
}

// call sends a request and decodes its 200 answer into out (if not nil).
func (f consulFloor) call(ctx context.Context, method, path string, body []byte, out any) error {
	return consul.Call(ctx, f.hc, method, f.base, path, body, out)
}

// writeLock is the transaction that writes the lock key: check that tok
// holds its contender key, then check-and-set the lock key at index. It
// answers the lock key's new ModifyIndex.
func (f consulFloor) writeLock(ctx context.Context, prefix, tok string, index uint64, value []byte) (uint64, error) {
	type kv struct {
		Verb, Key string
		Value     []byte `json:",omitempty"`
		Index     uint64 `json:",omitempty"`
		Session   string `json:",omitempty"`
	}
	body, _ := json.Marshal([]struct{ KV kv }{
		{kv{Verb: "check-session", Key: prefix + "/" + tok, Session: tok}},
		{kv{Verb: "cas", Key: prefix + "/.lock", Value: value, Index: index}}})
	var out struct {
		Results []struct{ KV struct{ ModifyIndex uint64 } }
	}
	if err := f.call(ctx, http.MethodPut, "/v1/txn", body, &out); err != nil {
		return 0, err
	}
	if len(out.Results) != 2 {
		return 0, fmt.Errorf("PUT /v1/txn: %d results", len(out.Results))
	}
	return out.Results[1].KV.ModifyIndex, nil
}

func (f consulFloor) acquire(ctx context.Context, prefix string) (floorLease, error) {
	var s struct{ ID string }
	body, _ := json.Marshal(map[string]any{"TTL": benchTTL.String(), "Behavior": "delete", "LockDelay": "0s", "NodeChecks": []string{}})
	if err := f.call(ctx, http.MethodPut, "/v1/session/create", body, &s); err != nil {
		return floorLease{}, err
	}
	var ok bool
	if err := f.call(ctx, http.MethodPut, "/v1/kv/"+prefix+"/"+s.ID+"?acquire="+url.QueryEscape(s.ID), nil, &ok); err != nil || !ok {
		return floorLease{}, errors.Join(err, errors.New("the floor's contender key was refused"))
	}
	var kvs []struct {
		Key, Session string
		Value        []byte
		ModifyIndex  uint64
	}
	if err := f.call(ctx, http.MethodGet, "/v1/kv/"+prefix+"/?recurse&consistent", nil, &kvs); err != nil {
		return floorLease{}, err
	}
	var lock []byte
	var index uint64
	owners := map[string]string{}
	for _, kv := range kvs {
		if kv.Key == prefix+"/.lock" {
			lock, index = kv.Value, kv.ModifyIndex
		} else {
			owners[kv.Key] = kv.Session
		}
	}
	value, rest, err := floorGrant(prefix, lock, owners, s.ID)
	if err != nil {
		return floorLease{}, err
	}
	index, err = f.writeLock(ctx, prefix, s.ID, index, value)
	return floorLease{tok: s.ID, index: index, rest: rest}, err
}

func (f consulFloor) refresh(ctx context.Context, l floorLease) error {
	return f.call(ctx, http.MethodPut, "/v1/session/renew/"+l.tok, nil, nil)
}

func (f consulFloor) release(ctx context.Context, prefix string, l floorLease) error {
	if _, err := f.writeLock(ctx, prefix, l.tok, l.index, l.rest); err != nil {
		return err
	}
	if err := f.call(ctx, http.MethodDelete, "/v1/kv/"+prefix+"/"+l.tok, nil, nil); err != nil {
		return err
	}
	return f.call(ctx, http.MethodPut, "/v1/session/destroy/"+l.tok, nil, nil)
}

func (consulFloor) describe() [][2]string {
	return [][2]string{
		{cfAcquire, "PUT /v1/session/create (TTL 1m, Behavior delete); PUT /v1/kv/<prefix>/<session>?acquire; GET /v1/kv/<prefix>/?recurse&consistent; PUT /v1/txn: check-session of the contender key, cas of the lock key"},
		{cfRefresh, "PUT /v1/session/renew/<session>"},
		{cfRelease, "PUT /v1/txn: check-session, cas of the lock key without the holder at the index its grant left; DELETE /v1/kv/<prefix>/<session>; PUT /v1/session/destroy/<session>"},
	}
}

// etcdFloor is the floor on etcd, through go.etcd.io/etcd/client/v3.
type etcdFloor struct{ c *clientv3.Client }

// writeLock puts the lock key if its ModRevision is still index and tok's
// lease still holds its contender key, answering the write's revision.
func (f etcdFloor) writeLock(ctx context.Context, prefix, tok string, index uint64, value []byte) (uint64, error) {
	id, ck, lk := etcdLeaseID(tok), prefix+"/"+tok, prefix+"/.lock"
	r, err := f.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(lk), "=", int64(index)),
		clientv3.Compare(clientv3.CreateRevision(ck), ">", 0), clientv3.Compare(clientv3.LeaseValue(ck), "=", id)).
		Then(clientv3.OpPut(lk, string(value))).Commit()
	if err == nil && !r.Succeeded {
		err = errors.New("the floor's write of the lock key was refused")
	}
	if err != nil {
		return 0, err
	}
	return uint64(r.Header.Revision), nil
}

// etcdLeaseID is the lease of a floor's token (16 hex digits).
func etcdLeaseID(tok string) clientv3.LeaseID {
	var id int64
	fmt.Sscanf(tok, "%x", &id)
	return clientv3.LeaseID(id)
}

func (f etcdFloor) acquire(ctx context.Context, prefix string) (floorLease, error) {
	g, err := f.c.Grant(ctx, int64(benchTTL.Seconds()))
	if err != nil {
		return floorLease{}, err
	}
	tok := fmt.Sprintf("%016x", int64(g.ID))
	ck := prefix + "/" + tok
	r, err := f.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(ck), "=", 0)).Then(clientv3.OpPut(ck, "", clientv3.WithLease(g.ID))).Commit()
	if err != nil || !r.Succeeded {
		return floorLease{}, errors.Join(err, errors.New("the floor's contender key was refused"))
	}
	list, err := f.c.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return floorLease{}, err
	}
	var lock []byte
	var index uint64
	owners := map[string]string{}
	for _, kv := range list.Kvs {
		if k := string(kv.Key); k == prefix+"/.lock" {
			lock, index = kv.Value, uint64(kv.ModRevision)
		} else if kv.Lease != 0 {
			owners[k] = fmt.Sprintf("%016x", kv.Lease)
		}
	}
	value, rest, err := floorGrant(prefix, lock, owners, tok)
	if err != nil {
		return floorLease{}, err
	}
	index, err = f.writeLock(ctx, prefix, tok, index, value)
	return floorLease{tok: tok, index: index, rest: rest}, err
}

func (f etcdFloor) refresh(ctx context.Context, l floorLease) error {
	r, err := f.c.KeepAliveOnce(ctx, etcdLeaseID(l.tok))
	if err == nil && r.TTL <= 0 {
		err = errors.New("the floor's lease is gone")
	}
	return err
}

func (f etcdFloor) release(ctx context.Context, prefix string, l floorLease) error {
	if _, err := f.writeLock(ctx, prefix, l.tok, l.index, l.rest); err != nil {
		return err
	}
	if _, err := f.c.Delete(ctx, prefix+"/"+l.tok); err != nil {
		return err
	}
	_, err := f.c.Revoke(ctx, etcdLeaseID(l.tok))
	return err
}

func (etcdFloor) describe() [][2]string {
	return [][2]string{
		{cfAcquire, "LeaseGrant (60 s); Txn: put the contender key with the lease if absent; Range of <prefix>/ (linearizable); Txn: if the lock key's ModRevision and the contender key's lease are as read, put the lock key"},
		{cfRefresh, "LeaseKeepAlive: one request on a stream (KeepAliveOnce)"},
		{cfRelease, "Txn: as F1's, at the revision its grant left, put the lock key without the holder; DeleteRange of the contender key; LeaseRevoke"},
	}
}
