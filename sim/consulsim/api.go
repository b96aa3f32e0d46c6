package consulsim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Consul's HTTP API, as a client on the wire calls it (the served agent,
// adapters/served/consulserve, reads HTTP and hands each request here):
// sessions created, renewed, destroyed and read, keys read (one, or a
// prefix's, in a blocking query or not), written (?cas, ?acquire,
// ?release, ?flags) and deleted (?cas, ?recurse), each applied on the
// server as Consul v1.16 applies it (agent/kvs_endpoint.go,
// agent/consul/state/kvs.go, agent/consul/session_endpoint.go), with the
// indexes the recipe's own calls take. A Consul agent only.

// APIOp is a request of the HTTP API the simulated agent serves.
type APIOp int

// The requests served.
const (
	SessionCreate  APIOp = iota + 1 // PUT /v1/session/create
	SessionRenew                    // PUT /v1/session/renew/<id>
	SessionDestroy                  // PUT /v1/session/destroy/<id>
	SessionInfo                     // GET /v1/session/info/<id>
	KVGet                           // GET /v1/kv/<key>[?recurse]
	KVPut                           // PUT /v1/kv/<key>
	KVDelete                        // DELETE /v1/kv/<key>
)

// An APIRequest is one request of the HTTP API, read: what the agent
// takes of it. A parameter that may be given empty (?acquire=) is a
// pointer, nil when not given.
type APIRequest struct {
	Op APIOp
	// Key is the key (or prefix, with Recurse) of a KV request, the
	// session's id of a renew, destroy or info.
	Key     string
	Recurse bool
	// Index and Wait are a blocking query's ?index and ?wait (0: none,
	// and Consul's default of 5 minutes).
	Index uint64
	Wait  time.Duration
	// Value is a PUT's body, Flags its ?flags.
	Value            []byte
	Flags            uint64
	CAS              *uint64
	Acquire, Release *string
	// Session is a create's body.
	Session APISession
}

// APISession is what a session's create asks for: its TTL as given (""
// for none), Behavior ("" is release), and LockDelay, as the agent read
// them (its default of 15 s applied when the body had none).
type APISession struct {
	Name, TTL, Behavior string
	LockDelay           time.Duration
}

// An APIReply is the agent's answer: Status 200 with what the request
// answers, or another Status with Error, the body Consul writes.
type APIReply struct {
	Status int
	Error  string
	// Index is X-Consul-Index (0: the answer has none).
	Index    uint64
	OK       bool // a write's true or false
	ID       string
	Entries  []KVEntry
	Sessions []SessionEntry
	// NotFound says a read answered 404 with no body (no such key).
	NotFound bool
}

// A KVEntry is a key as a read answers it.
type KVEntry struct {
	Key                                 string
	Value                               []byte
	Flags                               uint64
	Session                             string
	LockIndex, CreateIndex, ModifyIndex uint64
}

// A SessionEntry is a session as a renew or info answers it.
type SessionEntry struct {
	ID, Name, Behavior, TTL  string
	LockDelay                time.Duration
	CreateIndex, ModifyIndex uint64
}

// Default and longest wait of a blocking query (Consul's
// DefaultQueryTime and MaxQueryTime). Consul adds up to a sixteenth of
// it at random: not modelled.
const (
	apiDefaultWait = 5 * time.Minute
	apiMaxWait     = 10 * time.Minute
)

func (r APIRequest) String() string {
	names := map[APIOp]string{SessionCreate: "session create", SessionRenew: "session renew", SessionDestroy: "session destroy",
		SessionInfo: "session info", KVGet: "kv get", KVPut: "kv put", KVDelete: "kv delete"}
	s := names[r.Op] + " " + r.Key
	if r.Recurse {
		s += " recurse"
	}
	if r.Index > 0 {
		s += fmt.Sprintf(" index %d wait %v", r.Index, r.Wait)
	}
	if r.CAS != nil {
		s += fmt.Sprintf(" cas %d", *r.CAS)
	}
	if r.Acquire != nil {
		s += " acquire " + *r.Acquire
	}
	if r.Release != nil {
		s += " release " + *r.Release
	}
	if r.Op == SessionCreate {
		s += fmt.Sprintf(" TTL %q behavior %q lock-delay %v", r.Session.TTL, r.Session.Behavior, r.Session.LockDelay)
	}
	return s
}

// apiFailure is a 500 with Consul's words.
func apiFailure(format string, args ...any) APIReply {
	return APIReply{Status: 500, Error: fmt.Sprintf(format, args...)}
}

// api applies r, arrived as call c, and answers it (a blocking query
// that waits: once it returns).
func (s *server) api(c *call, r APIRequest) {
	if s.kind != Consul {
		s.w.reply(c, result{api: apiFailure("the simulated etcd serves no HTTP API")})
		return
	}
	var rep APIReply
	switch r.Op {
	case SessionCreate:
		rep = s.apiCreate(r.Session)
	case SessionRenew:
		rep = s.apiRenew(r.Key)
	case SessionDestroy:
		s.destroy(r.Key)
		rep = APIReply{Status: 200, OK: true}
	case SessionInfo:
		rep = APIReply{Status: 200, Index: max(s.sesIndex, 1)}
		if ses := s.sessions[r.Key]; ses != nil {
			rep.Sessions = []SessionEntry{ses.entry()}
		}
	case KVGet:
		s.apiGet(c, r)
		return
	case KVPut:
		rep = s.apiPut(r)
	case KVDelete:
		rep = s.apiDelete(r)
	default:
		rep = apiFailure("unknown request %d", r.Op)
	}
	s.w.reply(c, result{api: rep})
}

// entry is the session as the API shows it.
func (ses *session) entry() SessionEntry {
	b := "release"
	if !ses.release {
		b = "delete"
	}
	return SessionEntry{ID: ses.id, Name: ses.name, Behavior: b, TTL: ses.ttlText, LockDelay: ses.delay, CreateIndex: ses.create, ModifyIndex: ses.create}
}

// apiCreate creates a session as Session.Apply does: its Behavior and
// TTL checked (Consul's words), no TTL timer for a TTL of "" or 0.
func (s *server) apiCreate(a APISession) APIReply {
	release := true
	switch a.Behavior {
	case "", "release":
	case "delete":
		release = false
	default:
		return apiFailure("Invalid Behavior setting '%s'", a.Behavior)
	}
	var ttl time.Duration
	if a.TTL != "" {
		var err error
		if ttl, err = time.ParseDuration(a.TTL); err != nil {
			return apiFailure("Session TTL '%s' invalid: %v", a.TTL, err)
		}
		if ttl != 0 && (ttl < s.w.o.SessionTTLMin || ttl > consulTTLMax) {
			return apiFailure("Invalid Session TTL '%d', must be between [%v=%v]", ttl, s.w.o.SessionTTLMin, consulTTLMax)
		}
	}
	var ses *session
	if ttl == 0 {
		s.index++
		ses = &session{id: s.newID(), release: release, delay: a.LockDelay, create: s.index}
		s.sesIndex = s.index
		s.sessions[ses.id] = ses
		s.w.tracef("server: session %s created, no TTL", ses.id)
	} else {
		id, _, err := s.create(ttl, release, a.LockDelay)
		if err != nil {
			return apiFailure("%v", err)
		}
		ses = s.sessions[id]
	}
	ses.name, ses.ttlText = a.Name, a.TTL
	return APIReply{Status: 200, ID: ses.id}
}

// apiRenew renews session id: its entry, or Consul's 404.
func (s *server) apiRenew(id string) APIReply {
	ses := s.sessions[id]
	if ses == nil {
		return APIReply{Status: 404, Error: fmt.Sprintf("Session id '%s' not found", id)}
	}
	s.armConsul(ses)
	return APIReply{Status: 200, Sessions: []SessionEntry{ses.entry()}}
}

// apiPut writes key as KVS.Apply does: a lock (?acquire), an unlock
// (?release), a check-and-set (?cas) or a set. Each takes a Raft index
// but an ?acquire a lock-delay refuses.
func (s *server) apiPut(r APIRequest) APIReply {
	if r.Acquire != nil && s.delayed(r.Key) {
		s.w.tracef("server: ?acquire of %s refused: lock-delay until %v", r.Key, time.Duration(s.delays[r.Key]))
		return APIReply{Status: 200}
	}
	s.index++
	old := s.keys[r.Key]
	e := &kv{value: slices.Clone(r.Value), flags: r.Flags}
	if e.value == nil {
		e.value = []byte{}
	}
	if old != nil {
		e.owner = old.owner
	}
	switch {
	case r.Acquire != nil || r.Release != nil:
		ok, err := s.lockKey(r, old, e)
		if err != "" {
			return apiFailure("raft apply failed: %s", err)
		}
		if !ok {
			return APIReply{Status: 200}
		}
	case r.CAS != nil:
		if *r.CAS == 0 && old != nil || *r.CAS != 0 && (old == nil || old.mod != *r.CAS) {
			return APIReply{Status: 200}
		}
	}
	s.put(r.Key, e)
	return APIReply{Status: 200, OK: true}
}

// lockKey makes e, the key's new entry, what an ?acquire or ?release of
// its old entry old makes it (kvsLockTxn, kvsUnlockTxn): whether it is
// written, or the apply's error.
func (s *server) lockKey(r APIRequest, old, e *kv) (bool, string) {
	if r.Release != nil {
		sid := *r.Release
		switch {
		case sid == "":
			return false, "missing session"
		case old == nil || old.owner != sid:
			return false, ""
		}
		e.owner, e.lockIndex = "", old.lockIndex
		return true, ""
	}
	sid := *r.Acquire
	switch {
	case sid == "":
		return false, "missing session"
	case s.sessions[sid] == nil:
		return false, fmt.Sprintf("invalid session %q", sid)
	case old == nil:
		e.lockIndex = 1
	case old.owner == sid:
		e.lockIndex = old.lockIndex
	case old.owner != "":
		return false, ""
	default:
		e.lockIndex = old.lockIndex + 1
	}
	e.owner = sid
	return true, ""
}

// apiDelete deletes a key (or a prefix's, with Recurse) as KVS.Apply
// does: true but for a ?cas that does not match a key that exists.
func (s *server) apiDelete(r APIRequest) APIReply {
	s.index++
	old := s.keys[r.Key]
	switch {
	case r.Recurse:
		var ks []string
		for k := range s.keys {
			if strings.HasPrefix(k, r.Key) {
				ks = append(ks, k)
			}
		}
		slices.Sort(ks)
		for _, k := range ks {
			s.del(k)
		}
	case r.CAS != nil && old != nil && old.mod != *r.CAS:
		return APIReply{Status: 200}
	case old != nil:
		s.del(r.Key)
	}
	return APIReply{Status: 200, OK: true}
}
