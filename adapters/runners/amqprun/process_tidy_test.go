package amqprun_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/histories/verdict"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
)

// Implementations whose verify, on finding the slot gone, deletes their B
// queue (tidy) are as correct as those that keep it until their release,
// through the protocol too: the reference's tidy_verify and the Python
// example's --tidy-verify (and its default, which keeps the queue) pass
// validate-impl, whose checks re-create a slot its holder saw removed, and
// hold every property on a scripted plan on RabbitMQ in which the slot is
// removed, created again and, for the tidy ones, taken by another client.
func TestTidyVerifyThroughTheProtocol(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t)
	python := "/usr/bin/python3 " + filepath.Join(pythonExample, "lockprover_impl.py")
	for _, tc := range []struct {
		name, cmd string
		tidy, py  bool
	}{
		{"reference tidy_verify", lockprover + " serve-reference --options tidy_verify", true, false},
		{"python --tidy-verify", python + " --tidy-verify", true, true},
		{"python", python, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.py {
				needPika(t)
			}
			var out strings.Builder
			if !amqpprotocol.ValidateInit(context.Background(), tc.cmd, loadedInit, url, &out) {
				t.Fatalf("%s fails validation:\n%s", tc.cmd, out.String())
			}
			impl := amqpprotocol.NewProcesses(tc.cmd)
			impl.InitTimeout = loadedInit
			defer impl.Stop()
			// Processes start some 0.3 s after their first operation is
			// due, more than two seconds late beside the whole suite and
			// more still at load 17: steps 4 s apart, and twice as far
			// after a run whose process was too late for the script.
			var res *prover.Result
			var r amqprun.Relinquish
			// A keeping implementation whose slot c2 took with no close
			// of c1's connection in the history is run once more before
			// it is failed: CI saw it once, beside the whole suite, and
			// three runs at load 5 did not again (its history is logged).
			again := !tc.tidy
			for gap := 4000; ; gap *= 2 {
				var err error
				// Heartbeats of 5s: the plan strikes no fault, and a 1s
				// heartbeat lapsed under the suite's load (the reconnect
				// that followed was charged to cheap-verify).
				res, err = amqprun.RabbitMQ{URL: url}.Run(context.Background(), amqprun.RelinquishPlan(amqprun.Options{HeartbeatMs: amqprun.Ms(5000)}, gap), impl)
				if err != nil {
					t.Fatal(err)
				}
				r = amqprun.Relinquished(res)
				if again && r.Lost && r.Scripted && r.Taken && !brokerClosed(res.History, "c1") {
					again = false
					var b strings.Builder
					histories.Write(&b, res.History)
					t.Logf("c2 took the slot while c1 kept its B queue, with no close of c1's connection recorded: once more\n%s", b.String())
					gap /= 2
					continue
				}
				if r.Lost && r.Scripted || gap >= 16000 {
					break
				}
				var b strings.Builder
				histories.Write(&b, res.History)
				t.Logf("with steps %d ms apart, the plan did not run as scripted (%+v): again, %d ms apart\n%s", gap, r, 2*gap, b.String())
			}
			var b strings.Builder
			histories.Write(&b, res.History)
			for _, v := range prover.Judge(res, model.Options{}).Verdicts {
				if v.Status != verdict.Pass {
					t.Errorf("%s: %s %s\n%s", v.Property, v.Status, v.Detail, b.String())
				}
			}
			lost, cost, taken := r.Lost, r.Cost, r.Taken
			switch {
			case !lost || !r.Scripted:
				t.Fatalf("the plan did not run as scripted in three runs (%+v)\n%s", r, b.String())
			case tc.tidy && (!taken || cost.Methods["queue.delete"] != 1):
				t.Errorf("c2 took the slot: %v; c1's verify cost %v; want taken, and one delete\n%s", taken, cost, b.String())
			case !tc.tidy && taken && brokerClosed(res.History, "c1"):
				// A loaded broker that missed c1's heartbeats closed its
				// connection, and with it c1's B queue: c2 took the slot
				// rightly, and the history says why.
				t.Logf("c2 took the slot after RabbitMQ closed c1's connection on its own")
			case !tc.tidy && taken:
				t.Errorf("c2 took the slot while c1 kept its B queue\n%s", b.String())
			}
		})
	}
}

// validate-impl takes any scan order the spec allows: an implementation
// whose acquire scans from the top (its first acquire on a free semaphore
// of two slots takes slot 2, the next client's slot 1) passes it, and holds
// every property on plans drawn with faults.
func TestValidateTakesAnyScanOrder(t *testing.T) {
	quick.Skip(t, "RabbitMQ and processes")
	t.Parallel()
	needPika(t)
	url := rabbitmqtest.URL(t)
	example, err := filepath.Abs(pythonExample)
	if err != nil {
		t.Fatal(err)
	}
	cmd := "PYTHONPATH=" + example + " /usr/bin/python3 " + filepath.Join("testdata", "top_down.py")
	var out strings.Builder
	if !amqpprotocol.ValidateInit(context.Background(), cmd, loadedInit, url, &out) {
		t.Fatalf("a top-down scan fails validation:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "a second client's acquire -> acquire_ok {slot:1}") {
		t.Fatalf("the top-down scan took slot 1 first: the test proves nothing\n%s", out.String())
	}
	o := search(t, amqpprotocol.NewProcesses(cmd), 2, nil, "kill", "pause", "partition")
	if o.Found != nil {
		unexpected(t, o.Found)
	}
}

// brokerClosed says whether the history records RabbitMQ closing proc's
// connection on its own (a force-close lockprover did not strike).
func brokerClosed(h []histories.Event, proc string) bool {
	for _, e := range h {
		if e.Process == "nemesis" && e.F == histories.ForceClose && e.Value != nil && histories.FaultOf(&e).Process == proc && strings.Contains(e.Error, "not struck by lockprover") {
			return true
		}
	}
	return false
}
