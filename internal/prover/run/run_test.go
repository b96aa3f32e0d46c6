package run

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// TestTimeline: timed faults by time, in the plan's order at one time,
// each end after its fault; faults struck by counts left out.
func TestTimeline(t *testing.T) {
	type f struct{ at, lasts int }
	faults := []f{{50, 0}, {10, 30}, {-1, 0}, {40, 5}}
	got := Timeline(len(faults), func(i int) (int, int, bool) { return faults[i].at, faults[i].lasts, faults[i].at >= 0 })
	want := []Timed{{At: 10, Fault: 1}, {At: 40, Fault: 1, End: true}, {At: 40, Fault: 3}, {At: 45, Fault: 3, End: true}, {At: 50, Fault: 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Timeline = %v, want %v", got, want)
	}
}

// TestHolds: the holds end by target, then in Config.Ends's order; a
// process a fault holds is not waited for with exceptHeld.
func TestHolds(t *testing.T) {
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return 0 }, Ends: []string{"pause", "partition"}})
	for _, n := range []string{"c1", "c2"} {
		r.Add(&Proc{Name: n})
	}
	r.Hold("partition", "c2")
	r.Hold("pause", "c2")
	r.Hold("partition", "c1")
	want := []Hold{{"partition", "c1"}, {"pause", "c2"}, {"partition", "c2"}}
	if got := r.Holds(); !reflect.DeepEqual(got, want) {
		t.Errorf("Holds = %v, want %v", got, want)
	}
	if r.allDone(false) || !r.allDone(true) {
		t.Errorf("allDone: both held, neither done: want false, then true with exceptHeld")
	}
	r.Unhold("partition", "c1")
	if r.Held("partition", "c1") || r.holding("c1") || r.allDone(true) {
		t.Errorf("c1 still held after its heal")
	}
}

// TestNemesis plays a run on a clock that moves only when the nemesis
// sleeps: the faults strike at their times, then the end comes in its
// order; a process that never finishes makes the run stuck.
func TestNemesis(t *testing.T) {
	for _, finish := range []bool{true, false} {
		var now int64
		var r Runner
		r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return now }, Poll: Poll{time.Millisecond, 8 * time.Millisecond}})
		c1 := &Proc{Name: "c1"}
		r.Add(c1)
		var log []string
		say := func(s string) { log = append(log, fmt.Sprintf("%d %s", now/int64(time.Millisecond), s)) }
		r.Nemesis([]Timed{{At: 5}, {At: 7, End: true}}, Nemesis{
			Sleep: func(d time.Duration) error {
				now += int64(d)
				c1.Done = finish && now >= int64(20*time.Millisecond)
				return nil
			},
			Strike:    func(t Timed) { say(fmt.Sprint("strike ", t.End)) },
			EndFaults: func() { say("end faults") },
			Settle:    func() { say("settle") },
			Probe:     func() { say("probe") },
			Abandon:   func(name string) { say("abandon " + name) },
			Patience:  time.Second,
		})
		if finish {
			want := "5 strike false, 7 strike true, 22 end faults, 22 settle, 22 probe"
			if got := strings.Join(log, ", "); got != want || r.Stuck() != nil {
				t.Errorf("log %q, stuck %v; want %q", got, r.Stuck(), want)
			}
			continue
		}
		if err := r.Stuck(); err == nil || !strings.Contains(err.Error(), "c1 still running") || !c1.Done || !strings.HasSuffix(log[len(log)-1], "abandon c1") {
			t.Errorf("stuck %v, c1 done %v, log %q", err, c1.Done, log)
		}
	}
}

// TestAwaitInterrupted: a sleep's error ends Await with it.
func TestAwaitInterrupted(t *testing.T) {
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return 0 }, Poll: Poll{time.Millisecond, time.Millisecond}})
	stop := errors.New("interrupted")
	if err := r.Await(func(time.Duration) error { return stop }, time.Hour, func() bool { return false }); err != stop {
		t.Errorf("Await = %v, want %v", err, stop)
	}
}

// TestInFlight: an invoke is in flight until its completion.
func TestInFlight(t *testing.T) {
	var r Runner
	r.Init(Config{Lock: &sync.Mutex{}, Now: func() int64 { return 0 }})
	p := &Proc{Name: "c1"}
	r.Rec.Add(histories.Event{Process: "nemesis", Type: histories.Invoke, F: histories.Kill})
	inv := r.Invoke(p, histories.Event{Process: "c1", Type: histories.Invoke, F: histories.Acquire})
	if got, ok := r.InFlight(p); !ok || got != inv || inv.Index != 1 {
		t.Errorf("InFlight = %v %v, want %v", got, ok, inv)
	}
	r.Complete(p, histories.Event{Process: "c1", Type: histories.Info, F: histories.Acquire})
	if _, ok := r.InFlight(p); ok || len(r.Rec.Events()) != 3 {
		t.Errorf("in flight after its completion, or not recorded: %v", r.Rec.Events())
	}
}

// TestRetry: tries until success, Stop, an implementation error or the
// last try; a failed sleep stops it.
func TestRetry(t *testing.T) {
	boom, impl := errors.New("refused"), &prover.ImplementationError{Msg: "no such file"}
	for _, c := range []struct {
		answers  []error
		sleepErr error
		want     error
		tries    int
	}{
		{[]error{boom, boom, nil}, nil, nil, 3},
		{[]error{boom, Stop}, nil, nil, 2},
		{[]error{boom, impl}, nil, impl, 2},
		{[]error{boom, boom, boom, boom}, nil, boom, 3},
		{[]error{boom, boom}, errors.New("killed"), nil, 1},
	} {
		tries := 0
		err := Retry(3, time.Second, func(time.Duration) error { return c.sleepErr }, func() error {
			tries++
			return c.answers[tries-1]
		})
		if err != c.want || tries != c.tries {
			t.Errorf("%v: Retry = %v after %d tries; want %v after %d", c.answers, err, tries, c.want, c.tries)
		}
	}
}
