package model

import (
	"fmt"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// toyOptions are the toy family's own options, as a family declares them.
type toyOptions struct{ Drift float64 }

// The toy family proves the seam: registered from this test file alone,
// its locks get its verdicts from Check, with its own options, and
// nothing in the core names it.
func init() {
	Register("toy", func(events []histories.Event, o Options) []verdict.Verdict {
		lock, ops, faults := "", 0, 0
		for _, e := range events {
			switch {
			case e.Process == "nemesis":
				faults++
			case e.Type == histories.Invoke:
				lock = e.Lock
				ops++
			}
		}
		return []verdict.Verdict{
			{Lock: lock, Property: "toy-ops", Status: verdict.Pass, Judged: ops, Detail: fmt.Sprintf("drift %g", FamilyOptions[toyOptions](o).Drift)},
			{Lock: lock, Property: "toy-faults", Status: verdict.Fail, Judged: faults, Ops: []int{events[0].Index}},
		}
	})
}

func TestFamilySeam(t *testing.T) {
	ev := func(i int, proc string, typ histories.Type, f, lock, kind string, v histories.Value) histories.Event {
		return histories.Event{Index: i, Time: int64(i), Process: proc, Type: typ, F: f, Lock: lock, Kind: kind, Value: v}
	}
	h := []histories.Event{
		ev(0, "c1", histories.Invoke, "poke", "t", "toy", nil),
		ev(1, "c2", histories.Invoke, "acquire", "m", histories.Mutex, nil),
		ev(2, "c1", histories.Ok, "poke", "t", "toy", nil),
		ev(3, "c2", histories.Ok, "acquire", "m", histories.Mutex, nil),
		ev(4, "nemesis", histories.Invoke, "kill", "", "", &histories.Fault{Process: "c2"}),
		ev(5, "nemesis", histories.Info, "kill", "", "", &histories.Fault{Process: "c2"}),
		ev(6, "c3", histories.Invoke, "poke", "u", "toy", nil),
	}
	r := Check(h, Options{Family: []any{"another family's", toyOptions{Drift: 0.01}, toyOptions{Drift: 0.05}}})
	var got []string
	for _, v := range r.Verdicts {
		got = append(got, fmt.Sprintf("%s/%s/%s/%d/%v/%s", v.Lock, v.Property, v.Status, v.Judged, v.Ops, v.Detail))
	}
	want := []string{
		"t/toy-ops/pass/1/[]/drift 0.05", "t/toy-faults/FAIL/2/[0]/",
		"m/kind/inconclusive/0/[]/no checker for kind mutex is linked into this program (a family registers itself with model.Register)",
		"u/toy-ops/pass/1/[]/drift 0.05", "u/toy-faults/FAIL/2/[4]/",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("verdicts:\n%v\nwant\n%v", got, want)
	}
	if r.Status() != verdict.Fail {
		t.Errorf("report status %v, want FAIL from the toy family", r.Status())
	}
}

// The processes' problems fail available, whatever the family, and a lock
// with no verdict gets one.
func TestProblemsFailAvailable(t *testing.T) {
	r := Check(nil, Options{Evidence: &Evidence{Lock: "other", Problems: []string{"c1: garbage"}}})
	if len(r.Verdicts) != 1 || r.Verdicts[0].Property != Available || r.Verdicts[0].Status != verdict.Fail {
		t.Errorf("verdicts %+v, want available failed", r.Verdicts)
	}
}

func TestRegisterRefuses(t *testing.T) {
	for _, kind := range []string{"", "toy"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", kind)
				}
			}()
			Register(kind, func([]histories.Event, Options) []verdict.Verdict { return nil })
		}()
	}
}

// A kind no family registered is inconclusive, never a pass.
func TestUnregisteredKind(t *testing.T) {
	h := []histories.Event{{Index: 0, Time: 1, Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "k", Kind: "nothing-registered"}}
	r := Check(h, Options{})
	if len(r.Verdicts) != 1 || r.Verdicts[0].Status != verdict.Inconclusive || r.Status() != verdict.Inconclusive {
		t.Errorf("verdicts %+v, want one inconclusive", r.Verdicts)
	}
}
