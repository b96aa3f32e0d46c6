package model

import (
	"sync"

	"github.com/lockprover/lockprover/histories"
)

// A FamilyCheck judges one lock of a family the core does not know. It gets
// the lock's events and every nemesis event of the history, in history
// order and with their original indexes, and returns the lock's verdicts,
// each naming the lock, in the order the family lists its properties.
type FamilyCheck func(events []histories.Event, o Options) []Verdict

var families struct {
	sync.RWMutex
	m map[string]FamilyCheck
}

// Register makes Check judge the locks of kind with check. A family
// registers itself from an init function, and a program links it in with
// a blank import (cmd/lockprover/families.go), so that model need not
// import the families. Registering the built-in kinds (semaphore, mutex),
// an empty kind or a kind twice is a programming error, and panics.
func Register(kind string, check FamilyCheck) {
	families.Lock()
	defer families.Unlock()
	switch {
	case kind == "" || kind == histories.Semaphore || kind == histories.Mutex:
		panic("model.Register: kind " + `"` + kind + `"` + " is not a family's to take")
	case check == nil:
		panic("model.Register: nil check for kind " + kind)
	case families.m[kind] != nil:
		panic("model.Register: kind " + kind + " registered twice")
	}
	if families.m == nil {
		families.m = map[string]FamilyCheck{}
	}
	families.m[kind] = check
}

// family returns the check registered for kind, or nil.
func family(kind string) FamilyCheck {
	families.RLock()
	defer families.RUnlock()
	return families.m[kind]
}

// byFamily sets aside the locks of registered kinds: it returns the events
// the core judges (h itself when no lock is of a registered kind), the
// events of each family lock (with every nemesis event), and the order in
// which every lock, core or family, first appears.
func byFamily(h []histories.Event) (core []histories.Event, fam map[string]*familyLock, order []string) {
	kinds := map[string]FamilyCheck{}
	for _, e := range h {
		if e.Lock == "" {
			continue
		}
		if _, seen := kinds[e.Lock]; !seen {
			c := family(e.Kind)
			if c == nil && e.Kind != "" && e.Kind != histories.Semaphore && e.Kind != histories.Mutex {
				c = unjudged(e.Kind)
			}
			kinds[e.Lock] = c
			order = append(order, e.Lock)
		}
	}
	any := false
	for _, c := range kinds {
		any = any || c != nil
	}
	if !any {
		return h, nil, order
	}
	fam = map[string]*familyLock{}
	for l, c := range kinds {
		if c != nil {
			fam[l] = &familyLock{check: c}
		}
	}
	for _, e := range h {
		switch {
		case e.Lock == "":
			core = append(core, e)
			for _, fl := range fam {
				fl.events = append(fl.events, e)
			}
		case fam[e.Lock] != nil:
			fam[e.Lock].events = append(fam[e.Lock].events, e)
		default:
			core = append(core, e)
		}
	}
	return core, fam, order
}

// A familyLock is a lock of a registered kind: its check and its events.
type familyLock struct {
	check  FamilyCheck
	events []histories.Event
}

// unjudged is the check of a kind no family registered in this program
// (histories.Lease without families/lease linked in): Inconclusive, never
// a pass.
func unjudged(kind string) FamilyCheck {
	return func(events []histories.Event, o Options) []Verdict {
		lock := ""
		for _, e := range events {
			if e.Lock != "" {
				lock = e.Lock
				break
			}
		}
		return []Verdict{{Lock: lock, Property: "kind", Status: Inconclusive,
			Detail: "no checker for kind " + kind + " is linked into this program (a family registers itself with model.Register)"}}
	}
}
