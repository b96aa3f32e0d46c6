package consulsim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/sched"
)

// A server is the simulated Consul agent or etcd server: its keys, its
// sessions (leases), its index, and the calls it holds.
type server struct {
	w    *World
	kind Kind
	down bool
	gen  int   // counts crashes, so that a restart's timer knows its own
	upAt int64 // when it last came up: etcd's sweep runs every 500 ms from then

	// index is Consul's Raft index (every write takes one, whether or not
	// it changes anything) or etcd's revision (every write that changes a
	// key takes one). kvIndex is Consul's KV table index: the last write
	// that changed a key.
	index, kvIndex uint64
	keys           map[string]*kv
	// changed is each key's last change (put or delete), kept after a
	// delete: Consul's tombstones, etcd's history, which listings and
	// waits look at.
	changed  map[string]uint64
	sessions map[string]*session
	ids      uint64 // sessions ever created: their ids
	// sesIndex is Consul's sessions table index: the last create or end
	// of a session (a session info's X-Consul-Index).
	sesIndex uint64
	// delays are Consul's lock-delays: the keys whose holder's session was
	// invalidated with a lock-delay, and until when ?acquire refuses them
	// (virtual time); delayGen moves on when a restart forgets them, so
	// that the drops scheduled before do nothing.
	delays   map[string]int64
	delayGen uint64

	watches  []*watch
	inflight []*call // calls applied or held, their answers not yet sent
}

// A kv is a key. lockIndex is Consul's LockIndex, etcd's Version;
// create is its CreateIndex (the index that made it, kept while it
// lives), flags Consul's opaque Flags (the HTTP API's ?flags).
type kv struct {
	value          []byte
	owner          string
	mod, lockIndex uint64
	create         uint64
	flags          uint64
}

// A session is a Consul session or an etcd lease.
type session struct {
	id      string
	name    string        // Consul's Name, as created through the HTTP API
	ttlText string        // Consul's TTL as the create request gave it ("" for none)
	create  uint64        // Consul's CreateIndex
	ttl     time.Duration // granted
	release bool          // Consul's Behavior release
	delay   time.Duration // Consul's LockDelay, as created
	timer   *sched.Timer  // its invalidation (Consul) or the sweep that revokes it (etcd)
	expiry  int64         // etcd: the lease's deadline
	renews  []*call       // etcd: renewals of an expired lease, waiting for its revocation
}

// A watch is a wait for a change under prefix after index. An etcd
// watch from a revision the server has passed is unsynced until the
// server's next look at its unsynced watchers (syncEvery): only then does
// it see the events it missed, or any since.
type watch struct {
	c        *call
	prefix   string
	index    uint64
	timer    *sched.Timer
	unsynced bool
	// api, if set, is a blocking query of the HTTP API (api.go): it
	// looks at the keys it matches, and ready says whether it returns.
	api *apiWatch
}

// syncEvery is how often etcd's watchable store catches its unsynced
// watchers up (syncWatchersLoop).
const syncEvery = 100 * time.Millisecond

// consulFirstIndex is the Raft index a fresh Consul agent has reached
// before a client's first write (its own registrations); etcd's revision
// starts at 1.
const consulFirstIndex = 12

// EtcdSweep is how often etcd's lessor looks for expired leases: a lease
// is revoked at its first look after the deadline. Exported for the
// differential (adapters/conform/consulconform), whose sleeps on etcd
// outlast a short lease's TTL by it.
const EtcdSweep = 500 * time.Millisecond

func newServer(w *World) *server {
	s := &server{w: w, kind: w.o.Kind}
	s.reset()
	return s
}

// reset empties the server, as a fresh one.
func (s *server) reset() {
	s.keys, s.changed, s.sessions = map[string]*kv{}, map[string]uint64{}, map[string]*session{}
	s.forgetDelays()
	s.index, s.kvIndex, s.sesIndex = consulFirstIndex, 0, 0
	if s.kind == Etcd {
		s.index = 1
	}
}

// forget drops c from the calls in flight.
func (s *server) forget(c *call) {
	if i := slices.Index(s.inflight, c); i >= 0 {
		s.inflight = slices.Delete(s.inflight, i, i+1)
	}
}

// cut drops the calls of p's that the server has applied or holds, their
// connection closed (ForceClose): an answer on its way is lost, a wait
// for a change or a renewal held for a revocation ends unanswered.
func (s *server) cut(p *Process) {
	var cut []*call
	for _, c := range s.inflight {
		if c.p == p {
			cut = append(cut, c)
		}
	}
	for _, c := range cut {
		s.forget(c)
		c.arrived = true
		s.watches = slices.DeleteFunc(s.watches, func(wt *watch) bool {
			if wt.c == c {
				wt.timer.Cancel()
			}
			return wt.c == c
		})
		for _, ses := range s.sessions {
			ses.renews = slices.DeleteFunc(ses.renews, func(r *call) bool { return r == c })
		}
	}
}

// under returns the keys under prefix/ that changed once (live or
// deleted), sorted.
func (s *server) under(prefix string) []string {
	var ks []string
	for k := range s.changed {
		if strings.HasPrefix(k, prefix+"/") {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// owned returns the keys session id holds, sorted.
func (s *server) owned(id string) []string {
	var ks []string
	for k, e := range s.keys {
		if e.owner == id {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// put writes key at the current index. Consul skips a write that
// changes nothing (the same value, session and LockIndex): the key keeps
// its ModifyIndex, the KV table its index, and no wait wakes.
func (s *server) put(key string, e *kv) {
	old := s.keys[key]
	if s.kind == Consul && old != nil &&
		old.owner == e.owner && old.lockIndex == e.lockIndex && old.flags == e.flags && string(old.value) == string(e.value) {
		return
	}
	e.create = s.index
	if old != nil {
		e.create = old.create
	}
	e.mod = s.index
	s.keys[key] = e
	s.touch(key)
}

// del deletes key at the current index.
func (s *server) del(key string) {
	delete(s.keys, key)
	s.touch(key)
}

// touch records a change of key at the current index and wakes the
// waits it ends.
func (s *server) touch(key string) {
	s.changed[key], s.kvIndex = s.index, s.index
	kept := s.watches[:0]
	var woken []*watch
	for _, wt := range s.watches {
		if wt.api != nil {
			if wt.api.matches(key) && wt.api.ready(s) {
				woken = append(woken, wt)
			} else {
				kept = append(kept, wt)
			}
			continue
		}
		if !wt.unsynced && strings.HasPrefix(key, wt.prefix+"/") && s.changedSince(wt.prefix, wt.index) {
			woken = append(woken, wt)
		} else {
			kept = append(kept, wt)
		}
	}
	clear(s.watches[len(kept):])
	s.watches = kept
	for _, wt := range woken {
		wt.timer.Cancel()
		if wt.api != nil {
			s.answerWatch(wt)
			continue
		}
		s.w.reply(wt.c, result{})
	}
}

// listIndex is the index a listing of prefix/ answers: Consul's
// X-Consul-Index (the last change under the prefix, tombstones included;
// the KV table's index if none; at least 1), etcd's header revision.
func (s *server) listIndex(prefix string) uint64 {
	if s.kind == Etcd {
		return s.index
	}
	var max uint64
	for _, k := range s.under(prefix) {
		max = maxOf(max, s.changed[k])
	}
	if max == 0 {
		max = s.kvIndex
	}
	return maxOf(max, 1)
}

func maxOf(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// changedSince says whether a wait for a change under prefix/ after
// index returns: Consul's blocking query once the listing's index is
// past index, etcd's watch from index+1 once an event under the prefix
// has a later revision.
func (s *server) changedSince(prefix string, index uint64) bool {
	if s.kind == Consul {
		return s.listIndex(prefix) > index
	}
	for _, k := range s.under(prefix) {
		if s.changed[k] > index {
			return true
		}
	}
	return false
}

// list is a listing of prefix/.
func (s *server) list(prefix string) consulsem.Listing {
	l := consulsem.Listing{Index: s.listIndex(prefix), Entries: map[string]consulsem.Entry{}}
	for _, k := range s.under(prefix) {
		if e := s.keys[k]; e != nil {
			l.Entries[k] = consulsem.Entry{Key: k, Value: slices.Clone(e.value), Owner: e.owner, ModIndex: e.mod, LockIndex: e.lockIndex}
		}
	}
	return l
}

// waitChange answers c once something under prefix/ changed after index,
// or after max: a Consul blocking query at once if the prefix's index is
// past index; an etcd watch from a revision the server has passed at its
// next sync.
func (s *server) waitChange(c *call, prefix string, index uint64, max time.Duration) {
	wt := &watch{c: c, prefix: prefix, index: index}
	if s.kind == Consul && s.changedSince(prefix, index) {
		s.w.reply(c, result{})
		return
	}
	wt.timer = s.w.sched.After(max, func() { s.unwatch(wt) })
	s.watches = append(s.watches, wt)
	if s.kind == Etcd && index+1 <= s.index {
		wt.unsynced = true
		k := (s.w.now - s.upAt) / int64(syncEvery)
		s.w.sched.At(s.upAt+(k+1)*int64(syncEvery), func() {
			wt.unsynced = false
			if s.changedSince(prefix, index) {
				wt.timer.Cancel()
				s.unwatch(wt)
			}
		})
	}
}

// unwatch ends watch wt, if it waits still, answering its call.
func (s *server) unwatch(wt *watch) {
	if i := slices.Index(s.watches, wt); i >= 0 {
		s.watches = slices.Delete(s.watches, i, i+1)
		s.w.reply(wt.c, result{})
	}
}

// newID is a new session's id: a UUID (Consul) or a lease id, 16 hex
// digits (etcd), drawn from a counter, never the same twice in a World.
func (s *server) newID() string {
	s.ids++
	if s.kind == Etcd {
		return fmt.Sprintf("%016x", 0x694d000000000000|s.ids)
	}
	h := mix(s.ids)
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h>>32), uint16(h>>16), uint16(h)&0xfff, s.ids>>48&0xfff, s.ids&0xffffffffffff)
}

// mix is splitmix64's finaliser.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
