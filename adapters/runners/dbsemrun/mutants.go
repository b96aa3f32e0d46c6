package dbsemrun

import (
	"github.com/lockprover/lockprover/model/dbsem"
	"github.com/lockprover/lockprover/model/lease"
)

// A Mutant is a deliberately broken variant of the reference (package
// dbsem with one of its Defects): a defect lockprover must catch, and the
// property that must catch it.
type Mutant struct {
	Name, Defect, Property string
	defects                func(*dbsem.Defects)
	options                func(*Options) // what the defect needs of the design
}

// Mutants is the catalogue, in the order `lockprover mutants` lists it.
var Mutants = []*Mutant{
	{Name: "refresh-revives-expired", Property: lease.NoRevival, defects: func(d *dbsem.Defects) { d.RefreshRevivesExpired = true },
		Defect: "refresh has no 'expires > now' condition (as upstream): refreshing an expired lease nobody has taken yet succeeds and revives it"},
	{Name: "release-after-expiry-succeeds", Property: lease.NoRevival, defects: func(d *dbsem.Defects) { d.ReleaseAfterExpirySucceeds = true },
		Defect: "release has no 'expires > now' condition (as upstream): releasing an expired lease reports success"},
	{Name: "client-clock-expiry", Property: lease.LeaseExclusive, defects: func(d *dbsem.Defects) { d.ClientClockExpiry = true },
		Defect: "expiry is judged by the client's clock, not the database's: a client whose clock runs ahead takes leases others still hold"},
	{Name: "no-skip-locked", Property: lease.LeaseExclusive, defects: func(d *dbsem.Defects) { d.NoSkipLocked = true },
		options: func(o *Options) { o.Design = "row-per-slot" },
		Defect:  "row-per-slot picks the free row with a plain SELECT (no FOR UPDATE SKIP LOCKED): two acquirers take the same row and both win"},
	{Name: "count-without-lock", Property: lease.LeaseExclusive, defects: func(d *dbsem.Defects) { d.CountWithoutLock = true },
		options: func(o *Options) { o.Design = "master-row" },
		Defect:  "master-row reads the master row without FOR UPDATE: two acquirers both count fewer than max and both insert"},
	{Name: "mixed-max", Property: lease.LeaseExclusive, defects: func(d *dbsem.Defects) { d.MixedMax = true },
		Defect: "the limit is not agreed (as upstream): each acquire trusts its own max, so callers passing different limits exceed the smaller one"},
	{Name: "fence-from-uuid", Property: lease.Fencing, defects: func(d *dbsem.Defects) { d.FenceFromUUID = true },
		options: func(o *Options) { o.Fencing = true },
		Defect:  "the fence is derived from the token's UUID, not a counter: fences do not increase in the order grants took effect"},
	{Name: "ambiguous-commit-retry", Property: lease.AcquireExact, defects: func(d *dbsem.Defects) { d.AmbiguousCommitRetry = true },
		Defect: "an acquire whose COMMIT reply was lost is retried on a fresh connection: it takes a second slot, and the first stays taken until it expires"},
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

// Defects are the reference's defects the mutant switches on.
func (m *Mutant) Defects() dbsem.Defects {
	var d dbsem.Defects
	m.defects(&d)
	return d
}
