// Package verdict holds what judging a history leaves: a Verdict per
// property of each lock, its Status, the Excuses a pass rests on, and the
// Report of every verdict of a history. The checkers (package model and
// the checkers it registers) give them; the report page, the results and
// the CLI read them.
//
// A verdict never says more than the history shows: a check that runs out
// of time is Inconclusive, never Pass, and a property a history cannot show
// is NotJudged.
package verdict

import "io"

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
