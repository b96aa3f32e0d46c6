package prover

import (
	"testing"
)

// The reference with the spec's recommended options holds every property
// under every fault.
func TestReference(t *testing.T) {
	Check(t, Config{})
}
