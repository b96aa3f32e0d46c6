package consulsim

import (
	"fmt"
	"slices"
	"time"
)

// Sessions and leases: creation, renewal, their end (destroyed, or their
// TTL ran out), and what a restart does to them.

// consulTTLMax is the longest TTL Consul accepts.
const consulTTLMax = 24 * time.Hour

// consulMaxLockDelay is the longest lock-delay Consul applies
// (structs.MaxLockDelay): a longer one is cut to it when the session is
// invalidated.
const consulMaxLockDelay = 60 * time.Second

// create creates a session of ttl, with lock-delay delay on Consul (etcd
// has none: it is ignored): Consul refuses a TTL outside
// [session_ttl_min, 24h]; etcd rounds it up to whole seconds and raises it
// to its floor.
func (s *server) create(ttl time.Duration, release bool, delay time.Duration) (string, time.Duration, error) {
	ses := &session{ttl: ttl, release: release && s.kind == Consul}
	if s.kind == Consul {
		ses.delay = delay
	}
	if s.kind == Consul {
		if ttl < s.w.o.SessionTTLMin || ttl > consulTTLMax {
			return "", 0, fmt.Errorf("PUT /v1/session/create: 500 Internal Server Error: Invalid Session TTL '%d', must be between [%v=%v]",
				ttl, s.w.o.SessionTTLMin, consulTTLMax)
		}
		s.index++
		ses.id, ses.create, s.sesIndex = s.newID(), s.index, s.index
		ses.ttlText = ttl.String()
		s.sessions[ses.id] = ses
		s.armConsul(ses)
	} else {
		secs := (ttl + time.Second - 1) / time.Second * time.Second
		ses.ttl = max(secs, s.w.o.MinTTL)
		ses.id = s.newID()
		s.sessions[ses.id] = ses
		s.armEtcd(ses, s.w.now+int64(ses.ttl))
	}
	if ses.delay > 0 {
		s.w.tracef("server: session %s created, TTL %v, lock-delay %v", ses.id, ses.ttl, ses.delay)
	} else {
		s.w.tracef("server: session %s created, TTL %v", ses.id, ses.ttl)
	}
	return ses.id, ses.ttl, nil
}

// armConsul (re)starts a Consul session's TTL timer: 2 x TTL, or as
// Options.Decide says, between 1 and 2 x TTL.
func (s *server) armConsul(ses *session) {
	ses.timer.Cancel()
	if ses.ttl == 0 {
		return // a session of no TTL lives until destroyed
	}
	d := 2 * ses.ttl
	if i := s.w.base.Pick(5); i > 0 {
		d = ses.ttl + time.Duration(i-1)*ses.ttl/4
	}
	ses.timer = s.w.sched.After(d, func() {
		if s.sessions[ses.id] == ses {
			s.end(ses, fmt.Sprintf("invalidated: its TTL timer fired, %v after its last renewal", d))
		}
	})
}

// armEtcd gives an etcd lease its deadline, and the sweep that revokes it
// if it is not renewed: the first of the lessor's looks (every 500 ms
// since the server came up) at or after the deadline.
func (s *server) armEtcd(ses *session, expiry int64) {
	ses.timer.Cancel()
	ses.expiry = expiry
	k := (expiry - s.upAt + int64(EtcdSweep) - 1) / int64(EtcdSweep)
	ses.timer = s.w.sched.At(s.upAt+k*int64(EtcdSweep), func() {
		if s.sessions[ses.id] == ses && s.w.now >= ses.expiry {
			s.end(ses, "revoked: it expired")
		}
	})
}

// renew renews session id: gone (false) when it does not exist. An etcd
// lease past its deadline and not yet revoked holds the call until its
// revocation, and then answers gone (the lessor's Renew waits for it).
func (s *server) renew(c *call, id string) {
	ses := s.sessions[id]
	switch {
	case ses == nil:
		s.w.reply(c, result{ok: false})
	case s.kind == Consul:
		s.armConsul(ses)
		s.w.reply(c, result{ok: true})
	case s.w.now >= ses.expiry:
		ses.renews = append(ses.renews, c)
	default:
		s.armEtcd(ses, s.w.now+int64(ses.ttl))
		s.w.reply(c, result{ok: true})
	}
}

// destroy ends session id, if it exists (Consul takes a Raft index even
// if not).
func (s *server) destroy(id string) {
	if s.kind == Consul && s.sessions[id] == nil {
		s.index++
	}
	if ses := s.sessions[id]; ses != nil {
		s.end(ses, "destroyed")
	}
}

// end ends a session: on Consul, at a new index, its keys are deleted
// (Behavior delete) or let go (release: Session cleared, ModifyIndex
// moved on, LockIndex kept); on etcd its keys are deleted at one new
// revision (none if it held none), and the renewals waiting for it
// answer gone.
func (s *server) end(ses *session, why string) {
	ses.timer.Cancel()
	delete(s.sessions, ses.id)
	keys := s.owned(ses.id)
	if s.kind == Consul || len(keys) > 0 {
		s.index++
	}
	if s.kind == Consul {
		s.sesIndex = s.index
	}
	s.w.tracef("server: session %s %s; its keys %v", ses.id, why, keys)
	for _, k := range keys {
		// Consul's deleteSessionTxn: whatever the Behavior, each key the
		// session held is refused to ?acquire for its lock-delay (at most
		// 60 s) from now.
		if ses.delay > 0 {
			s.delayKey(k, min(ses.delay, consulMaxLockDelay))
		}
		if ses.release {
			e := *s.keys[k]
			e.owner = ""
			s.put(k, &e)
		} else {
			s.del(k)
		}
	}
	for _, c := range ses.renews {
		s.w.reply(c, result{ok: false})
	}
	ses.renews = nil
}

// delayKey starts key's lock-delay, d from now. As Consul's
// Delay.SetExpiration, a drop of the key's entry runs d from now and
// drops whatever the entry then holds: a later, longer delay set on the
// key meanwhile ends with it.
func (s *server) delayKey(key string, d time.Duration) {
	s.delays[key] = s.w.now + int64(d)
	s.w.tracef("server: %s lock-delayed for %v", key, d)
	gen := s.delayGen
	s.w.sched.After(d, func() {
		if _, ok := s.delays[key]; ok && s.delayGen == gen {
			delete(s.delays, key)
		}
	})
}

// delayed says whether ?acquire of key is refused by a lock-delay now:
// its entry is there and its expiration is after now (Consul's
// kvsPreApply, on the leader's clock).
func (s *server) delayed(key string) bool {
	until, ok := s.delays[key]
	return ok && until > s.w.now
}

// forgetDelays drops every lock-delay: they live in the Consul leader's
// memory (its state store's Delay), not in its Raft state, and a
// restarted agent starts with none here (a persistent agent that replays
// its Raft log sets again the lock-delays of the invalidations it
// replays, from the replay's time: not modelled).
func (s *server) forgetDelays() {
	s.delays = map[string]int64{}
	s.delayGen++
}

// crash brings the server down: every call it holds or answers fails
// (the connection resets), its timers stop; a Consul -dev agent forgets
// everything.
func (s *server) crash() {
	if s.down {
		return
	}
	s.down = true
	s.gen++
	for _, ses := range s.sessions {
		ses.timer.Cancel()
		ses.renews = nil
	}
	for _, wt := range s.watches {
		wt.timer.Cancel()
	}
	s.watches = nil
	s.forgetDelays()
	for _, c := range slices.Clone(s.inflight) {
		s.w.arrive(c, result{err: errReset})
	}
	if s.kind == Consul && !s.w.o.Persistent {
		s.reset()
		s.w.tracef("server: down, its state forgotten (-dev)")
		return
	}
	s.w.tracef("server: down, its state kept")
}

// up brings the server back: every session it kept gets a fresh TTL
// (Consul: its timer restarts when the agent is leader again, which is a
// Raft write; etcd: the lessor's Promote adds an election timeout).
func (s *server) up() {
	s.down = false
	s.upAt = s.w.now
	if s.kind == Consul {
		s.index++
	}
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if ses := s.sessions[id]; s.kind == Consul {
			s.armConsul(ses)
		} else {
			s.armEtcd(ses, s.w.now+int64(s.w.o.ElectionTimeout+ses.ttl))
		}
	}
	s.w.tracef("server: up, %d sessions with a fresh TTL", len(ids))
}
