package redlockrun

import (
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/redlock"
)

// A Mutant is a deliberately broken variant of the reference (package
// redlock with one of its Defects): a defect lockprover must catch, and the
// property that must catch it.
type Mutant struct {
	Name, Defect, Property string
	defects                func(*redlock.Defects)
	// servers, if set, are the numbers of servers its plans draw from
	// (a defect that shows only with several).
	servers []int
	// Priority says that it is a mutant of the priority lock
	// (PriorityKind); ownTTLs that its plans give the first client a
	// ttl of 1000 ms and the others 100 ms (a defect that shows only when
	// a thief's ttl is shorter than its victim's time left).
	Priority bool
	ownTTLs  bool
	// ladder: its plans always draw a ladder of priorities (a defect of
	// chains); faults, if set, the only faults they draw (a defect that
	// shows only where a fault makes a steal fail).
	ladder bool
	faults []string
}

// Mutants is the catalogue, in the order `lockprover mutants` lists it.
var Mutants = []*Mutant{
	{Name: "plain-del-release", Property: lease.LeaseExclusive, defects: func(d *redlock.Defects) { d.PlainDelRelease = true },
		Defect: "release is a plain DEL, without comparing the key's token: a holder whose lease expired deletes its successor's key, and a third client takes it"},
	{Name: "plain-pexpire-refresh", Property: lease.NoRevival, defects: func(d *redlock.Defects) { d.PlainPexpireRefresh = true },
		Defect: "refresh is a plain PEXPIRE: a holder whose lease expired extends its successor's key and reports success"},
	{Name: "always-ok", Property: lease.NoRevival, defects: func(d *redlock.Defects) { d.AlwaysOK = true },
		Defect: "refresh and release count every server that answered as a success, whatever it answered (redsync v4.0.0 to v4.0.3): both report success for a lease that is gone"},
	{Name: "setnx-on-extend", Property: lease.NoRevival, defects: func(d *redlock.Defects) { d.SetNXOnExtend = true },
		Defect: "a refresh that finds the key missing sets it again (redsync's WithSetNXOnExtend): it revives an expired lease"},
	{Name: "quorum-half", Property: lease.LeaseExclusive, defects: func(d *redlock.Defects) { d.QuorumHalf = true }, servers: []int{2, 3},
		Defect: "a lease needs N/2 servers instead of N/2+1: two acquirers can both have \"a majority\""},
	{Name: "no-validity-check", Property: lease.ValiditySound, defects: func(d *redlock.Defects) { d.NoValidityCheck = true }, servers: []int{2, 3},
		Defect: "a grant is returned even when the servers took the whole ttl to answer: its holder is told it holds a lease that has no validity left"},
	{Name: "no-elapsed", Property: lease.ValiditySound, defects: func(d *redlock.Defects) { d.NoElapsed = true },
		Defect: "the validity is counted from the end of the acquire, not its start: the time the servers took is not subtracted"},
	{Name: "no-drift", Property: lease.ValiditySound, defects: func(d *redlock.Defects) { d.NoDrift = true },
		Defect: "no clock drift is subtracted from the validity: the holder counts on time the servers' clocks may not give it"},
	{Name: "no-cleanup", Property: lease.AcquireExact, defects: func(d *redlock.Defects) { d.NoCleanup = true }, servers: []int{2, 3},
		Defect: "an acquire that failed to reach a majority leaves the keys it did set until they expire: a later acquire alone finds the lock taken though nobody holds it"},
	{Name: "constant-token", Property: lease.LeaseExclusive, defects: func(d *redlock.Defects) { d.ConstantToken = true },
		Defect: "every grant has the same token, so any holder's refresh and release act on any other's lease"},
}

// PriorityMutants is the priority lock's catalogue (`lockprover mutants
// --kind priority-redlock`), from the reference's defects.
var PriorityMutants = []*Mutant{
	{Name: "equal-steals", Property: lease.StealOrder, Priority: true, defects: func(d *redlock.Defects) { d.EqualSteals = true },
		Defect: "an acquirer of equal priority steals the lock (prio <= mine, not <): equals take it from each other"},
	{Name: "no-ack-wait", Property: lease.LeaseExclusive, Priority: true, defects: func(d *redlock.Defects) { d.NoAckWait = true },
		Defect: "the thief returns right after the steal, without waiting for its victim's acknowledgement: both act at once"},
	{Name: "proceed-on-ack-timeout", Property: lease.LeaseExclusive, Priority: true, defects: func(d *redlock.Defects) { d.ProceedOnAckTimeout = true },
		Defect: "the thief waits for the acknowledgement only a quarter of the victim's time left (stolenConsistencyFactor < 1): a slow or cut-off victim still holds when it acts"},
	{Name: "steal-resets-ttl", Property: lease.LeaseExclusive, Priority: true, ownTTLs: true, defects: func(d *redlock.Defects) { d.StealResetsTTL = true },
		Defect: "the steal sets the key's life to the thief's ttl, not the longer of it and the victim's time left: a thief that dies or gives up frees the key before the victim's deadline, and a third client takes it"},
	{Name: "ack-before-lost", Property: lease.LeaseExclusive, Priority: true, defects: func(d *redlock.Defects) { d.AckBeforeLost = true },
		Defect: "the victim acknowledges, then marks itself lost: the thief may act while the victim still thinks it holds"},
	{Name: "direct-victim-only", Property: lease.LeaseExclusive, Priority: true, defects: func(d *redlock.Defects) { d.DirectVictimOnly = true }, servers: []int{1}, ladder: true,
		faults: []string{histories.Pause, histories.DropReply},
		Defect: "a thief notifies and waits for only the victim it took the key from, not the earlier victims of the key's chain: a failed steal robbed in turn acknowledges at once, and its own victim, never told, still holds while the robber acts"},
}

// MutantNamed returns the mutant called name, or nil.
func MutantNamed(name string) *Mutant {
	for _, m := range PriorityMutants {
		if m.Name == name {
			return m
		}
	}
	for _, m := range Mutants {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Apply switches the mutant's defect on in d.
func (m *Mutant) Apply(d *redlock.Defects) { m.defects(d) }
