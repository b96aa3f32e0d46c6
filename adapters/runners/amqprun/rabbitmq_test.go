package amqprun

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
)

// realConfig proves on the local broker with a short heartbeat, so that
// plans (which may wait three heartbeats at their end) take seconds; 3s,
// not 1s: under the suite's load, 1s heartbeats lapsed.
func realConfig(t *testing.T, faults ...string) prover.Config {
	return prover.Config{Subject: Config{
		Scope:   prover.Scope{Faults: faults},
		Target:  RabbitMQ{URL: rabbitmqtest.URL(t)},
		Options: Options{HeartbeatMs: Ms(3000)},
	}, Timeout: time.Minute}
}

// The reference holds on real RabbitMQ under kills, partitions and lost
// replies, and every run leaves the broker as it found it.
func TestReferenceOnRabbitMQ(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real-broker plans take seconds each")
	}
	c := realConfig(t, "kill", "partition", "drop-reply", "admin-crash")
	out, err := prover.Search{Config: c, Seed: 3, Plans: 4, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	t.Logf("%d plans in %v", out.Plans, out.Elapsed)
}

// A mutant whose defect shows on a single broker is caught there too.
func TestMutantOnRabbitMQ(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real-broker plans take seconds each")
	}
	c := realConfig(t)
	f := c.Subject.(Config)
	f.Mutant, f.Faults = "trust-scan", []string{}
	c.Subject, c.Properties = f, []string{"slot-exclusive"}
	out, err := prover.Search{Config: c, Seed: 1, Plans: 20, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil || out.Found.Property != "slot-exclusive" {
		t.Fatalf("trust-scan not caught on RabbitMQ in %d plans", out.Plans)
	}
}

// An admin that answers count from its own cache is caught on RabbitMQ:
// drawn plans pace every process's operations by a common beat, so that
// one admin counts after another's change (unpaced, the first admin
// finished its steps within some 50 ms of its create, before the second
// began, and about 250 plans never caught it). Seed 1 catches it after
// 64 to 100 plans, 90 to 130 s on two cores (83 plans, 123 s, beside the
// suite): a long test. The budget is plans, not time, so that a loaded
// machine only makes it slower.
func TestCachedCountOnRabbitMQ(t *testing.T) {
	quick.Long(t, "a search of about 100 plans on the real broker")
	t.Parallel()
	if testing.Short() {
		t.Skip("real-broker plans take seconds each")
	}
	// Every fault the command line strikes on a real broker by default.
	c := realConfig(t, "kill", "pause", "partition", "force-close", "drop-reply", "admin-crash")
	f := c.Subject.(Config)
	f.Mutant = "cached-count"
	c.Subject, c.Properties = f, []string{"count-exact"}
	start := time.Now()
	out, err := prover.Search{Config: c, Seed: 1, Plans: 150, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil || out.Found.Property != "count-exact" {
		t.Fatalf("cached-count not caught on RabbitMQ in %d plans (count after another's change in %d)", out.Plans,
			out.Interleavings[prover.Interleaving{X: "count", Y: "change", Who: "admin/admin"}])
	}
	t.Logf("caught after %d plans, %v", out.Plans, time.Since(start).Round(time.Second))
}

// An interrupted run stops at once and still deletes its queues.
func TestInterruptedRunCleansUp(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	url := rabbitmqtest.URL(t)
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("needs rabbitmqctl to list the broker's queues")
	}
	p := &Plan{Version: PlanVersion, Kind: "semaphore", Lock: "lp-interrupt", Slots: 2, Options: Options{HeartbeatMs: Ms(1000)},
		Clients: [][]Step{{{Op: "acquire"}, {Op: "sleep", Ms: 60000}}}, Admins: [][]Step{{}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := (RabbitMQ{URL: url}).Run(ctx, p, Reference); err == nil {
		t.Fatal("an interrupted run reported success")
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the interrupted run took %v to stop", el)
	}
	out, err := exec.Command("rabbitmqctl", "-q", "list_queues", "name").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range strings.Fields(string(out)) {
		if strings.HasPrefix(q, "lp-interrupt-") {
			t.Errorf("queue left behind: %s", q)
		}
	}
}
