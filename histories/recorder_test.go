package histories

import (
	"bytes"
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
	r := NewRecorder(func() int64 { return 42 })
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := "c" + string(rune('A'+w))
			for range ops {
				inv := r.Add(Event{Process: p, Type: Invoke, F: "acquire", Lock: "sem"})
				ok := r.Add(Event{Process: p, Type: Ok, F: "acquire", Lock: "sem", Value: &Value{Slot: Int(1)}})
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
	if err := Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(&buf, "recorded"); err != nil {
		t.Fatalf("recorded history does not read back: %v", err)
	}
}

// TestRecorderClock checks that the clock is used when it moves forward and
// overridden when it does not.
func TestRecorderClock(t *testing.T) {
	readings := []int64{-5, 10, 10, 3, 50}
	var i atomic.Int64
	r := NewRecorder(func() int64 { return readings[i.Add(1)-1] })
	var got []int64
	for range readings {
		got = append(got, r.Add(Event{Index: 99, Time: 99}).Time)
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
	clock := MonotonicClock()
	a := clock()
	time.Sleep(time.Millisecond)
	b := clock()
	if a < 0 || b-a < int64(time.Millisecond) {
		t.Errorf("readings %d then %d, 1ms apart", a, b)
	}
	r := NewRecorder(nil)
	if e := r.Add(Event{}); e.Time < 0 || e.Index != 0 {
		t.Errorf("nil clock: %+v", e)
	}
}
