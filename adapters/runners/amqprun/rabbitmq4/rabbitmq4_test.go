// Package rabbitmq4_test proves the amqp-locks reference on a private
// RabbitMQ 4.3.6 node, in a package of its own so that its minutes of
// real time (a node's start, plans paced by heartbeats) run beside
// adapters/runners/amqprun's tests rather than after them.
package rabbitmq4_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
)

// The reference holds on drawn plans (kills, pauses, partitions, forced
// closes) on a private RabbitMQ 4.3.6 node, from Debian sid's root: the
// run CI makes of the broker users deploy now (issue 53), as `lockprover
// prove --target rabbitmq --server-version 4.3.6` runs it. Skipped where
// the root is not made or the test does not run as root.
func TestReferenceOn436(t *testing.T) {
	quick.Long(t, "a RabbitMQ 4.3.6 node from a Debian root, for drawn plans")
	quick.Skip(t, "a RabbitMQ 4.3.6 node from a Debian root")
	v, err := versions.Lookup("rabbitmq", "4.3.6")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("a node from a Debian root in a network namespace needs root")
	}
	if !v.Made() {
		t.Skipf("%v: its root is not made here (lockprover servers --make rabbitmq-4.3.6: minutes, once)", v)
	}
	// A bound for a wedged start, not a measure (about 20 s).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := rabbitmq.StartSingle(ctx, "", rabbitmq.ClusterOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctl, err := s.CtlCommand()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{histories.Semaphore, histories.Mutex} {
		c := prover.Config{Subject: amqprun.Config{Kind: kind, Scope: prover.Scope{Faults: []string{"kill", "pause", "partition", "force-close"}},
			Target: amqprun.RabbitMQ{URL: s.URL(), Ctl: ctl}, Impl: amqprun.Reference}, Timeout: time.Minute}
		o, err := prover.Search{Config: c, Seed: 436, Plans: 3, Shrink: time.Nanosecond}.Run()
		if err != nil {
			t.Fatal(err)
		}
		if o.Found != nil {
			t.Fatalf("%s on RabbitMQ 4.3.6: %s", kind, o.Found.Summary())
		}
		t.Logf("%s on RabbitMQ 4.3.6: %d plans, %d verdicts, every property held, in %v", kind, o.Plans, o.Judged, o.Elapsed.Round(time.Second))
	}
}
