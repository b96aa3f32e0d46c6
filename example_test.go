package lockprover_test

import (
	"testing"

	"github.com/lockprover/lockprover"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
)

// The reference amqp-locks semaphore, proven on the simulated RabbitMQ with
// every fault: what a user's test looks like.
func TestCheckTheReference(t *testing.T) {
	lockprover.Check(t, lockprover.Config{Subject: amqprun.Config{}})
}

// A Scope narrows the plans: Redlock's reference over the simulated Redis
// servers, two clients, only the faults of the Redlock debate named here,
// judged on lease-exclusive alone.
func TestCheckAScope(t *testing.T) {
	lockprover.Check(t, lockprover.Config{
		Subject:    redlockrun.Config{Scope: lockprover.Scope{Clients: 2, Faults: []string{"pause", "clock-jump"}}},
		Properties: []string{"lease-exclusive"},
	})
}

// A user's test of their own amqp-locks implementation on the simulator
// proves it in one call.
func ExampleCheck() {
	var t *testing.T // the test's own
	lockprover.Check(t, lockprover.Config{Subject: amqprun.Config{}})
}
