package run

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// TestIncarnations: each incarnation of a process runs as a process of
// its own on the backend, c1 then c1#2; the backend's reports of an older
// one, or of a process done, find nobody.
func TestIncarnations(t *testing.T) {
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return 0 }})
	p := &Proc{Name: "c1"}
	r.Add(p)
	if got := r.ProcessOf("c1"); got != "c1" {
		t.Errorf("before it started: %q, want c1", got)
	}
	var ran []string
	spawn := func(process string, f func(string)) { f(process) } // a backend's Go, at once
	body := func(proc string, gen int) { ran = append(ran, fmt.Sprintf("%s %d", proc, gen)) }
	Start(&r, p, spawn, body)
	if p.Process != "c1" {
		t.Errorf("first incarnation: %q, want c1", p.Process)
	}
	Start(&r, p, spawn, body)
	if r.ProcessOf("c1") != "c1#2" || r.ProcessOf("probe1") != "probe1" || !reflect.DeepEqual(ran, []string{"c1 1", "c1#2 2"}) {
		t.Errorf("second incarnation: %q, ran %q; want c1#2, and c1 1, c1#2 2", r.ProcessOf("c1"), ran)
	}
	if r.Current("c1#2") != p || r.Current("c1") != nil {
		t.Errorf("Current: the live incarnation's process only")
	}
	if p.Done = true; r.Current("c1#2") != nil {
		t.Errorf("Current: a process done is nobody's")
	}
}

// TestFinish: the completion takes the invocation's place and says the
// error; the nemesis's faults are recorded as invoke and info.
func TestFinish(t *testing.T) {
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return 0 }})
	p := &Proc{Name: "c1"}
	r.Invoke(p, histories.Event{Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"})
	r.Struck(histories.Kill, &histories.Fault{Process: "c1"})
	e := r.Finish(p, histories.Info, nil, errors.New("killed"))
	if e.Process != "c1" || e.F != histories.Acquire || e.Lock != "lp" || e.Type != histories.Info || e.Error != "killed" || e.Index != 3 {
		t.Errorf("Finish recorded %+v", e)
	}
	r.Problems = append(r.Problems, "c2 crashed")
	res, err := r.Result("lp")
	if err != nil || len(res.History) != 4 || res.History[1].F != histories.Kill || res.History[2].Type != histories.Info ||
		res.Evidence.Lock != "lp" || len(res.Evidence.Problems) != 1 {
		t.Errorf("Result = %+v, %v", res, err)
	}
}

// TestFinishAtGoesBefore: a completion whose call returned before events
// recorded since (another process's invoke, a fault) goes in before them,
// at its time; they move one index up, and another process's operation in
// flight is still found (InFlight).
func TestFinishAtGoesBefore(t *testing.T) {
	now := int64(100)
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return now }})
	c1, c2 := &Proc{Name: "c1"}, &Proc{Name: "c2"}
	r.Invoke(c1, histories.Event{Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"})
	now = 300
	inv2 := r.Invoke(c2, histories.Event{Process: "c2", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"})
	now = 400
	r.Struck(histories.Pause, &histories.Fault{Process: "redis1"})
	now = 500
	e := r.FinishAt(c1, histories.Ok, nil, nil, 200) // c1's call returned at 200
	if e.Index != 1 || e.Time != 200 {
		t.Errorf("c1's completion at 200 recorded as #%d at %d, want #1 at 200", e.Index, e.Time)
	}
	got, ok := r.InFlight(c2)
	if !ok || got.Process != "c2" || got.Type != histories.Invoke || got.Index != inv2.Index+1 {
		t.Errorf("c2's operation in flight = %+v, %v; want its invoke, now #%d", got, ok, inv2.Index+1)
	}
	h := r.Rec.Events()
	for i, e := range h {
		if e.Index != i || (i > 0 && e.Time <= h[i-1].Time) {
			t.Errorf("event %d: index %d time %d, after %d", i, e.Index, e.Time, h[i-1].Time)
		}
	}
	if e := r.Finish(c2, histories.Ok, nil, nil); e.Index != 5 || h[2].Process != "c2" {
		t.Errorf("c2's completion #%d, history %v", e.Index, h)
	}
}

// TestStruckFromGoesBefore: a fault applied from an earlier reading of the
// clock (a real server's clock jump, whose effect came before the nemesis
// could record it) goes in at that reading, before another process's
// completion recorded meanwhile, invocation and info alike; the operation
// still in flight is found; StruckFrom at math.MaxInt64 is Struck.
func TestStruckFromGoesBefore(t *testing.T) {
	now := int64(100)
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return now }})
	c1, c2 := &Proc{Name: "c1"}, &Proc{Name: "c2"}
	r.Invoke(c1, histories.Event{Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"})
	r.Invoke(c2, histories.Event{Process: "c2", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"})
	now = 150
	at := r.Now() // the nemesis reads the clock, then applies its fault
	now = 300
	r.Finish(c2, histories.Ok, nil, nil) // meanwhile c2's acquire returns
	now = 400
	v := &histories.Fault{Process: "redis1", OffsetMs: histories.Int(2878)}
	r.StruckFrom(histories.ClockJump, v, at)
	h := r.Rec.Events()
	if len(h) != 5 || h[2].F != histories.ClockJump || h[2].Type != histories.Invoke || h[3].F != histories.ClockJump || h[3].Type != histories.Info ||
		h[2].Time != 150 || h[4].Process != "c2" || h[4].Type != histories.Ok {
		t.Fatalf("want c1, c2 invoked, the jump (invoke and info, at 150), then c2's ok; got %+v", h)
	}
	if got, ok := r.InFlight(c1); !ok || got.Index != 0 {
		t.Errorf("c1's operation in flight = %+v, %v; want its invoke #0", got, ok)
	}
	now = 500
	r.StruckFrom(histories.Pause, &histories.Fault{Process: "redis1"}, math.MaxInt64)
	if h := r.Rec.Events(); len(h) != 7 || h[5].Time != 500 || h[5].F != histories.Pause {
		t.Errorf("StruckFrom(MaxInt64) did not record as Struck, now: %+v", h[5:])
	}
}
