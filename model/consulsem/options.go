package consulsem

import (
	"errors"
	"fmt"
	"time"
)

// Options are the choices the recipe leaves open. The zero value is the
// recommended semaphore: consistent reads, sessions that delete their
// keys, no waiting for a slot, eight CAS attempts, no defects.
type Options struct {
	// StaleReads makes the listing an acquire decides on a stale read
	// (Consul ?stale, etcd serializable), served by any server without a
	// round through the leader. It is a correct variant: the grant's
	// check-and-set on the lock key's index refuses a decision made on an
	// old listing, and a holder that a stale listing shows dead is dead
	// (a session never comes back). Release and Verify always read
	// consistently.
	StaleReads bool

	// BehaviorRelease (Consul only) creates sessions with Behavior
	// "release" instead of "delete": when a session is invalidated its
	// contender key stays, with its Session field cleared, instead of
	// vanishing. A correct variant: pruning looks at the key's session, not
	// at its existence.
	BehaviorRelease bool

	// LockDelay (Consul only) creates sessions with this lock-delay
	// instead of none ("0s"; Consul's own default is 15 s, at most 60 s
	// is applied): once a session is invalidated (its TTL ran out, or it
	// was destroyed), Consul refuses ?acquire of the keys it held for
	// LockDelay. In this recipe the only keys a session holds are its own
	// contender key, named after the session, which no other session ever
	// acquires, and the lock key is written by check-and-set, which
	// lock-delay does not look at: so it changes nothing the recipe does
	// (docs/consul-semaphore.md, "Lock-delay"). Were a contender's
	// ?acquire refused by it, the acquire would answer ErrNotGranted, as
	// for any refused contender key, without retrying.
	LockDelay time.Duration

	// Wait is how long Acquire waits for a slot when every slot is held,
	// watching the prefix (a Consul blocking query, an etcd watch) and
	// renewing its session meanwhile; 0 answers ErrFull at once, which is
	// what a prover needs. It is measured on the backend's clock
	// (Backend.Now: the wall clock on Consul and etcd, virtual time on a
	// simulator).
	Wait time.Duration

	// CASRetries is how many check-and-sets an acquire may lose to other
	// writers of the lock key before it answers ErrNotGranted; 0 means 8.
	CASRetries int

	// Defects are deliberate bugs, for the prover's mutants only: each
	// turns one of the recipe's checks off. The zero value has none.
	Defects Defects
}

// Defects are deliberate bugs the prover's mutants switch on, one per
// field, to show that the prover finds each. Every one is a small branch
// off the correct code. Never set them outside a mutant.
type Defects struct {
	// PlainPut writes the lock key without the check on its index (Consul:
	// the txn's "set" instead of "cas", as a plain PUT without ?cas; etcd:
	// no ModRevision compare): two contenders that read the same listing
	// both win, the later write dropping the earlier holder.
	// Mutant consul-cas-to-put.
	PlainPut bool

	// LimitGreater takes the semaphore as full only when more than limit
	// holders are alive (> instead of >=): one holder too many.
	// Mutant consul-limit-gt.
	LimitGreater bool

	// LocalLimit drops the agreement on the limit: an acquire compares
	// the holders with its own limit and writes it into the lock key, where
	// the correct code answers ErrMismatch to an acquire whose limit is not
	// the lock key's. Mutant consul-local-limit.
	LocalLimit bool

	// NoPrune keeps holders whose session is gone in the lock key: a dead
	// holder's slot is never freed. Mutant consul-no-prune.
	NoPrune bool

	// PlainContender puts the contender key without binding it to the
	// session (Consul: no ?acquire; etcd: no lease): it survives its
	// session, and it is not held by the session the grant checks, so
	// that check refuses every grant; with NoLiveCheck too, a holder looks
	// dead to everyone else at once and is pruned by the next acquire.
	// Mutant consul-plain-contender.
	PlainContender bool

	// ReleaseOKAfterPruned makes Release answer nil when the holder is no
	// longer among the holders or its session is gone (upstream's
	// Semaphore.Release), where the correct code answers ErrExpired.
	// Mutant consul-release-ok.
	ReleaseOKAfterPruned bool

	// VerifyHeldThroughFailures makes Verify answer from the lock key's
	// holders alone, ignoring whether the session is still alive, and
	// answer held when the backend cannot be read at all, for any lease
	// this Semaphore granted and has not released: a holder that keeps
	// believing it holds through renew failures (Consul #18271, unbounded
	// monitor retries). Mutant consul-monitor-forever.
	VerifyHeldThroughFailures bool

	// FenceRestarts takes the fence from the contender key's own counter
	// (Consul's LockIndex, etcd's Version), which starts again at 1 with
	// every new key, instead of the grant's index or revision: fences stop
	// increasing. Mutant consul-delete-fence.
	FenceRestarts bool

	// NoLiveCheck drops the grant's check that the contender key is still
	// held by the acquirer's session (Consul: the txn's check-session, the
	// guide's plain ?cas; etcd: the compares on the contender key), so a
	// session that dies between the listing and the grant is granted a
	// slot anyway (etcd#11456's shape). Mutant etcd-no-live-check.
	NoLiveCheck bool
}

// Timing is what a backend does with TTLs: the data a checker needs to
// judge the leases it grants.
type Timing struct {
	// Backend names the backend: "consul" or "etcd".
	Backend string
	// Factor: a session or lease whose last grant (create or renew) took
	// effect at g is invalidated at g + Factor x TTL, not before. Consul's
	// is 2 (its TTL timers run for twice the TTL; its documentation
	// promises the TTL only as a lower bound); etcd's is 1.
	Factor int
	// Grain is the unit TTLs are rounded up to (etcd: whole seconds; the
	// server also raises a TTL to its floor, MinTTL of adapters/servers/etcd), 0
	// when any duration is kept as given (Consul, which refuses a TTL under
	// its session_ttl_min instead). Lease.TTL is the TTL granted: use it.
	Grain time.Duration
	// Sweep is how late after its deadline the backend may notice that a
	// lease expired (etcd looks every 500 ms), 0 when a timer fires at the
	// deadline (Consul).
	Sweep time.Duration
	// RestartResets: a restart of a backend that keeps its state, or a new
	// leader, gives every session or lease a fresh TTL, so that one may
	// outlive its deadline by the time the backend was down or leaderless.
	RestartResets bool
}

// The backends' timings.
var (
	consulTiming = Timing{Backend: "consul", Factor: 2, RestartResets: true}
	etcdTiming   = Timing{Backend: "etcd", Factor: 1, Grain: time.Second, Sweep: 500 * time.Millisecond, RestartResets: true}
)

// Horizon is how long after a grant's return a lease of TTL ttl may still
// be valid on this backend, leaving restarts aside: Factor x ttl plus the
// sweep.
func (t Timing) Horizon(ttl time.Duration) time.Duration {
	return time.Duration(t.Factor)*ttl + t.Sweep
}

func (o Options) casRetries() int {
	if o.CASRetries == 0 {
		return 8
	}
	return o.CASRetries
}

// check refuses options that make no sense for the backend.
func (o Options) check(backend string) error {
	if o.CASRetries < 0 {
		return fmt.Errorf("consulsem: CASRetries %d: must be >= 0", o.CASRetries)
	}
	if o.Wait < 0 {
		return fmt.Errorf("consulsem: Wait %v: must be >= 0", o.Wait)
	}
	if o.LockDelay < 0 {
		return fmt.Errorf("consulsem: LockDelay %v: must be >= 0", o.LockDelay)
	}
	if o.LockDelay > 0 && backend != "consul" {
		return errors.New("consulsem: LockDelay is Consul's: etcd has no lock-delay")
	}
	if o.BehaviorRelease && backend != "consul" {
		return errors.New("consulsem: BehaviorRelease is Consul's: etcd keys vanish with their lease")
	}
	return nil
}
