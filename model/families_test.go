package model

import (
	"fmt"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// The toy family proves the seam: registered from this test file alone,
// its locks get its verdicts from Check, and nothing in the core names it.
func init() {
	Register("toy", func(events []histories.Event, o Options) []Verdict {
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
		return []Verdict{
			{Lock: lock, Property: "toy-ops", Status: Pass, Judged: ops, Detail: fmt.Sprintf("drift %g", o.DriftBound())},
			{Lock: lock, Property: "toy-faults", Status: Fail, Judged: faults, Ops: []int{events[0].Index}},
		}
	})
}

func TestFamilySeam(t *testing.T) {
	ev := func(i int, proc string, typ histories.Type, f, lock, kind string, v *histories.Value) histories.Event {
		return histories.Event{Index: i, Time: int64(i), Process: proc, Type: typ, F: f, Lock: lock, Kind: kind, Value: v}
	}
	h := []histories.Event{
		ev(0, "c1", histories.Invoke, "poke", "t", "toy", nil),
		ev(1, "c2", histories.Invoke, "acquire", "m", histories.Mutex, nil),
		ev(2, "c1", histories.Ok, "poke", "t", "toy", nil),
		ev(3, "c2", histories.Ok, "acquire", "m", histories.Mutex, nil),
		ev(4, "nemesis", histories.Invoke, "kill", "", "", &histories.Value{Process: "c2"}),
		ev(5, "nemesis", histories.Info, "kill", "", "", &histories.Value{Process: "c2"}),
		ev(6, "c3", histories.Invoke, "poke", "u", "toy", nil),
	}
	r := Check(h, Options{Drift: 0.05})
	var got []string
	for _, v := range r.Verdicts {
		got = append(got, fmt.Sprintf("%s/%s/%s/%d/%v/%s", v.Lock, v.Property, v.Status, v.Judged, v.Ops, v.Detail))
	}
	want := []string{
		"t/toy-ops/pass/1/[]/drift 0.05", "t/toy-faults/FAIL/2/[0]/",
		"m/slot-exclusive/pass/2/[]/", // the core judges the mutex as before
	}
	for i, w := range want {
		if i >= len(got) || got[i] != w {
			t.Fatalf("verdicts:\n%v\nwant them to begin\n%v", got, want)
		}
	}
	last := got[len(got)-2:]
	if last[0] != "u/toy-ops/pass/1/[]/drift 0.05" || last[1] != "u/toy-faults/FAIL/2/[4]/" {
		t.Errorf("second toy lock: %v", last)
	}
	if r.Status() != Fail {
		t.Errorf("report status %v, want FAIL from the toy family", r.Status())
	}
	// The mutex's verdicts are those of the history without the toy locks.
	core := Check([]histories.Event{h[1], h[3], h[4], h[5]}, Options{})
	var coreGot []string
	for _, v := range core.Verdicts {
		coreGot = append(coreGot, fmt.Sprintf("%s/%s/%s/%d/%v/%s", v.Lock, v.Property, v.Status, v.Judged, v.Ops, v.Detail))
	}
	if fmt.Sprint(coreGot) != fmt.Sprint(got[2:len(got)-2]) {
		t.Errorf("the mutex judged with toy locks:\n%v\nwithout:\n%v", got[2:len(got)-2], coreGot)
	}
}

func TestRegisterRefuses(t *testing.T) {
	for _, kind := range []string{"", histories.Semaphore, histories.Mutex, "toy"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", kind)
				}
			}()
			Register(kind, func([]histories.Event, Options) []Verdict { return nil })
		}()
	}
}

func TestDriftBound(t *testing.T) {
	if got := (Options{}).DriftBound(); got != DefaultDrift {
		t.Errorf("zero Drift: %g, want %g", got, DefaultDrift)
	}
	if got := (Options{Drift: 0.2}).DriftBound(); got != 0.2 {
		t.Errorf("Drift 0.2: %g", got)
	}
}

// A kind no family registered is inconclusive, never a pass.
func TestUnregisteredKind(t *testing.T) {
	h := []histories.Event{{Index: 0, Time: 1, Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "k", Kind: "nothing-registered"}}
	r := Check(h, Options{})
	if len(r.Verdicts) != 1 || r.Verdicts[0].Status != Inconclusive || r.Status() != Inconclusive {
		t.Errorf("verdicts %+v, want one inconclusive", r.Verdicts)
	}
}
