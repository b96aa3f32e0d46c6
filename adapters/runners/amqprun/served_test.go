package amqprun_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

// servedSearch proves impl on the simulator served on the wire: no broker.
func servedSearch(t *testing.T, impl *amqpprotocol.Processes, seed uint64, plans int, props []string, faults ...string) *prover.Outcome {
	t.Helper()
	defer impl.Stop()
	impl.InitTimeout = loadedInit
	c := prover.Config{Subject: amqprun.Config{Scope: prover.Scope{Faults: faults}, Target: amqprun.Simulator{Wire: amqpprotocol.Wire("", 0)}, Impl: impl,
		Options: amqprun.Options{HeartbeatMs: amqprun.Ms(1000)}}, Properties: props, Timeout: time.Minute}
	out, err := prover.Search{Config: c, Seed: seed, Plans: plans, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// servedFaults are every fault of one broker, which the served simulator
// strikes as the simulator does.
var servedFaults = []string{"kill", "pause", "partition", "force-close", "drop-reply", "restart-broker"}

// The Python example (pika) holds every property on the served simulator,
// under every fault of one broker; and so it does taking one run after
// another in a process (--reuse: init_ok's "reuse", reset between runs),
// which then starts fewer processes than the plans have clients.
func TestPythonExampleOnTheServedSimulator(t *testing.T) {
	t.Parallel()
	needPika(t)
	for _, args := range []string{"", "--reuse"} {
		t.Run("args "+args, func(t *testing.T) {
			t.Parallel()
			starts := filepath.Join(t.TempDir(), "starts")
			cmd := "echo >>" + starts + "; exec /usr/bin/python3 " + pythonExample + "/lockprover_impl.py " + args
			out := servedSearch(t, amqpprotocol.NewProcesses(cmd), 5, 5, nil, servedFaults...)
			if out.Found != nil {
				unexpected(t, out.Found)
			}
			if out.Plans != 5 || out.Inconclusive > 0 {
				t.Fatalf("%d plans of 5, %d inconclusive", out.Plans, out.Inconclusive)
			}
			b, err := os.ReadFile(starts)
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(string(b), "\n")
			if args == "--reuse" && n >= out.Plans*2 {
				t.Errorf("%d processes started for %d plans, reusing them: want fewer than two a plan", n, out.Plans)
			}
			t.Logf("%d plans, %d operations, all held, %d processes started, in %v", out.Plans, out.Ops, n, out.Elapsed.Round(100*time.Millisecond))
		})
	}
}

// The reference served over the protocol (amqp091-go) holds on the served
// simulator, and its mutants are caught there by their properties.
func TestReferenceAndMutantsOnTheServedSimulator(t *testing.T) {
	t.Parallel()
	t.Run("reference", func(t *testing.T) {
		t.Parallel()
		out := servedSearch(t, amqpprotocol.NewProcesses(lockprover+" serve-reference"), 2, 4, nil, servedFaults...)
		if out.Found != nil {
			unexpected(t, out.Found)
		}
	})
	for _, name := range []string{"trust-scan", "release-deletes-a", "verify-by-get", "verify-errors"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := amqprun.MutantNamed(name)
			out := servedSearch(t, amqpprotocol.NewProcesses(lockprover+" serve-reference --mutant "+name), 2, 20, []string{m.Property})
			if out.Found == nil || out.Found.Property != m.Property {
				t.Fatalf("%s not caught by %s in %d plans", name, m.Property, out.Plans)
			}
		})
	}
}

// A plan run on the served simulator logs each process's steps in its
// decisions; run again with that log, the implementation gets the same
// replies in the same order: the same history, times and all.
func TestServedRunsReplayTheirLog(t *testing.T) {
	t.Parallel()
	impl := amqpprotocol.NewProcesses(lockprover + " serve-reference")
	defer impl.Stop()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "lp-served", Slots: 1, Options: amqprun.Options{HeartbeatMs: amqprun.Ms(1000)},
		Clients: [][]amqprun.Step{{{Op: "acquire"}, {Op: "verify"}, {Op: "release"}}, {{Op: "acquire"}, {Op: "acquire"}}},
		Admins:  [][]amqprun.Step{{{Op: "count"}}},
		Nemesis: []amqprun.Fault{{At: 25, Fault: histories.ForceClose, Target: "c2"}}}
	p.ScheduleSeed = 7
	sim := amqprun.Simulator{Wire: amqpprotocol.Wire("", 0)}
	first, err := sim.Run(context.Background(), p, impl)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Wire["c1"]) == 0 || len(p.Wire["c2"]) == 0 {
		t.Fatalf("the run logged no steps: %v", p.Wire)
	}
	log := p.Wire
	for i := range 3 {
		again, err := sim.Run(context.Background(), p, impl)
		if err != nil {
			t.Fatal(err)
		}
		if d := again.Evidence.Trace; len(d) > 0 {
			t.Errorf("run %d diverged from the log: %q", i+2, d)
		}
		if !reflect.DeepEqual(outcomes(again.History), outcomes(first.History)) {
			t.Fatalf("run %d: %v, the first: %v", i+2, outcomes(again.History), outcomes(first.History))
		}
		if !reflect.DeepEqual(p.Wire, log) {
			t.Errorf("run %d logged other steps", i+2)
		}
	}
}

// outcomes are a history's events, times and all, as JSON.
func outcomes(h []histories.Event) []string {
	var out []string
	for _, e := range h {
		b, _ := json.Marshal(e)
		out = append(out, string(b))
	}
	return out
}

// The Node (amqplib) and Go (amqp091-go) examples hold on the served
// simulator under every fault of one broker, and their seeded defects are
// caught there by the properties that catch them on the real broker.
func TestExamplesOnTheServedSimulator(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cmd  func(t *testing.T) string
		ex   example
	}{
		{"node", needNode, example{defect: "verify-from-cache", seed: 1, caught: []string{amqpcheck.CheapVerify, model.SlotExclusive}}},
		{"go", buildGoExample, example{defect: "trust-scan", seed: 1, caught: []string{model.SlotExclusive}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := tc.cmd(t)
			out := servedSearch(t, amqpprotocol.NewProcesses(cmd), 1, 4, nil, servedFaults...)
			if out.Found != nil {
				unexpected(t, out.Found)
			}
			out = servedSearch(t, amqpprotocol.NewProcesses(cmd+" --defect "+tc.ex.defect), tc.ex.seed, exampleDefectPlans, nil, servedFaults...)
			if out.Found == nil || !slices.Contains(tc.ex.caught, out.Found.Property) {
				t.Fatalf("--defect %s: %v after %d plans of seed %d, want one of %v", tc.ex.defect, out.Found, out.Plans, tc.ex.seed, tc.ex.caught)
			}
			t.Logf("--defect %s caught by %s after %d plans", tc.ex.defect, out.Found.Property, out.Plans)
		})
	}
}

// validate-impl's checks run on the served simulator, no broker needed:
// the reference and the Python example pass every one (each process's
// close of its connection, when its stdin closes, taken as it waits), and
// an implementation answering the wrong id fails, told so.
func TestValidateServed(t *testing.T) {
	t.Parallel()
	cmds := []string{lockprover + " serve-reference"}
	if exec.Command("/usr/bin/python3", "-c", "import pika").Run() == nil {
		cmds = append(cmds, "/usr/bin/python3 "+pythonExample+"/lockprover_impl.py")
	}
	for _, cmd := range cmds {
		var out strings.Builder
		if !amqpprotocol.ValidateServed(context.Background(), cmd, loadedInit, "", &out) {
			t.Errorf("%s fails validation on the served simulator:\n%s", cmd, out.String())
		}
	}
	var out strings.Builder
	if amqpprotocol.ValidateServed(context.Background(), `read l; echo '{"id":7,"type":"init_ok"}'; sleep 1`, 0, "4.3.6", &out) {
		t.Fatal("an implementation answering the wrong id passed validation")
	}
	if !strings.Contains(out.String(), "answered id 7 to request id 1") {
		t.Errorf("validation does not say what is wrong:\n%s", out.String())
	}
}

// explore --impl: implementations as the matrix's rows, each cell proven
// on the served simulator; the reference holds in every column, its
// trust-scan mutant breaks slot-exclusive with no faults, and that
// counterexample is written where the cell says.
func TestExploreImplsOnTheServedSimulator(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var out, log strings.Builder
	impls := []string{lockprover + " serve-reference", lockprover + " serve-reference --mutant trust-scan"}
	inconclusive, err := amqpprotocol.ExploreImpls(context.Background(), explore.Config{Seed: 1, Plans: 2, Root: root, Impls: impls, Out: &out, Log: &log})
	if err != nil || inconclusive {
		t.Fatalf("inconclusive %v, %v\n%s", inconclusive, err, log.String())
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(rows) != 4 {
		t.Fatalf("want a header, a rule and 2 rows:\n%s", out.String())
	}
	if strings.Count(rows[2], "holds (2 plans") != 5 {
		t.Errorf("the reference does not hold in every column: %s", rows[2])
	}
	cells := strings.Split(rows[3], "|")
	if len(cells) < 3 || !strings.Contains(cells[2], "**slot-exclusive**") {
		t.Fatalf("trust-scan not caught by slot-exclusive with no faults: %s", rows[3])
	}
	dir := strings.Trim(cells[2][strings.Index(cells[2], "`"):], "` ")
	if _, err := os.Stat(filepath.Join(dir, "plan.json")); err != nil {
		t.Errorf("the cell's counterexample: %v", err)
	}
}

// On the served cluster an implementation can fail over: the Go example,
// given every node's port (init's urls), connects to the next node when
// its own is killed, and acquires there (the slot's queue lives on the
// admin's node, n2); the served broker's log names the connection made to
// n2.
func TestGoExampleFailsOverOnTheServedCluster(t *testing.T) {
	t.Parallel()
	impl := amqpprotocol.NewProcesses(buildGoExample(t))
	defer impl.Stop()
	impl.InitTimeout = loadedInit
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "lp-failover", Slots: 1, Options: amqprun.Options{HeartbeatMs: amqprun.Ms(1000)},
		Clients: [][]amqprun.Step{{{Op: "sleep", Ms: 500}, {Op: "acquire"}, {Op: "sleep", Ms: 3000}, {Op: "verify"}, {Op: "release"}, {Op: "acquire"}, {Op: "release"}}},
		Admins:  [][]amqprun.Step{{}},
		Nemesis: []amqprun.Fault{{At: 1500, Fault: histories.Kill, Node: "n1", For: 20000}},
		Cluster: []string{"n1", "n2", "n3"}, Nodes: map[string]string{"admin": "n2", "c1": "n1"}, PartitionHandling: "ignore"}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := amqprun.Simulator{Wire: amqpprotocol.Wire("", 0)}.Run(context.Background(), p, impl)
	if err != nil {
		t.Fatal(err)
	}
	var acquires []string
	for _, e := range res.History {
		if e.Process == "c1" && e.F == "acquire" && e.Type != histories.Invoke {
			acquires = append(acquires, string(e.Type))
		}
	}
	if !slices.Equal(acquires, []string{"ok", "ok"}) {
		t.Fatalf("c1's acquires: %v, want both ok (the second through n2): %v", acquires, outcomes(res.History))
	}
	if !slices.ContainsFunc(p.Wire["c1"], func(s string) bool { return strings.HasSuffix(s, " open at n2") }) {
		t.Fatalf("c1's steps name no connection to n2: %q", p.Wire["c1"])
	}
}
