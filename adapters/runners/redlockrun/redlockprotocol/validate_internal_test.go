package redlockprotocol

import (
	"testing"
	"time"
)

// The victim of the steal check is stopped for four times the slowest
// grant seen, so that a thief that does not wait returns while it is
// stopped on a loaded machine too: never less than 500 ms, never more
// than a quarter of its lease.
func TestStealPauseOutlastsTheSlowestGrant(t *testing.T) {
	for _, c := range []struct{ slowest, want time.Duration }{
		{0, 500 * time.Millisecond},
		{100 * time.Millisecond, 500 * time.Millisecond},
		{300 * time.Millisecond, 1200 * time.Millisecond},
		{2 * time.Second, validateTTL / 4},
	} {
		if got := stealPauseOf(c.slowest); got != c.want {
			t.Errorf("stealPauseOf(%v) = %v, want %v", c.slowest, got, c.want)
		}
	}
}
