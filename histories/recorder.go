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
	// read is each event's clock reading, before Time moved it forward
	// to keep times strictly increasing: AddAt goes before the events
	// read after its own.
	read []int64
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
// recorded once its process could record it). It takes the time at, and
// goes before the events recorded since whose clock readings came after
// at (other processes' events, recorded while this one waited to
// record), which move one index up: the history stays in the order of
// time, as the events happened. It never goes before an event of its own
// process, nor before one whose reading was at or before at; where times
// moved forward to stay strictly increasing leave no room, it takes the
// first time after them. It returns e as stored: an Index below the
// length the history had says it went in before others.
func (r *Recorder) AddAt(e Event, at int64) Event {
	if noValue(e.Value) {
		e.Value = nil // a nil *V handed on as a Value is no value
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	read := min(r.clock(), at)
	pos := len(r.events)
	for pos > 0 && r.read[pos-1] > read && r.events[pos-1].Process != e.Process {
		pos--
	}
	t := max(read, 0)
	if pos > 0 {
		t = max(t, r.events[pos-1].Time+1)
	}
	for pos < len(r.events) && t >= r.events[pos].Time {
		t = r.events[pos].Time + 1
		pos++
	}
	e.Index, e.Time = pos, t
	r.events = slices.Insert(r.events, pos, e)
	r.read = slices.Insert(r.read, pos, read)
	for i := pos + 1; i < len(r.events); i++ {
		r.events[i].Index = i
	}
	return e
}

// Grow makes room for n more events, so that a caller that knows about
// how long its history gets spares the appends their reallocations.
func (r *Recorder) Grow(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = slices.Grow(r.events, n)
	r.read = slices.Grow(r.read, n)
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

// Take returns the history and leaves the Recorder empty, its clock kept:
// Events without the copy, for the end of a run, once nothing records any
// more.
func (r *Recorder) Take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.events
	r.events, r.read = nil, nil
	return h
}

// MonotonicClock returns a clock for [NewRecorder] on real brokers: the
// nanoseconds elapsed since MonotonicClock was called, read from the
// monotonic clock so that wall-clock jumps cannot reorder a history.
func MonotonicClock() func() int64 {
	start := time.Now()
	return func() int64 { return int64(time.Since(start)) }
}
