package redlockprotocol

import (
	"testing"
)

// The victim of the steal check is held stopped for at most half its
// lease: a thief that waits for its acknowledgement, or for its lease's
// end, cannot return before it is resumed.
func TestStealHoldIsWithinTheVictimsLease(t *testing.T) {
	if stealHold <= 0 || 2*stealHold > validateTTL {
		t.Errorf("stealHold %v: want above 0 and at most half the victim's lease %v", stealHold, validateTTL)
	}
}
