package model

import (
	"sync"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// A Checker judges one lock of a family's kind. It gets
// the lock's events and every nemesis event of the history, in history
// order and with their original indexes, and returns the lock's verdicts,
// each naming the lock, in the order the family lists its properties. The
// events may be the caller's history itself (a history of one lock is
// passed as it is): a check reads them and never writes them.
type Checker func(events []histories.Event, o Options) []verdict.Verdict

var checkers struct {
	sync.RWMutex
	m map[string]Checker
}

// Register makes Check judge the locks of kind with check. A family
// registers its checker from an init function (model/amqpcheck for
// semaphores and mutexes, model/lease for lease locks), and a program
// links it in with an import, so that model need not import the families.
// Registering an empty kind, a nil check or a kind twice is a programming
// error, and panics.
func Register(kind string, check Checker) {
	checkers.Lock()
	defer checkers.Unlock()
	switch {
	case kind == "":
		panic("model.Register: an empty kind is not a family's to take")
	case check == nil:
		panic("model.Register: nil check for kind " + kind)
	case checkers.m[kind] != nil:
		panic("model.Register: kind " + kind + " registered twice")
	}
	if checkers.m == nil {
		checkers.m = map[string]Checker{}
	}
	checkers.m[kind] = check
}

// checkerOf returns the check registered for kind (a lock whose events name
// none is a semaphore, as histories reads it), or unjudged.
func checkerOf(kind string) Checker {
	if kind == "" {
		kind = histories.Semaphore
	}
	checkers.RLock()
	defer checkers.RUnlock()
	if c := checkers.m[kind]; c != nil {
		return c
	}
	return unjudged(kind)
}

// byLock splits h by lock: each lock's check (by the kind of its first
// event) and events, with every event of no lock (the nemesis's), and the
// order in which the locks first appear.
func byLock(h []histories.Event) (locks map[string]*kindLock, order []string) {
	locks = map[string]*kindLock{}
	for _, e := range h {
		if e.Lock != "" && locks[e.Lock] == nil {
			locks[e.Lock] = &kindLock{check: checkerOf(e.Kind)}
			order = append(order, e.Lock)
		}
	}
	if len(order) == 1 { // a plan's history: every event is its lock's or no lock's
		locks[order[0]].events = h
		return locks, order
	}
	for _, e := range h {
		if e.Lock != "" {
			locks[e.Lock].events = append(locks[e.Lock].events, e)
			continue
		}
		for _, l := range locks {
			l.events = append(l.events, e)
		}
	}
	return locks, order
}

// A kindLock is one lock of a history: its check and its events.
type kindLock struct {
	check  Checker
	events []histories.Event
}

// unjudged is the check of a kind no family registered in this program
// (histories.Lease without model/lease linked in): Inconclusive, never
// a pass.
func unjudged(kind string) Checker {
	return func(events []histories.Event, o Options) []verdict.Verdict {
		lock := ""
		for _, e := range events {
			if e.Lock != "" {
				lock = e.Lock
				break
			}
		}
		return []verdict.Verdict{{Lock: lock, Property: "kind", Status: verdict.Inconclusive,
			Detail: "no checker for kind " + kind + " is linked into this program (a family registers itself with model.Register)"}}
	}
}
