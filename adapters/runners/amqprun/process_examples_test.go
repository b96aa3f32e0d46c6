package amqprun_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

// The Node and Go examples (examples/node/amqp-locks on amqplib,
// examples/go/amqplocks on amqp091-go), each a port of the Python example,
// are proven through the protocol as it is: each validates, holds every
// property on plans drawn with kill, pause and partition faults, and with
// its --defect is caught, by a property the defect explains, within a
// few plans of a seed fixed here.

// nodeExample and goExample are the folders of the two examples.
var (
	nodeExample = filepath.Join("..", "..", "..", "examples", "node", "amqp-locks")
	goExample   = filepath.Join("..", "..", "..", "examples", "go", "amqplocks")
)

// An example is an implementation of amqp-locks served over the protocol,
// and the defect its --defect seeds.
type example struct {
	cmd    string   // the command, without --defect
	defect string   // the defect --defect names
	caught []string // the properties that defect may fail first
	seed   uint64   // the seed whose plans catch it
}

// The budgets: the correct implementation holds on exampleProve plans
// (of seed 1), and the defect is caught within exampleDefectPlans (of the
// example's seed). Plans on a real broker run at once (four per CPU), some
// 10 s each with their end's three 3 s heartbeats.
const (
	exampleProve       = 3
	exampleDefectPlans = 6
)

// needNode is the Node example's command, or skips without node or the
// example's node_modules (npm ci there installs them; .ci/run does).
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (apt-get install nodejs) for the Node example in examples/node/amqp-locks")
	}
	dir, err := filepath.Abs(nodeExample)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "amqplib")); err != nil {
		t.Skipf("needs the Node example's packages: run npm ci in examples/node/amqp-locks (.ci/run does): %v", err)
	}
	return node + " " + filepath.Join(dir, "lockprover_impl.js")
}

// buildGoExample builds the Go example into a temporary directory and
// returns its command.
func buildGoExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "amqplocks")
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = goExample
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/go/amqplocks: %v\n%s", err, out)
	}
	t.Logf("built in %v", time.Since(start).Round(100*time.Millisecond))
	return bin
}

func TestNodeExample(t *testing.T) {
	t.Parallel()
	cmd := needNode(t)
	proveExample(t, rabbitmqtest.URL(t), example{cmd: cmd, defect: "verify-from-cache", seed: 1,
		// verify says held without asking the broker: cheap-verify (it
		// sent no publish), or slot-exclusive (the slot was gone).
		caught: []string{amqpcheck.CheapVerify, model.SlotExclusive}})
}

func TestGoExample(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t) // skips before the build without a broker
	proveExample(t, url, example{cmd: buildGoExample(t), defect: "trust-scan", seed: 2,
		// acquire returns a slot without declaring B[L]: two clients
		// hold it.
		caught: []string{model.SlotExclusive}})
}

// proveExample validates ex, proves it, and catches its defect on the
// broker at url, all at once, each on processes and locks of its own.
func proveExample(t *testing.T, url string, ex example) {
	t.Run("validates", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		var out strings.Builder
		if !amqpprotocol.ValidateInit(context.Background(), ex.cmd, loadedInit, url, &out) {
			t.Fatalf("%s fails validation:\n%s", ex.cmd, out.String())
		}
		t.Logf("validated in %v", time.Since(start).Round(100*time.Millisecond))
	})
	t.Run("holds", func(t *testing.T) {
		t.Parallel()
		o := exampleSearch(t, url, ex.cmd, 1, exampleProve)
		if o.Found != nil {
			unexpected(t, o.Found)
		}
		if o.Plans != exampleProve || o.Inconclusive > 0 {
			t.Fatalf("%d plans run of %d, %d inconclusive", o.Plans, exampleProve, o.Inconclusive)
		}
		t.Logf("seed 1: %d plans, %d operations, %d verdicts, all held, in %v", o.Plans, o.Ops, o.Judged, o.Elapsed.Round(100*time.Millisecond))
	})
	t.Run("defect "+ex.defect, func(t *testing.T) {
		t.Parallel()
		o := exampleSearch(t, url, ex.cmd+" --defect "+ex.defect, ex.seed, exampleDefectPlans)
		if o.Found == nil {
			t.Fatalf("--defect %s not caught in %d plans of seed %d", ex.defect, o.Plans, ex.seed)
		}
		if !slices.Contains(ex.caught, o.Found.Property) {
			unexpected(t, o.Found) // a property the defect does not explain failed
		}
		t.Logf("--defect %s caught by %s after %d plans of seed %d, in %v: %s", ex.defect, o.Found.Property, o.Plans, ex.seed,
			o.Elapsed.Round(100*time.Millisecond), failed(o.Found))
	})
}

// exampleSearch draws plans of seed with kill, pause and partition faults,
// as the Python example's tests draw them, and runs them on cmd's
// processes, on the broker at url, with a 3 s heartbeat (as search's) and
// no shrinking.
func exampleSearch(t *testing.T, url, cmd string, seed uint64, plans int) *prover.Outcome {
	t.Helper()
	impl := amqpprotocol.NewProcesses(cmd)
	impl.InitTimeout = loadedInit
	defer impl.Stop()
	c := prover.Config{Subject: amqprun.Config{Scope: prover.Scope{Faults: []string{"kill", "pause", "partition"}}, Target: amqprun.RabbitMQ{URL: url}, Impl: impl,
		Options: amqprun.Options{HeartbeatMs: amqprun.Ms(3000)}}, Timeout: time.Minute}
	o, err := prover.Search{Config: c, Seed: seed, Plans: plans, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// failed is what the counterexample's failed verdict says.
func failed(cx *prover.Counterexample) string {
	for _, v := range cx.Report.Verdicts {
		if v.Property == cx.Property && v.Status == verdict.Fail {
			return v.Detail
		}
	}
	return cx.Summary()
}
