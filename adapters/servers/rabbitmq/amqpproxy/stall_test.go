package amqpproxy

import (
	"testing"
	"time"
)

// The watch keeps the stalls it is told of (late by 200ms or more), and a
// connection's end finds the longest one that ended within the window
// before it.
// The times are an hour ahead, so that the process's own stalls, noted
// meanwhile, cannot be among them.
func TestStalls(t *testing.T) {
	base := time.Now().Add(time.Hour)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	noteStall(at(0), at(150))     // 150ms late: not a stall
	noteStall(at(1000), at(2500)) // 1.5s
	noteStall(at(3000), at(6100)) // 3.1s
	noteStall(at(7000), at(7400)) // 400ms
	for _, tc := range []struct {
		end  int
		want time.Duration
	}{
		{6200, 3100 * time.Millisecond},
		{2600, 1500 * time.Millisecond},
		{900, 0},
		{16000, 3100 * time.Millisecond},
		{16200, 400 * time.Millisecond},
		{30000, 0},
	} {
		if got := stalledBefore(at(tc.end), 10*time.Second); got != tc.want {
			t.Errorf("an end at %dms: stalled %v, want %v", tc.end, got, tc.want)
		}
	}
	// The proxy's window, a second: a stall that ended long before the
	// client's end did not cause it.
	for _, tc := range []struct {
		end  int
		want time.Duration
	}{{6150, 3100 * time.Millisecond}, {7050, 3100 * time.Millisecond}, {7300, 400 * time.Millisecond}, {9000, 0}} {
		if got := stalledBefore(at(tc.end), time.Second); got != tc.want {
			t.Errorf("an end at %dms: stalled %v, want %v", tc.end, got, tc.want)
		}
	}
}
