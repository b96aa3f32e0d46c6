package histories_test

import (
	"bytes"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRecorderConcurrent checks that concurrent Adds get the indexes
// 0..n-1 in the order of the history and strictly increasing times, even
// with a clock that never moves, and that the result is a valid history.
func TestRecorderConcurrent(t *testing.T) {
	const workers, ops = 32, 200
	r := histories.NewRecorder(func() int64 { return 42 })
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := "c" + string(rune('A'+w))
			for range ops {
				inv := r.Add(histories.Event{Process: p, Type: histories.Invoke, F: "acquire", Lock: "sem"})
				ok := r.Add(histories.Event{Process: p, Type: histories.Ok, F: "acquire", Lock: "sem", Value: &amqpcheck.Value{Slot: histories.Int(1)}})
				if ok.Index <= inv.Index || ok.Time <= inv.Time {
					t.Errorf("completion %+v not after its invoke %+v", ok, inv)
				}
			}
		}()
	}
	wg.Wait()
	events := r.Events()
	if len(events) != 2*workers*ops {
		t.Fatalf("got %d events, want %d", len(events), 2*workers*ops)
	}
	for i, e := range events {
		if e.Index != i {
			t.Fatalf("event %d has index %d", i, e.Index)
		}
		if i == 0 && e.Time != 42 {
			t.Fatalf("first time %d, want the clock's 42", e.Time)
		}
		if i > 0 && e.Time <= events[i-1].Time {
			t.Fatalf("event %d: time %d not after %d", i, e.Time, events[i-1].Time)
		}
	}
	var buf bytes.Buffer
	if err := histories.Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	if _, err := histories.Read(&buf, "recorded"); err != nil {
		t.Fatalf("recorded history does not read back: %v", err)
	}
}

// TestRecorderClock checks that the clock is used when it moves forward and
// overridden when it does not.
func TestRecorderClock(t *testing.T) {
	readings := []int64{-5, 10, 10, 3, 50}
	var i atomic.Int64
	r := histories.NewRecorder(func() int64 { return readings[i.Add(1)-1] })
	var got []int64
	for range readings {
		got = append(got, r.Add(histories.Event{Index: 99, Time: 99}).Time)
	}
	want := []int64{0, 10, 11, 12, 50}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("times %v, want %v", got, want)
		}
	}
	events := r.Events()
	events[0].Process = "changed"
	if r.Events()[0].Process != "" {
		t.Errorf("Events does not return a copy")
	}
}

func TestMonotonicClock(t *testing.T) {
	clock := histories.MonotonicClock()
	a := clock()
	time.Sleep(time.Millisecond)
	b := clock()
	if a < 0 || b-a < int64(time.Millisecond) {
		t.Errorf("readings %d then %d, 1ms apart", a, b)
	}
	r := histories.NewRecorder(nil)
	if e := r.Add(histories.Event{}); e.Time < 0 || e.Index != 0 {
		t.Errorf("nil clock: %+v", e)
	}
}

// AddAt records an event at the earlier time it happened, unless events
// were recorded since: then just after the last of them; never later than
// the clock.
func TestRecorderAddAt(t *testing.T) {
	now := int64(1000)
	r := histories.NewRecorder(func() int64 { return now })
	r.Add(histories.Event{Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "k"}) // at 1000
	now = 5000
	if e := r.AddAt(histories.Event{Process: "c1", Type: histories.Ok, F: "acquire", Lock: "k"}, 3000); e.Time != 3000 || e.Index != 1 {
		t.Errorf("nothing recorded since 3000: time %d index %d, want 3000, 1", e.Time, e.Index)
	}
	r.Add(histories.Event{Process: "c2", Type: histories.Invoke, F: "acquire", Lock: "k"}) // at 5000, #2
	r.Add(histories.Event{Process: "c3", Type: histories.Invoke, F: "acquire", Lock: "k"}) // at 5000, moved to 5001, #3
	now = 9000
	r.Add(histories.Event{Process: "c4", Type: histories.Invoke, F: "acquire", Lock: "k"}) // at 9000, #4
	// c2's completion came at 7000: before c4's invoke, which moves up.
	if e := r.AddAt(histories.Event{Process: "c2", Type: histories.Ok, F: "acquire", Lock: "k"}, 7000); e.Time != 7000 || e.Index != 4 {
		t.Errorf("c2's completion at 7000, c4's invoke read at 9000: time %d index %d, want 7000, 4", e.Time, e.Index)
	}
	// c3's came at 5000: after c2's invoke (read at 5000 too) and its own
	// invoke (moved to 5001), and before c2's completion.
	if e := r.AddAt(histories.Event{Process: "c3", Type: histories.Ok, F: "acquire", Lock: "k"}, 5000); e.Time != 5002 || e.Index != 4 {
		t.Errorf("c3's completion at 5000: time %d index %d, want 5002, 4", e.Time, e.Index)
	}
	// Never before an event of its own process: c4's completion said
	// 2000, before its own invoke.
	if e := r.AddAt(histories.Event{Process: "c4", Type: histories.Ok, F: "acquire", Lock: "k"}, 2000); e.Index != 7 || e.Time != 9001 {
		t.Errorf("c4's completion said 2000, before its invoke at 9000: time %d index %d, want 9001, 7", e.Time, e.Index)
	}
	if e := r.AddAt(histories.Event{Process: "c5", Type: histories.Invoke, F: "acquire", Lock: "k"}, 20000); e.Time != 9000+2 || e.Index != 8 {
		t.Errorf("at 20000 with the clock at 9000: time %d index %d, want 9002 (after 9001), 8", e.Time, e.Index)
	}
	var order []string
	for i, e := range r.Events() {
		if e.Index != i {
			t.Errorf("event %d has index %d", i, e.Index)
		}
		if i > 0 && e.Time <= r.Event(i-1).Time {
			t.Errorf("event %d at %d, not after event %d at %d", i, e.Time, i-1, r.Event(i-1).Time)
		}
		order = append(order, e.Process+" "+string(e.Type))
	}
	want := "c1 invoke,c1 ok,c2 invoke,c3 invoke,c3 ok,c2 ok,c4 invoke,c4 ok,c5 invoke"
	if got := strings.Join(order, ","); got != want {
		t.Errorf("order %s\nwant  %s", got, want)
	}
}

// Take hands over the history recorded so far, as Events would copy it,
// and leaves the Recorder empty: what is recorded after starts a history
// of its own, at index 0, on the same clock.
func TestRecorderTake(t *testing.T) {
	now := int64(0)
	r := histories.NewRecorder(func() int64 { now += 10; return now })
	r.Add(histories.Event{Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "sem"})
	r.Add(histories.Event{Process: "c1", Type: histories.Ok, F: "acquire", Lock: "sem", Value: &amqpcheck.Value{Slot: histories.Int(1)}})
	want := r.Events()
	got := r.Take()
	var a, b bytes.Buffer
	histories.Write(&a, want)
	histories.Write(&b, got)
	if a.String() != b.String() || len(got) != 2 {
		t.Fatalf("Take gave\n%s\nEvents gave\n%s", b.String(), a.String())
	}
	if n := len(r.Events()); n != 0 {
		t.Fatalf("%d events left after Take", n)
	}
	if e := r.Add(histories.Event{Process: "c2", Type: histories.Invoke, F: "acquire", Lock: "sem"}); e.Index != 0 || e.Time != 30 {
		t.Errorf("after Take, Add recorded %+v, want index 0 at time 30", e)
	}
}
