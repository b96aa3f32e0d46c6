package amqprun_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
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
		tookAt, verifiedAt := eventTime(h.String(), "c2", "ok", "acquire"), eventTime(h.String(), "c1", "invoke", "verify")
		switch {
		case !took:
			t.Logf("lying %v: RabbitMQ had not closed c1's connection when c2 tried: the plan shows nothing here\n%s", lying, h.String())
		case lying && tookAt > verifiedAt:
			// A loaded machine delayed c2's acquire past c1's verify
			// (seen beside two busy loops: 15.2 s, the plan's 11.5 s):
			// c1's claim came before anybody else held, and no property
			// is broken by it.
			t.Logf("lying: c2 took the slot at %.1fs, after c1's verify at %.1fs: the plan's timing was undone, nothing to judge\n%s", float64(tookAt)/1e9, float64(verifiedAt)/1e9, h.String())
		case !lying && (exclusive != verdict.Pass || !closed):
			t.Errorf("the stalled honest implementation: slot-exclusive %v, the broker's close recorded: %v\n%s", exclusive, closed, h.String())
		case lying && exclusive != verdict.Fail:
			t.Errorf("the stalled implementation that verifies from memory: slot-exclusive %v, want FAIL\n%s", exclusive, h.String())
		}
	}
}

// eventTime is the time (ns) of the first event of process p of type typ
// and operation f in a history's JSON lines, or -1.
func eventTime(history, p, typ, f string) int64 {
	for _, line := range strings.Split(history, "\n") {
		var e struct {
			Time    int64  `json:"time"`
			Process string `json:"process"`
			Type    string `json:"type"`
			F       string `json:"f"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Process == p && e.Type == typ && e.F == f {
			return e.Time
		}
	}
	return -1
}
