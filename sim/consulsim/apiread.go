package consulsim

import (
	"slices"
	"strings"
	"time"
)

// Reads of the HTTP API: one key or a prefix's, at once or as a blocking
// query (agent/blockingquery): a query of ?index N returns once the
// answer's index is past N, re-read whenever a key it reads changes, or
// once its ?wait has passed.

// An apiWatch is a read of the KV store: key (a prefix with recurse),
// and, while it blocks, the index it waits to pass.
type apiWatch struct {
	key     string
	recurse bool
	min     uint64
	// notFound: the key was missing at the query's last look (a missing
	// key's query then waits for it to appear, blockingquery's notFound).
	notFound bool
	gen      int // the server's crashes when it was made
}

// matches says whether a change of key may change the read.
func (q *apiWatch) matches(key string) bool {
	if q.recurse {
		return strings.HasPrefix(key, q.key)
	}
	return key == q.key
}

// read is the read's answer now: a key's entry and its ModifyIndex, or
// 404 and the KV table's index; a prefix's entries and the last change
// under it, tombstones included (the KV table's index if none), at
// least 1.
func (q *apiWatch) read(s *server) APIReply {
	rep := APIReply{Status: 200}
	if !q.recurse {
		e := s.keys[q.key]
		if e == nil {
			rep.NotFound, rep.Index = true, max(s.kvIndex, 1)
			return rep
		}
		rep.Entries, rep.Index = []KVEntry{e.entry(q.key)}, e.mod
		return rep
	}
	var ks []string
	var last uint64
	for k, at := range s.changed {
		if strings.HasPrefix(k, q.key) {
			last = max(last, at)
			if s.keys[k] != nil {
				ks = append(ks, k)
			}
		}
	}
	slices.Sort(ks)
	for _, k := range ks {
		rep.Entries = append(rep.Entries, s.keys[k].entry(k))
	}
	if last == 0 {
		last = s.kvIndex
	}
	rep.Index, rep.NotFound = max(last, 1), len(ks) == 0
	return rep
}

func (e *kv) entry(key string) KVEntry {
	return KVEntry{Key: key, Value: slices.Clone(e.value), Flags: e.flags, Session: e.owner, LockIndex: e.lockIndex, CreateIndex: e.create, ModifyIndex: e.mod}
}

// ready says whether a blocking read returns now: its index is past the
// one it waits for, a missing key's only once it appears.
func (q *apiWatch) ready(s *server) bool {
	rep := q.read(s)
	if !q.recurse && rep.NotFound {
		if q.notFound {
			q.min = max(q.min, rep.Index)
		}
		q.notFound = true
	}
	return rep.Index > q.min
}

// apiGet answers a read, at once or once its blocking query returns.
func (s *server) apiGet(c *call, r APIRequest) {
	q := &apiWatch{key: r.Key, recurse: r.Recurse, min: r.Index, gen: s.gen}
	if r.Index == 0 || q.ready(s) {
		s.w.reply(c, result{api: q.read(s)})
		return
	}
	wait := r.Wait
	if wait <= 0 {
		wait = apiDefaultWait
	}
	wait = min(wait, apiMaxWait)
	wt := &watch{c: c, api: q}
	wt.timer = s.w.sched.After(wait, func() {
		if i := slices.Index(s.watches, wt); i >= 0 {
			s.watches = slices.Delete(s.watches, i, i+1)
			s.answerWatch(wt)
		}
	})
	s.watches = append(s.watches, wt)
}

// answerWatch answers a blocking read that returns, with what it reads
// once the write that woke it is whole (a session's end deletes its keys
// one by one, at one index).
func (s *server) answerWatch(wt *watch) {
	s.w.sched.After(0, func() {
		if s.gen != wt.api.gen || s.down {
			return // the server crashed meanwhile: the call failed then
		}
		s.w.reply(wt.c, result{api: wt.api.read(s)})
	})
}

// blocking is how long the server may hold a read of r.
func (r APIRequest) blocking() time.Duration {
	if r.Op != KVGet || r.Index == 0 {
		return 0
	}
	if r.Wait <= 0 {
		return apiDefaultWait
	}
	return min(r.Wait, apiMaxWait)
}
