// Package model is what every lock family's checker shares: the verdict
// types (Verdict, Status, Excuse, Report), the evidence a run gives beyond
// its history, the registry of checkers by lock kind, and Check, which
// splits a history by lock and hands each lock to the checker of its kind,
// with the options every checker takes (a time budget, visualisations,
// whether the history was imported from Jepsen). A family's own knobs are
// not fields here: each family declares its options type, handed through
// Options.Family, and its checker lives in the family's folder
// (families/amqp/check for amqp-locks' semaphores and mutexes,
// families/lease for lease locks).
//
// A verdict never says more than the history shows: a check that runs out
// of time is Inconclusive, never Pass, and a property a history cannot show
// is NotJudged.
package model

import (
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
)

// The property names that more than one family judges, or that the core
// and the CLI read (the lease lens of check compares slot-exclusive with
// lease-exclusive; available fails for the processes' problems): named
// here so that what reads verdicts needs no family. A family declares its
// other properties itself.
const (
	SlotExclusive  = "slot-exclusive"
	AcquireExact   = "acquire-exact"
	Available      = "available"
	LeaseExclusive = "lease-exclusive"
)

// Status is a property's verdict.
type Status int

const (
	Pass Status = iota
	NotJudged
	Inconclusive
	Fail
)

func (s Status) String() string {
	return [...]string{"pass", "not judged", "inconclusive", "FAIL"}[s]
}

// Options tune Check: what every family's checker takes, and each
// family's own options.
type Options struct {
	// Timeout bounds each search a check makes (a linearizability
	// check); 0 means none. A check that runs out of time is
	// Inconclusive.
	Timeout time.Duration
	// Visualize keeps what Verdict.Visualize needs for every check that
	// has a view, not only the failed ones.
	Visualize bool
	// Jepsen says the history was imported from Jepsen
	// (histories.ReadAnyFile), which each family's checker reads as
	// Jepsen means it. It is a fact about the history, not a family's
	// knob, so it is here: a Jepsen history records no clean end, so
	// operations still in flight at its end are unknown outcomes that make
	// no liveness claim (every family's available); and Jepsen's faults
	// aim at nodes, not at a lock's holds, so the amqp-locks checker
	// judges a true mutex as Knossos's mutex model does (a hold ends only
	// with a release), while the lease lens judges it as leases.
	Jepsen bool
	// Evidence, if set, is what a run showed beyond its history.
	Evidence *Evidence
	// StatusOnly says only the verdicts' statuses are wanted (a search's
	// plans, most of which pass unseen): a checker may skip the work that
	// only explains a pass (re-checking it without the faults it may rest
	// on, to list them as excuses). A report anyone reads is judged
	// without it: prover judges a plan that violates a property again in
	// full.
	StatusOnly bool
	// Family are the families' own options, each a value of the type its
	// family declares (check.Options for amqp-locks, lease.Options for
	// lease locks): a checker reads the last value of its type
	// (FamilyOptions) and takes its defaults without one, so that one
	// Options judges a history whose locks belong to several families,
	// and no family sees another's knobs.
	Family []any
}

// FamilyOptions is the last value of type T in o.Family, or T's zero value:
// how a family's checker reads its own options.
func FamilyOptions[T any](o Options) T {
	var t T
	for _, f := range o.Family {
		if v, ok := f.(T); ok {
			t = v
		}
	}
	return t
}

// Evidence is what a run shows beyond its history, about one lock: what
// went wrong with the implementation's processes (available fails for it,
// whatever the family), and what else the family's runner recorded for
// its checker (amqp-locks: what each operation sent, the queues left).
type Evidence struct {
	Lock string // the lock the evidence is about
	// Problems are what went wrong with the implementation's processes:
	// crashes, garbage, wrong ids, timeouts, failures to start.
	Problems []string
	// Family is what the lock's family recorded for its checker, of a
	// type the family declares (*check.Evidence for amqp-locks); nil if
	// nothing.
	Family any
}

// A Verdict is one property of one lock.
type Verdict struct {
	Lock, Property string
	Status         Status
	// Judged is how many operations or observations the verdict rests on.
	Judged int
	// Slot is the slot a failure concerns, or 0.
	Slot int
	// Ops are the history indexes of the operations a failure involves.
	Ops []int
	// Detail says what went wrong, in words a person can act on.
	Detail string
	// Excuses are what a verdict let through because a fault, a clock
	// fault, an unknown outcome or a missing event may explain it, one by
	// one; a pass with excuses holds only if they are true.
	Excuses []Excuse
	// View, if set, writes an HTML view of the check behind the verdict
	// (porcupine's, for a linearizability check), for Visualize; a
	// checker sets it for a failure, or for every check with
	// Options.Visualize.
	View func(w io.Writer) error
}

// An Excuse is one thing a verdict let through because a fault, a clock
// fault, an unknown outcome or a missing event may explain it: a pass with
// excuses holds only if they are true, so a report lists each.
type Excuse struct {
	// Ops are the history indexes of the operations concerned: what was
	// excused, then what excused it.
	Ops []int
	// Why says what was excused and by what, in words.
	Why string
}

// Visualize writes the view of the check behind v (porcupine's, with
// faults as annotations, for a linearizability check). It reports false if
// v has none (it was not a check with a view, or Options.Visualize was off
// and v passed).
func (v *Verdict) Visualize(w io.Writer) (bool, error) {
	if v.View == nil {
		return false, nil
	}
	return true, v.View(w)
}

// A Report is every verdict for every lock of a history, locks in the
// order they first appear and properties in a fixed order.
type Report struct {
	Verdicts []Verdict
}

// Status is the report's worst verdict: Fail, else Inconclusive, else Pass.
func (r *Report) Status() Status {
	s := Pass
	for _, v := range r.Verdicts {
		if v.Status > s && v.Status != NotJudged {
			s = v.Status
		}
	}
	return s
}

// Check checks a validated history (as histories.Read returns it): each
// lock is judged by the checker registered for its kind (Register), then
// the evidence's problems fail available, and a pass that rests on nothing
// is NotJudged.
func Check(h []histories.Event, o Options) *Report {
	locks, order := byLock(h)
	r := &Report{}
	for _, name := range order {
		l := locks[name]
		r.Verdicts = append(r.Verdicts, l.check(l.events, o)...)
	}
	if e := o.Evidence; e != nil && len(e.Problems) > 0 {
		r.Verdicts = problems(r.Verdicts, e)
	}
	for i := range r.Verdicts {
		if v := &r.Verdicts[i]; v.Status == Pass && v.Judged == 0 && v.Detail == "" && len(v.Excuses) == 0 {
			v.Status, v.Detail = NotJudged, "nothing to judge: the history holds no operation this property rests on"
		}
	}
	return r
}

// problems fails the available verdict of the evidence's lock: its
// implementation's processes failed (crashed, wrote garbage, timed out),
// whatever the history shows; a lock with no verdict gets one.
func problems(vs []Verdict, e *Evidence) []Verdict {
	found := false
	for i := range vs {
		if v := &vs[i]; v.Lock == e.Lock {
			found = true
			if v.Property == Available {
				v.Status, v.Detail = Fail, "the implementation's processes failed: "+strings.Join(e.Problems, "; ")
			}
		}
	}
	if !found {
		vs = append(vs, Verdict{Lock: e.Lock, Property: Available, Status: Fail,
			Detail: "the implementation's processes failed: " + strings.Join(e.Problems, "; ")})
	}
	return vs
}

// DefaultDrift is the drift bound clocks are held to unless told otherwise
// (lease.Options.Drift, check's --drift): 1%, Redlock's clock drift factor,
// and wide enough for NTP-disciplined clocks over any ttl longer than a few
// milliseconds. It is here, not in a family, so that the CLI's default
// needs none.
const DefaultDrift = 0.01
