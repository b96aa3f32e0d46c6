// Package model says what correct means: the checker of each lock kind,
// registered by the family that declares the kind (Register), and Check,
// which splits a history by lock and hands each lock to the checker of its
// kind, with the options every checker takes (a time budget,
// visualisations, whether the history was imported from Jepsen) and the
// evidence a run gives beyond its history. A family's own knobs are not
// fields here: its checker declares its options type, handed through
// Options.Family.
// The checkers live below it (amqpcheck for amqp-locks' semaphores and
// mutexes, lease for lease locks), beside the references they judge
// (amqplocks, dbsem, redlock, consulsem, pgadvisory); the verdicts they
// give are histories/verdict's.
//
// A verdict never says more than the history shows: a check that runs out
// of time is Inconclusive, never Pass, and a property a history cannot show
// is NotJudged.
package model

import (
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
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
	// family's checker declares (amqpcheck.Options for amqp-locks,
	// lease.Options for lease locks): a checker reads the last value of
	// its type (FamilyOptions) and takes its defaults without one, so that
	// one Options judges a history whose locks belong to several families,
	// and no family sees another's knobs.
	Family []any
}

// FamilyOptions is the last value of type T in o.Family, or T's zero
// value: how a family's checker reads its own options.
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
	// Family is what the lock's family recorded for its checker, of a type
	// the family declares (*amqpcheck.Evidence for amqp-locks); nil if
	// nothing.
	Family any
	// Trace is what the runner saw of the servers' side, line by line (on
	// RabbitMQ, each connection's opening and end as its proxy saw them),
	// for a reader of a counterexample: no verdict rests on it.
	Trace []string `json:"-"`
}

// Check checks a validated history (as histories.Read returns it): each
// lock is judged by the checker registered for its kind (Register), then
// the evidence's problems fail available, and a pass that rests on nothing
// is NotJudged.
func Check(h []histories.Event, o Options) *verdict.Report {
	locks, order := byLock(h)
	r := &verdict.Report{}
	for _, name := range order {
		l := locks[name]
		r.Verdicts = append(r.Verdicts, l.check(l.events, o)...)
	}
	if e := o.Evidence; e != nil && len(e.Problems) > 0 {
		r.Verdicts = problems(r.Verdicts, e)
	}
	for i := range r.Verdicts {
		if v := &r.Verdicts[i]; v.Status == verdict.Pass && v.Judged == 0 && v.Detail == "" && len(v.Excuses) == 0 {
			v.Status, v.Detail = verdict.NotJudged, "nothing to judge: the history holds no operation this property rests on"
		}
	}
	return r
}

// problems fails the available verdict of the evidence's lock: its
// implementation's processes failed (crashed, wrote garbage, timed out),
// whatever the history shows; a lock with no verdict gets one.
func problems(vs []verdict.Verdict, e *Evidence) []verdict.Verdict {
	found := false
	for i := range vs {
		if v := &vs[i]; v.Lock == e.Lock {
			found = true
			if v.Property == Available {
				v.Status, v.Detail = verdict.Fail, "the implementation's processes failed: "+strings.Join(e.Problems, "; ")
			}
		}
	}
	if !found {
		vs = append(vs, verdict.Verdict{Lock: e.Lock, Property: Available, Status: verdict.Fail,
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
