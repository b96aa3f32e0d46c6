package consulsemrun

import (
	"fmt"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/model/lease"
)

// A Mutant is a deliberately broken variant of the reference (package
// consulsem with one of its Defects): a defect lockprover must catch, and
// the property that must catch it.
type Mutant struct {
	Name, Defect, Property string
	defects                func(*consulsem.Defects)
	// mixedLimits: its plans give the clients limits of their own (a
	// defect of the agreement on the limit).
	mixedLimits bool
}

// Mutants is the catalogue, in the order `lockprover mutants` lists it:
// one per consulsem.Defects field the lease checker can catch.
// NoLiveCheck is left out: on the simulator a session dies only of its
// TTL (or with a -dev agent's restart, which breaks the reference too), so
// one that died before the grant died after the grant's certain validity
// (its acquire's invoke plus the TTL) had passed, and no lease property
// can tell its grant from a good one (TestNoLiveCheckStrikesUnseen: on
// every schedule of small scopes it strikes, and every property holds).
var Mutants = []*Mutant{
	{Name: "consul-cas-to-put", Property: lease.LeaseExclusive, defects: func(d *consulsem.Defects) { d.PlainPut = true },
		Defect: "the lock key is written without the check on its index (a plain PUT, not ?cas): two contenders that read the same listing are both granted"},
	{Name: "consul-limit-gt", Property: lease.LeaseExclusive, defects: func(d *consulsem.Defects) { d.LimitGreater = true },
		Defect: "the semaphore is full only when more than limit holders are alive (> instead of >=): one holder too many"},
	{Name: "consul-local-limit", Property: lease.LeaseExclusive, defects: func(d *consulsem.Defects) { d.LocalLimit = true }, mixedLimits: true,
		Defect: "each acquire uses its own limit, not the one agreed in the lock key: a limit-2 acquire is granted beside a limit-1 holder"},
	{Name: "consul-no-prune", Property: lease.Recovers, defects: func(d *consulsem.Defects) { d.NoPrune = true },
		Defect: "holders whose session is gone are never pruned from the lock key: a dead holder's slot is never free again"},
	{Name: "consul-plain-contender", Property: lease.Available, defects: func(d *consulsem.Defects) { d.PlainContender = true },
		Defect: "the contender key is put without ?acquire (etcd: without the lease): the grant's check that the session holds it refuses every acquire"},
	{Name: "consul-release-ok", Property: lease.NoRevival, defects: func(d *consulsem.Defects) { d.ReleaseOKAfterPruned = true },
		Defect: "release answers ok when the holder was pruned or its session is gone (upstream's Semaphore.Release): ok for a lease that had expired"},
	{Name: "consul-monitor-forever", Property: lease.Aware, defects: func(d *consulsem.Defects) { d.VerifyHeldThroughFailures = true },
		Defect: "verify looks only at the lock key's holders, and answers held when the backend cannot be read (Consul #18271): a holder whose session died keeps believing it holds"},
	{Name: "consul-delete-fence", Property: lease.Fencing, defects: func(d *consulsem.Defects) { d.FenceRestarts = true },
		Defect: "the fence is the contender key's own counter (LockIndex, etcd's Version), which starts again with every new key: every fence is 1"},
}

// MutantNamed returns the mutant called name, or nil.
func MutantNamed(name string) *Mutant {
	for _, m := range Mutants {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// ApplyMutant switches on the defects of the mutant called name in d,
// for the reference served over the process protocol; an error if there
// is no such mutant.
func ApplyMutant(name string, d *consulsem.Defects) error {
	m := MutantNamed(name)
	if m == nil {
		return fmt.Errorf("no %s mutant named %q", Kind, name)
	}
	m.defects(d)
	return nil
}
