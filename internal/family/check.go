package family

import (
	"slices"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// CheckFlags are what check does with a family's flags for it (its Flags
// with the Check verb), beyond handing their values to Judging: it
// refuses bad values, and judges the histories it imports from Jepsen
// through the lens they may switch on (the lease families' --lease-ttl
// judges them as lease locks'). Families that take the same flags for
// check share one *CheckFlags, as they declare the flags alike: check
// uses each once.
type CheckFlags struct {
	// Check says what is wrong with the flags' values (flag gives each by
	// name: as given, or its Default): a message per bad value, naming
	// its flag; none when every one can be used.
	Check func(flag func(name string) string) []string
	// Lens, if set, gives the lens the flags' values switch on, or nil
	// when they switch on none. check asks it only of values Check took.
	Lens func(flag func(name string) string) *Lens
}

// A Lens is a way to judge a history check imports from Jepsen (a true
// mutex's, which Knossos's mutex model judges) as another kind of lock's:
// the lease lens judges it as a lease lock's.
type Lens struct {
	// Name says it in a report's header: judged "through the lease lens".
	Name string
	// View returns the history h read from path (imp is what its import
	// did, nil for lockprover's own JSON lines) as judged through the
	// lens, adding to imp.Notes what it did; an error, naming path, says
	// why the history cannot be judged so.
	View func(path string, h []histories.Event, imp *histories.Imported) ([]histories.Event, error)
	// Excuse, if set, adds to r, the report on what View returned, what
	// the lens let through that Knossos's mutex model finds in the history
	// as imported (knossos, its report).
	Excuse func(r, knossos *verdict.Report)
}

// AllCheckFlags lists the registered families' CheckFlags, each once, in
// registration order.
func AllCheckFlags() []*CheckFlags {
	var out []*CheckFlags
	for _, d := range All() {
		if d.CheckFlags != nil && !slices.Contains(out, d.CheckFlags) {
			out = append(out, d.CheckFlags)
		}
	}
	return out
}
