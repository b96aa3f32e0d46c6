// Package consulsim is a deterministic, in-memory Consul agent or etcd
// server for the reference of Consul's semaphore recipe (package
// consulsem): exactly the calls the recipe makes of its backend (sessions
// with a TTL, contender keys bound to them, a listing of a prefix, a
// conditional write of the lock key, a delete, a wait for a change), in
// virtual time and with faults, behind consulsem's Backend
// (Process.Backend, consulsem.On), so that the reference runs unchanged on
// it and a plan (clients, faults, a schedule) always gives the same run.
//
// A World is the server plus the client processes that use it, on the
// scheduler of package sim/sched: each client is a coroutine that moves
// only when handed control, and each call it makes is a scheduling point;
// when several clients can move, Options.Decide picks which, and the
// server applies a call the moment it arrives. So the order in which
// calls take effect is the schedule's. Time is virtual: a call takes 1 ms
// (the server applies it at once, the answer arrives 1 ms later, other
// clients moving meanwhile), and when nobody can move the clock jumps to
// the next timer (a sleep, a TTL, a wait's max). The same decisions give
// the same trace and results, byte for byte (TestSameSeedSameRun): no map
// order reaches behaviour, ids are drawn from counters, and the reference
// on Process.Backend starts no goroutine and reads no other clock
// (consulsem's Options.Wait is measured on Backend.Now, the virtual time).
//
// Modelled, as Consul v1.20.2 and etcd 3.4 do it (held to private real
// servers by the differential, adapters/conform/consulconform: drawn
// sequences of every call the recipe makes, with sleeps, run on both
// through consulsem's own ConsulBackend and EtcdBackend and compared step
// by step):
//
//   - sessions (Consul) and leases (etcd) with a TTL, renewed, destroyed
//     (revoked). Consul refuses a TTL under session_ttl_min
//     (Options.SessionTTLMin) or over 24 h, and invalidates a session
//     when its TTL timer fires, 2 x TTL after its last renewal as v1.20.2
//     does, or, since Consul promises the TTL only as a lower bound, at
//     1, 1.25, 1.5 or 1.75 x TTL as Options.Decide says (a decision of
//     the schedule, made at each grant). etcd rounds a TTL up to whole
//     seconds and raises it to its floor (Options.MinTTL), a lease is
//     past its deadline one TTL after its last renewal, and its lessor
//     revokes it at its next look, every 500 ms; a renewal of a lease past
//     its deadline waits for the revocation and answers not found; a key
//     can still be put with it until then;
//   - a session's end: Consul's Behavior delete deletes its keys, release
//     clears their Session (LockIndex kept, ModifyIndex moved on); etcd
//     deletes a lease's keys at one revision;
//   - Consul's lock-delay (a session's LockDelay, from its create
//     request): when a session is invalidated (destroyed, or its TTL timer
//     fired), whatever its Behavior, each key it held is refused to
//     ?acquire (false, before the Raft apply, so no index is taken, and
//     whichever session asks) until the delay, at most 60 s, has run out;
//     a key let go before the session ended (deleted) is not delayed.
//     Lock-delays live in the agent's memory: a restart forgets them here
//     (a persistent agent replaying its Raft log sets again those of the
//     invalidations it replays: not modelled). etcd has no lock-delay: it
//     ignores one;
//   - keys: Consul's ?acquire (LockIndex + 1 when a session takes a key;
//     true again for the session that holds it; false for another; an
//     error for a session that does not exist), a plain PUT (the key's
//     session kept, its LockIndex the request's 0), the txn of
//     check-session and cas (or set), DELETE; etcd's put-if-absent
//     transaction (with a lease: refused if the lease does not exist),
//     the transaction comparing ModRevision, CreateRevision and lease,
//     delete. Consul skips a write that changes nothing (the key keeps its
//     ModifyIndex, and the txn answers it);
//   - indexes as the servers number them, as far as the recipe can
//     observe: Consul's Raft index moves on with every write, failed ones
//     included, and not with a renewal; a listing answers the last change
//     under the prefix, tombstones included, else the KV table's index,
//     at least 1; etcd's revision moves on with each write that changes
//     a key, and a listing answers it;
//   - waits for a change: a Consul blocking query returns at once if the
//     prefix's index is past the one given, else at the next change
//     under the prefix, or after its max; an etcd watch from a revision
//     the server has passed sees the events it missed at the server's
//     next sync of unsynced watchers (every 100 ms), one from the next
//     revision at the next change;
//   - faults: Kill, Pause and Resume of a client (its sessions expire
//     meanwhile unless renewed), Partition and Heal of a client (bytes
//     wait both ways: a held call takes effect on heal; with
//     Options.Timeout its caller may have given up by then), DropReply
//     (the call takes effect, its answer is lost and the connection
//     resets), ForceClose of a client's connection (the call it waits for
//     fails with a reset, taken effect or not; its sessions live on),
//     Restart of the server (calls in flight fail, calls while it
//     is down are refused; a Consul -dev agent comes back empty, its
//     indexes starting again; a persistent agent and etcd keep everything
//     and give every session a fresh TTL from when they are back, etcd
//     plus an election timeout, Options.ElectionTimeout).
//
// A Consul agent also takes Consul's HTTP API as a client on the wire
// sends it (api.go, apiread.go, wire.go: Process.Send, Process.Wait), for
// the agent served by adapters/served/consulserve: sessions created with
// a Name, Behavior, TTL (none, too) and LockDelay, renewed, destroyed,
// read; keys with Flags and CreateIndex, written by ?cas, ?acquire and
// ?release, read one or by prefix in blocking queries, deleted by ?cas
// or by prefix; with Consul's own status codes and words for its errors
// (held to Consul 1.16.3 through consul/api by consulserve's wire
// differential).
//
// Options.Cluster makes the World a cluster of Consul servers and client
// agents or of etcd members, with stale reads that are stale, leader
// elections and node failure (cluster.go says what it models, held to
// real clusters by consulconform's ClusterDifferential). Not modelled on a single
// server: stale reads that are stale (a stale listing is a consistent
// one), leader elections without a restart, Consul's health checks, ACLs,
// KV flags and tombstone reaping, Consul's jitter on a blocking query's
// wait (up to wait/16), etcd's compaction, its client's retries and
// reconnection backoff (a call to a server that is down fails at once; an
// etcd watch that fails waits out its max, as consulsem's Etcd ignores
// its errors), its lease checkpoints, the cost of a watch's catching up
// with a long history (the differential waits only after a listing, as
// the recipe does), latency beyond the fixed cost above, and the
// context's deadline (real time: a client's patience is Options.Timeout,
// in virtual time). The calls' error texts are not Consul's or etcd's
// words (only their kind is compared). Consul's TTL timers also restart on
// a leader election, which on a single server only Restart brings.
package consulsim
