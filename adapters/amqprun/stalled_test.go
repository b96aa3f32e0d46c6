package amqprun_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/amqprun"
	"github.com/lockprover/lockprover/adapters/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/adapters/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
)

// A correct implementation whose process does not run for three
// heartbeats, just after it acquired the slot following a pause, loses its
// connection to RabbitMQ's heartbeat check, and with it its B queue: c2
// then takes the slot. The runner records the broker's close (the hold
// began after the pause was over, so the pause cannot account for it), and
// the plan passes, as TestValidateTakesAnyScanOrder's run on a loaded
// machine did not before (docs/measurements/scan-order-double-hold.md).
// The same plan with a verify that answers from memory still fails.
func TestStalledHolderAfterAPause(t *testing.T) {
	quick.Skip(t, "RabbitMQ and processes")
	t.Parallel()
	needPika(t)
	url := rabbitmqtest.URL(t)
	example, err := filepath.Abs(pythonExample)
	if err != nil {
		t.Fatal(err)
	}
	p, err := amqprun.ReadPlan(filepath.Join("testdata", "stalled-after-pause.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, lying := range []bool{false, true} {
		cmd := "PYTHONPATH=" + example + " /usr/bin/python3 " + filepath.Join("testdata", "stalled.py")
		if lying {
			cmd += " --lying"
		}
		impl := amqpprotocol.NewProcesses(cmd)
		impl.InitTimeout = loadedInit
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		res, err := amqprun.RabbitMQ{URL: url}.Run(ctx, p, impl)
		cancel()
		impl.Stop()
		if err != nil {
			t.Fatal(err)
		}
		var h strings.Builder
		histories.Write(&h, res.History)
		exclusive := verdict.Pass
		for _, v := range prover.Judge(res, model.Options{}).Verdicts {
			if v.Property == "slot-exclusive" {
				exclusive = v.Status
			}
		}
		closed := strings.Contains(h.String(), `"f":"force-close"`)
		took := strings.Contains(h.String(), `"process":"c2","type":"ok","f":"acquire"`)
		switch {
		case !took:
			t.Logf("lying %v: RabbitMQ had not closed c1's connection when c2 tried: the plan shows nothing here\n%s", lying, h.String())
		case !lying && (exclusive != verdict.Pass || !closed):
			t.Errorf("the stalled honest implementation: slot-exclusive %v, the broker's close recorded: %v\n%s", exclusive, closed, h.String())
		case lying && exclusive != verdict.Fail:
			t.Errorf("the stalled implementation that verifies from memory: slot-exclusive %v, want FAIL\n%s", exclusive, h.String())
		}
	}
}
