package amqprun

import (
	"context"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/prover"
)

// A check that runs out of time is inconclusive: no counterexample, no
// violation; the plans are counted.
func TestSearchInconclusiveIsNoViolation(t *testing.T) {
	out, err := prover.Search{Config: prover.Config{Subject: Config{}, Timeout: time.Nanosecond}, Seed: 1, Plans: 20}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("an out-of-time check was reported as a violation:\n%s", out.Found.Summary())
	}
	if out.Inconclusive != 20 || out.FirstInconclusive == nil || !out.FirstInconclusive.Inconclusive {
		t.Errorf("inconclusive %d of %d plans, first %v", out.Inconclusive, out.Plans, out.FirstInconclusive)
	}
}

// An interrupted search says so, with no error, and starts no plan after
// it: the workers finish what they run (on the simulator progress is told
// batch by batch, 500 plans each, and each worker has a batch).
func TestSearchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	at := 0
	s := prover.Search{Config: prover.Config{Subject: Config{}}, Seed: 1, Plans: 100000, Parallel: 2, Context: ctx, Progress: func(plans, _ int) {
		if at == 0 {
			at = plans
			cancel()
		}
	}}
	out, err := s.Run()
	if err != nil || !out.Interrupted || out.Plans < at || out.Plans > at+2*500 {
		t.Fatalf("interrupted after %d plans, then ran %d: %v", at, out.Plans, err)
	}
}

// --time is a deadline on a real broker too: no plan starts after it, so a
// search ends within one plan of it (batches there start at one plan).
// The deadline leaves room for the preflight and a first plan (plan 0 of
// seed 4 takes 3.3 s alone) on a loaded machine. One plan at a time, so
// that the time between two plans' ends is a plan's length: with plans at
// once, the last to start before the deadline may run longer than any gap
// between two ends (a run ended 17 s after its deadline, the longest gap
// 10.8 s, on a loaded machine).
func TestSearchDeadlineOnRabbitMQ(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real-broker plans take seconds each")
	}
	c := realConfig(t, "kill", "partition", "drop-reply", "admin-crash") // no restart-broker: the broker is shared
	until := time.Now().Add(5 * time.Second)
	start := time.Now()
	var longest, last time.Duration
	s := prover.Search{Config: c, Seed: 4, Until: until, Parallel: 1, Progress: func(int, int) {
		el := time.Since(start)
		longest, last = max(longest, el-last), el
	}}
	out, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	over := time.Since(until)
	t.Logf("%d plans; ended %v after the deadline; longest plan %v", out.Plans, over.Round(time.Millisecond), longest.Round(time.Millisecond))
	if out.Plans < 1 || over > longest+5*time.Second {
		t.Errorf("%d plans, ended %v after the deadline (longest plan %v)", out.Plans, over, longest)
	}
}

// The preflight names a broker out of reach before any plan runs.
func TestSearchPreflight(t *testing.T) {
	start := time.Now()
	_, err := prover.Search{Config: prover.Config{Subject: Config{Target: RabbitMQ{URL: "amqp://guest:guest@127.0.0.1:1/"}}}, Seed: 1, Plans: 5}.Run()
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %v, want a preflight error at once", err, time.Since(start))
	}
	t.Log(err)
}
