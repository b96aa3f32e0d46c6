package pgadvisoryrun

import (
	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// A Mutant is a deliberately broken variant of the reference (Lock with
// one of its Defects), and the property that must catch it.
type Mutant struct {
	Name, Defect, Property string
	defects                func(*pgadvisory.Defects)
}

// Mutants is the catalogue, in the order `lockprover mutants` lists it.
var Mutants = []*Mutant{
	{Name: "no-check", Property: lease.NoRevival, defects: func(d *pgadvisory.Defects) { d.NoCheck = true },
		Defect: "refresh asks the server nothing (as a holder that never looks again): a holder whose session the server ended while it was paused or cut off goes on as if it held the lock"},
	{Name: "short-idle", Property: lease.LeaseExclusive, defects: func(d *pgadvisory.Defects) { d.ShortIdle = true },
		Defect: "the session's idle_session_timeout is half the ttl the holder counts on: the server frees the lock of an idle holder whose lease is still running"},
	{Name: "unlock-elsewhere", Property: lease.AcquireExact, defects: func(d *pgadvisory.Defects) { d.UnlockElsewhere = true },
		Defect: "release unlocks on a fresh session (as from a connection pool), which does not hold the lock, and reports success: the lock stays held by the old session"},
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
func (m *Mutant) Defects() pgadvisory.Defects {
	var d pgadvisory.Defects
	m.defects(&d)
	return d
}
