package histories

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Recorder builds a history while a run is going on. It gives every event
// its index and its time, in one critical section, so the order of the
// history is the order in which events happened. It is safe for concurrent
// use.
type Recorder struct {
	clock  func() int64
	mu     sync.Mutex
	events []Event
}

// NewRecorder returns a Recorder that timestamps events with clock, in
// nanoseconds: virtual time in a simulator, [MonotonicClock] on a real
// broker. A nil clock means MonotonicClock. The clock is called with the
// Recorder locked, so it must not call the Recorder.
func NewRecorder(clock func() int64) *Recorder {
	if clock == nil {
		clock = MonotonicClock()
	}
	return &Recorder{clock: clock}
}

// Add appends e to the history and returns it as stored. Add sets e's Index
// to its position and its Time to the clock's reading, moved forward when
// needed so that times strictly increase (and start at 0 or later): a coarse
// or virtual clock that does not advance between two events must not make
// them look concurrent. Add keeps e.Value as given; do not modify it after.
func (r *Recorder) Add(e Event) Event {
	return r.AddAt(e, math.MaxInt64)
}

// AddAt is Add for an event that happened at an earlier reading of the
// clock, at, than its recording (a completion whose reply came at at,
// recorded once its process could record it): it takes the time at, or
// just after the last event recorded, if that is later (times still
// strictly increase with the index; the history's order is the order of
// recording).
func (r *Recorder) AddAt(e Event, at int64) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := min(r.clock(), at)
	if n := len(r.events); n > 0 {
		if prev := r.events[n-1].Time; t <= prev {
			t = prev + 1
		}
	} else if t < 0 {
		t = 0
	}
	e.Index = len(r.events)
	e.Time = t
	r.events = append(r.events, e)
	return e
}

// Grow makes room for n more events, so that a caller that knows about
// how long its history gets spares the appends their reallocations.
func (r *Recorder) Grow(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = slices.Grow(r.events, n)
}

// Event returns event i of the history so far (Events()[i], without the
// copy of the rest).
func (r *Recorder) Event(i int) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[i]
}

// Events returns a copy of the history so far. The copy shares the events'
// Values with the Recorder; they are not to be modified.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// MonotonicClock returns a clock for [NewRecorder] on real brokers: the
// nanoseconds elapsed since MonotonicClock was called, read from the
// monotonic clock so that wall-clock jumps cannot reorder a history.
func MonotonicClock() func() int64 {
	start := time.Now()
	return func() int64 { return int64(time.Since(start)) }
}
