package consulsim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
)

// The writes of keys, as the recipe makes them.

// errInvalidSession is Consul's answer to ?acquire with a session that
// does not exist (a 500: the KVS apply failed).
var errInvalidSession = errors.New("PUT /v1/kv: 500 Internal Server Error: invalid session")

// putContender creates key, bound to session tok if bound. Consul:
// ?acquire (bound) takes the key if no session holds it (LockIndex + 1;
// it exists or not), answers true if tok holds it already (the value
// written again, LockIndex kept) and false if another session does; a
// session that does not exist is an error; a plain PUT (not bound) writes
// the key, keeping its session, its LockIndex set to the request's, 0. etcd: a transaction that
// puts the key (with the lease, if bound) only if it does not exist; a
// lease that does not exist fails it (false).
func (s *server) putContender(key, tok string, bound bool) (bool, error) {
	old := s.keys[key]
	if s.kind == Etcd {
		if old != nil {
			return false, nil
		}
		if bound && s.sessions[tok] == nil {
			return false, nil // ErrLeaseNotFound
		}
		e := &kv{lockIndex: 1}
		if bound {
			e.owner = tok
		}
		s.index++
		s.put(key, e)
		return true, nil
	}
	// Consul checks a lock-delay before the Raft apply (kvsPreApply): a
	// refused ?acquire answers false and takes no index, whether or not
	// the session exists.
	if bound && s.delayed(key) {
		s.w.tracef("server: ?acquire of %s refused: lock-delay until %v", key, time.Duration(s.delays[key]))
		return false, nil
	}
	s.index++
	e := &kv{}
	if old != nil {
		e.owner = old.owner
	}
	if bound {
		if old != nil {
			e.lockIndex = old.lockIndex
		}
		switch {
		case s.sessions[tok] == nil:
			return false, errInvalidSession
		case e.owner != "" && e.owner != tok:
			return false, nil
		case e.owner == "":
			e.owner = tok
			e.lockIndex++
		}
	}
	s.put(key, e)
	return true, nil
}

// writeLock writes the lock key as w says: the check that w.Live is held
// by w.Session first (Consul: the txn's check-session; etcd: compares on
// its CreateRevision and lease), then the check on the lock key's index
// (0: it must not exist). A failed check writes nothing (Consul's failed
// transaction still takes a Raft index). It answers the lock key's index
// after the write: the write's, or on Consul the key's old ModifyIndex if
// the write changed nothing.
func (s *server) writeLock(w consulsem.LockWrite) (uint64, error) {
	if s.kind == Consul {
		s.index++
	}
	if w.Live != "" {
		if e := s.keys[w.Live]; e == nil || e.owner != w.Session {
			return 0, fmt.Errorf("%w: %s", consulsem.ErrNotLive, w.Live)
		}
	}
	old := s.keys[w.Key]
	if w.CAS {
		if w.Index == 0 && old != nil || w.Index != 0 && (old == nil || old.mod != w.Index) {
			return 0, fmt.Errorf("%w: %s", consulsem.ErrCASLost, w.Key)
		}
	}
	e := &kv{value: slices.Clone(w.Value), lockIndex: 1}
	if s.kind == Etcd {
		s.index++
		if old != nil {
			e.lockIndex = old.lockIndex + 1
		}
	} else {
		// Consul's set and cas keep the key's session; its LockIndex is
		// the request's, 0.
		e.lockIndex = 0
		if old != nil {
			e.owner = old.owner
		}
	}
	s.put(w.Key, e)
	return s.keys[w.Key].mod, nil
}

// deleteKey deletes key. Consul takes a Raft index even if it does not
// exist; etcd takes a revision only if it does.
func (s *server) deleteKey(key string) {
	if s.kind == Consul {
		s.index++
	}
	if s.keys[key] == nil {
		return
	}
	if s.kind == Etcd {
		s.index++
	}
	s.del(key)
}
