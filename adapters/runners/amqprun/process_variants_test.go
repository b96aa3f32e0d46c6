package amqprun_test

import (
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
)

// The reference's correct variants, written differently from its defaults
// (a lazy connection, a channel per purpose, a scan from a random slot, a
// reconnect after a lost connection, the plain failure), are judged by the
// spec through the protocol too: served by serve-reference --options, they
// hold every property on RabbitMQ under kill, pause and partition.
func TestReferenceVariantsThroughTheProtocol(t *testing.T) {
	t.Parallel()
	// Every variant at once, then the lazy connection alone (the one a
	// correct implementation is likeliest to choose); each variant alone
	// holds 100,000 simulator plans (prover's TestCorrectVariantsHold and
	// docs/amqp-locks.md's figures).
	for _, tc := range []struct {
		spec  string
		plans int
	}{
		{"lazy_connect,channels=per-purpose,reconnect,plain_failure,scan_start=random", 3},
		{"lazy_connect", 2},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			out := search(t, amqpprotocol.NewProcesses(lockprover+" serve-reference --options "+tc.spec), tc.plans, nil, "kill", "pause", "partition")
			if out.Found != nil {
				unexpected(t, out.Found)
			}
		})
	}
}

// The waste the ledger charges is caught through the protocol as well, on
// the same lazy connection the variants above pass with: a connection per
// acquire, and a channel opened and closed per acquire.
func TestWasteThroughTheProtocol(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"reconnect-per-acquire", "throwaway-channel"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := search(t, amqpprotocol.NewProcesses(lockprover+" serve-reference --options lazy_connect --mutant "+name), 10, []string{"cheap-acquire"})
			if out.Found == nil || out.Found.Property != "cheap-acquire" {
				t.Fatalf("%s not caught by cheap-acquire in %d plans", name, out.Plans)
			}
		})
	}
}
