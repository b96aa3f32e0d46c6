package amqpproxy

import (
	"sync"
	"time"
)

// A machine under load may not run this process for seconds: nothing then
// passes through any proxy, and a client whose heartbeats lapse meanwhile
// gives its connection up, though neither it nor the broker was silent. The
// watch sees such stalls from inside (a goroutine that sleeps a tick and
// notes how late it woke), so that a verdict can say what the machine did
// instead of blaming the implementation.

// stallTick is how often the watch wakes; stallMin the lateness it notes.
const (
	stallTick = 20 * time.Millisecond
	stallMin  = 200 * time.Millisecond
	// stallKeep is how long a stall is remembered.
	stallKeep = time.Minute
)

type stall struct{ from, to time.Time }

// stalls watches this process's stalls once a proxy exists.
var stalls struct {
	once sync.Once
	mu   sync.Mutex
	seen []stall
}

// watchStalls starts the watch, once per process.
func watchStalls() {
	stalls.once.Do(func() {
		go func() {
			for {
				due := time.Now().Add(stallTick)
				time.Sleep(stallTick)
				noteStall(due, time.Now())
			}
		}()
	})
}

// noteStall records that the watch, due at due, woke at woke, if it is late
// by stallMin or more, and forgets stalls older than stallKeep.
func noteStall(due, woke time.Time) {
	if woke.Sub(due) < stallMin {
		return
	}
	stalls.mu.Lock()
	defer stalls.mu.Unlock()
	keep := stalls.seen[:0]
	for _, s := range stalls.seen {
		if woke.Sub(s.to) < stallKeep {
			keep = append(keep, s)
		}
	}
	stalls.seen = append(keep, stall{due, woke})
}

// stalledBefore is the longest stall of this process that began before
// end and ended less than within before it: how long nothing could pass
// through a proxy then. (A proxy that did not run notices a socket's end
// only once it runs again: a stall may end at the end.)
func stalledBefore(end time.Time, within time.Duration) time.Duration {
	stalls.mu.Lock()
	defer stalls.mu.Unlock()
	var longest time.Duration
	for _, s := range stalls.seen {
		if end.Sub(s.to) <= within && !s.from.After(end) {
			longest = max(longest, s.to.Sub(s.from))
		}
	}
	return longest
}
