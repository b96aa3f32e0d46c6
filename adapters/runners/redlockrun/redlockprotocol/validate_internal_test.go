package redlockprotocol

import (
	"testing"
)

// The victim of the steal check is held stopped for less than its lease
// (a thief that waits for its acknowledgement, or for its lease's end,
// cannot return before it is resumed), and the thief's acquire has time
// for the hold and the acknowledgement after it.
func TestStealHoldIsWithinTheVictimsLease(t *testing.T) {
	if stealHold <= 0 || stealHold >= validateTTL {
		t.Errorf("stealHold %v: want above 0 and under the victim's lease %v", stealHold, validateTTL)
	}
	if stealTimeout < stealHold+validateTTL {
		t.Errorf("stealTimeout %v: want at least the hold %v and a lease %v after it", stealTimeout, stealHold, validateTTL)
	}
}
