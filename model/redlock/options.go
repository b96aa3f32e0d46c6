package redlock

import (
	"fmt"
	"io"
	"time"
)

// Options are the choices Redlock leaves open. The zero value is the
// reference: drift factor 0.01, a per-server timeout of a tenth of the ttl,
// random tokens from crypto/rand, no defects.
type Options struct {
	// DriftFactor is the bound on the rate at which the servers' clocks
	// and ours may disagree, as a fraction: an acquire or refresh of ttl
	// claims a validity shorter by ttl*DriftFactor + 2 ms (Redlock's
	// formula, the 2 ms for the servers' millisecond expiry). 0 means 0.01,
	// Redlock's and redsync's default. Must be below 0.5.
	DriftFactor float64

	// Timeout bounds each server's answer to each round of an operation,
	// so that a dead or partitioned server costs at most that much of the
	// lease's validity. 0 means a tenth of the operation's ttl, but at
	// least 50 ms (10 ms timed out on this machine under load, where a
	// round trip is 0.1 ms idle); for Release and Verify, which do not race
	// a validity, half a second. A timeout longer than the validity left
	// only makes the acquire fail with ErrNoValidity: it is never unsafe.
	Timeout time.Duration

	// Random is where tokens' random bits come from; nil means
	// crypto/rand.
	Random io.Reader

	// OnLost (Priority only) is told, on the lost lease's watcher
	// goroutine (a task of the PriorityEnv), when a higher-priority
	// acquirer has taken a lease: after the lease is marked lost (Verify
	// answers false from then on) and before the thief is acknowledged,
	// so that whatever OnLost records precedes the thief's grant. It must
	// return quickly: the thief waits.
	OnLost func(Lost)

	// Defects are deliberate bugs, for the prover's mutants only: each
	// turns one of the checks above off. The zero value has none.
	Defects Defects
}

// Defects are deliberate bugs the prover's mutants switch on, one per
// field, each a small branch off the reference, to show that the prover
// finds it. New and NewPriority refuse a defect the lock does not have.
// Never set them outside a mutant.
type Defects struct {
	// PlainDelRelease (Redlock) releases with a plain DEL, without checking
	// that the key still holds the caller's token: a holder whose lease
	// expired deletes its successor's.
	PlainDelRelease bool
	// PlainPexpireRefresh (Redlock) refreshes with a plain PEXPIRE: a
	// holder whose lease expired extends its successor's, and reports
	// success.
	PlainPexpireRefresh bool
	// AlwaysOK (Redlock) counts every server that answered refresh or
	// release as a success, whatever it answered (redsync v4.0.0 to
	// v4.0.3): both report success for a lease that is gone.
	AlwaysOK bool
	// SetNXOnExtend (Redlock) makes a refresh that finds the key missing
	// set it again (redsync's WithSetNXOnExtend): it revives an expired
	// lease.
	SetNXOnExtend bool
	// QuorumHalf (Redlock) needs N/2 servers instead of N/2+1: two
	// acquirers can both have "a majority".
	QuorumHalf bool
	// NoValidityCheck (Redlock) grants even when the validity left after
	// the servers answered is not positive.
	NoValidityCheck bool
	// NoElapsed (Redlock) counts the validity from the end of the acquire
	// instead of its start: the time the servers took is not subtracted.
	NoElapsed bool
	// NoDrift (Redlock) subtracts no drift from the validity.
	NoDrift bool
	// NoCleanup (Redlock) leaves the keys a failed acquire did set in
	// place, until they expire.
	NoCleanup bool
	// ConstantToken gives every grant the same token, so that any holder's
	// refresh and release act on any other's lease.
	ConstantToken bool

	// EqualSteals (Priority) lets an acquirer take a lease from a holder of
	// equal priority, not only of lower.
	EqualSteals bool
	// NoAckWait (Priority): the thief returns right after the steal,
	// without waiting for the victim's acknowledgement.
	NoAckWait bool
	// ProceedOnAckTimeout (Priority): the thief waits for the
	// acknowledgement only a quarter of the victim's remaining time and
	// then proceeds though the victim may be alive (upstream's
	// stolenConsistencyFactor below 1).
	ProceedOnAckTimeout bool
	// StealResetsTTL (Priority): the steal sets the key's life to the
	// thief's ttl instead of keeping the victim's deadline when that is
	// later: should the thief die before the victim learns, a third
	// acquirer can take the key while the victim still holds it.
	StealResetsTTL bool
	// AckBeforeLost (Priority): the victim acknowledges the theft, and only
	// then marks itself lost and tells OnLost.
	AckBeforeLost bool
	// PubSubNotify (Priority): the thief notifies the victim with PUBLISH
	// and the victim's watcher SUBSCRIBEs: a notification sent while the
	// watcher is not subscribed (starting, reconnecting) is lost, and the
	// thief then waits out the victim's whole remaining time.
	PubSubNotify bool
	// DirectVictimOnly (Priority): the thief notifies, and waits for, only
	// the victims it took the key from, not the earlier victims of the
	// key's chain that the obtain script reports. A failed steal
	// acknowledges a thief of its key at once (it holds nothing): its own
	// victim, which it never told, is then told by nobody, and still holds
	// while the thief acts.
	DirectVictimOnly bool
}

func (d Defects) redlockOnly() []string {
	var s []string
	for _, f := range []struct {
		on   bool
		name string
	}{{d.PlainDelRelease, "PlainDelRelease"}, {d.PlainPexpireRefresh, "PlainPexpireRefresh"},
		{d.AlwaysOK, "AlwaysOK"}, {d.SetNXOnExtend, "SetNXOnExtend"}, {d.QuorumHalf, "QuorumHalf"},
		{d.NoValidityCheck, "NoValidityCheck"}, {d.NoElapsed, "NoElapsed"}, {d.NoDrift, "NoDrift"},
		{d.NoCleanup, "NoCleanup"}} {
		if f.on {
			s = append(s, f.name)
		}
	}
	return s
}

func (d Defects) priorityOnly() []string {
	var s []string
	for _, f := range []struct {
		on   bool
		name string
	}{{d.EqualSteals, "EqualSteals"}, {d.NoAckWait, "NoAckWait"},
		{d.ProceedOnAckTimeout, "ProceedOnAckTimeout"}, {d.StealResetsTTL, "StealResetsTTL"},
		{d.AckBeforeLost, "AckBeforeLost"}, {d.PubSubNotify, "PubSubNotify"},
		{d.DirectVictimOnly, "DirectVictimOnly"}} {
		if f.on {
			s = append(s, f.name)
		}
	}
	return s
}

// check refuses options that make no sense; priority says which lock.
func (o Options) check(priority bool) error {
	if o.DriftFactor < 0 || o.DriftFactor >= 0.5 {
		return fmt.Errorf("redlock: drift factor %v: must be at least 0 and below 0.5", o.DriftFactor)
	}
	if o.Timeout < 0 {
		return fmt.Errorf("redlock: timeout %v: must not be negative", o.Timeout)
	}
	if priority {
		if s := o.Defects.redlockOnly(); s != nil {
			return fmt.Errorf("redlock: defects %v are Redlock's, not the priority lock's", s)
		}
	} else {
		if s := o.Defects.priorityOnly(); s != nil {
			return fmt.Errorf("redlock: defects %v are the priority lock's", s)
		}
		if o.OnLost != nil {
			return fmt.Errorf("redlock: OnLost is the priority lock's")
		}
	}
	return nil
}

func (o Options) driftFactor() float64 {
	if o.DriftFactor == 0 {
		return 0.01
	}
	return o.DriftFactor
}

// drift is what a grant of ttl gives up to clock drift: ttl*factor + 2 ms.
func (o Options) drift(ttl time.Duration) time.Duration {
	if o.Defects.NoDrift {
		return 0
	}
	return time.Duration(float64(ttl)*o.driftFactor()) + 2*time.Millisecond
}

// timeout is the per-server bound of a round of an operation of ttl.
func (o Options) timeout(ttl time.Duration) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return max(ttl/10, 50*time.Millisecond)
}

// opTimeout is the per-server bound of Release and Verify.
func (o Options) opTimeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 500 * time.Millisecond
}
