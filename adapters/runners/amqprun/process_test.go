package amqprun_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"

	"github.com/lockprover/lockprover/adapters/process/processtest"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
)

// lockprover is the binary built for these tests, whose serve-reference
// puts the reference (and its mutants) behind the protocol.
var lockprover string

func TestMain(m *testing.M) { processtest.Main(m, &lockprover) }

// loadedInit is how long the tests' implementation processes have to
// answer init (--init-timeout): a Python process beside the whole suite
// took over 10 s, the protocol's default, to import pika and connect.
// What an init that never comes does is TestBrokenImplementations'.
const loadedInit = 30 * time.Second

// search proves impl on the local broker with a 3 s heartbeat (1 s
// heartbeats lapsed under the suite's load: "read tcp ...: i/o timeout").
func search(t *testing.T, impl *amqpprotocol.Processes, plans int, props []string, faults ...string) *prover.Outcome {
	t.Helper()
	defer impl.Stop()
	if impl.InitTimeout == 0 {
		impl.InitTimeout = loadedInit
	}
	c := prover.Config{Subject: amqprun.Config{Scope: prover.Scope{Faults: faults}, Target: amqprun.RabbitMQ{URL: rabbitmqtest.URL(t)}, Impl: impl,
		Options: amqprun.Options{HeartbeatMs: amqprun.Ms(3000)}}, Properties: props, Timeout: time.Minute}
	out, err := prover.Search{Config: c, Seed: 2, Plans: plans, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unexpected fails t with a counterexample a real-target search was not to
// find, after writing it where it stays (a directory under the system's
// temporary one, named in the log) and logging its plan: a failure beside
// the suite that passes alone can still be replayed (replay --target
// rabbitmq PLAN --times 3).
func unexpected(t *testing.T, cx *prover.Counterexample) {
	t.Helper()
	var plan bytes.Buffer
	if err := cx.Plan.Write(&plan); err != nil {
		t.Logf("writing the plan: %v", err)
	}
	kept := "(not kept)"
	if dir, err := os.MkdirTemp("", "lockprover-failed-"+strings.ReplaceAll(t.Name(), "/", "-")+"-"); err == nil {
		if err := cx.Write(dir); err == nil {
			kept = dir
		}
	}
	t.Fatalf("%s\nproblems: %v\ncounterexample kept in %s; its plan:\n%s", cx.Summary(), cx.Result.Evidence.Problems, kept, plan.String())
}

func TestReferenceThroughTheProtocol(t *testing.T) {
	quick.Skip(t, "processes over the protocol")
	t.Parallel()
	out := search(t, amqpprotocol.NewProcesses(lockprover+" serve-reference"), 3, nil, "kill", "pause", "partition")
	if out.Found != nil {
		unexpected(t, out.Found)
	}
}

// Mutants served over the protocol are caught by their properties.
func TestMutantsThroughTheProtocol(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"trust-scan", "release-deletes-a", "verify-by-get", "verify-errors"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := amqprun.MutantNamed(name)
			out := search(t, amqpprotocol.NewProcesses(lockprover+" serve-reference --mutant "+name), 10, []string{m.Property})
			if out.Found == nil || out.Found.Property != m.Property {
				t.Fatalf("%s not caught by %s in %d plans", name, m.Property, out.Plans)
			}
		})
	}
}

// Broken implementations get a clear report, fail the run, and leave no
// process behind.
func TestBrokenImplementations(t *testing.T) {
	t.Parallel()
	init := `read l; echo '{"id":1,"type":"init_ok"}'; `
	for _, tc := range []struct {
		name, script, want string
		initTimeout        time.Duration // Impl.InitTimeout
	}{
		{"crashes at start", `echo "no config" >&2; exit 3`, "did not start: exited (exit status 3)", 0},
		// Not the default, 10 s: TestValidateLeaseFails/hangs_at_init
		// waits that bound (the same constant) out.
		{"hangs", `sleep 600`, "did not answer within 1.5s", 1500 * time.Millisecond},
		{"refuses to start", `read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no","definite":true}'`, "refused to start: unsupported", 0},
		{"prints garbage", init + `read l; echo 'this is not JSON'; sleep 600`, "wrote a line that is not a JSON object", 0},
		{"answers the wrong id", init + `while read l; do echo '{"id":999,"type":"acquire_ok","slot":1}'; done`, "answered id 999 to request id 2", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := processtest.Marker("LPTEST")
			impl := amqpprotocol.NewProcesses(fmt.Sprintf("%s=1; %s", marker, tc.script))
			impl.Timeout, impl.InitTimeout = 5*time.Second, tc.initTimeout
			defer impl.Stop()
			// Any plan shows a broken implementation: one client's lock cycle.
			p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "lp-broken", Slots: 1, Options: amqprun.Options{HeartbeatMs: amqprun.Ms(1000)},
				Clients: [][]amqprun.Step{{{Op: "acquire"}, {Op: "verify"}, {Op: "release"}}}, Admins: [][]amqprun.Step{{}}}
			res, err := amqprun.RabbitMQ{URL: rabbitmqtest.URL(t)}.Run(context.Background(), p, impl)
			if err != nil {
				t.Fatal(err)
			}
			var avail verdict.Verdict
			for _, v := range prover.Judge(res, model.Options{}).Verdicts {
				if v.Property == model.Available {
					avail = v
				}
			}
			problems := strings.Join(res.Evidence.Problems, "\n")
			if avail.Status != verdict.Fail || !strings.Contains(problems, tc.want) {
				t.Errorf("available %v (%s); problems:\n%s\nwant one saying %q", avail.Status, avail.Detail, problems, tc.want)
			}
			if pids, _ := exec.Command("pgrep", "-f", marker+"=").Output(); len(pids) > 0 {
				t.Errorf("processes left behind: %s", pids)
			}
		})
	}
}

// A process killed while it starts is killed for real, not left running
// beside its successor, and a kill is not the implementation failing to
// start.
func TestKillDuringInit(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	marker := processtest.Marker("LPTEST")
	// Each process answers init a second after it reads it (not a second
	// after it starts: lockprover starts a plan's first processes ahead
	// of its clock, so a sleep before serving would be over by then).
	impl := amqpprotocol.NewProcesses(fmt.Sprintf(`%s=1; IFS= read -r init; sleep 1; { printf '%%s\n' "$init"; cat; } | %s serve-reference`, marker, lockprover))
	defer impl.Stop()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "lp-slow", Slots: 1, Options: amqprun.Options{HeartbeatMs: amqprun.Ms(1000)},
		Clients: [][]amqprun.Step{{{Op: "acquire"}, {Op: "release"}}}, Admins: [][]amqprun.Step{{}},
		Nemesis: []amqprun.Fault{{At: 1500, Fault: "kill", Target: "c1"}}} // c1 starts once the admin has created the semaphore, 1 s in
	res, err := amqprun.RabbitMQ{URL: rabbitmqtest.URL(t)}.Run(context.Background(), p, impl)
	if err != nil {
		t.Fatal(err)
	}
	if pids, _ := exec.Command("pgrep", "-f", marker+"=").Output(); len(pids) > 0 {
		t.Errorf("processes still running after the run: %s", pids)
	}
	if len(res.Evidence.Problems) > 0 {
		t.Errorf("problems: %v", res.Evidence.Problems)
	}
	if r := prover.Judge(res, model.Options{}); r.Status() != verdict.Pass {
		t.Errorf("%+v", r.Verdicts)
	}
	// The kill struck c1 while it started: before its first operation.
	kill := slices.IndexFunc(res.History, func(e histories.Event) bool { return e.F == histories.Kill })
	first := slices.IndexFunc(res.History, func(e histories.Event) bool { return e.Process == "c1" })
	if kill < 0 || first >= 0 && first < kill {
		t.Errorf("the kill (#%d) did not strike c1 before its first operation (#%d)", kill, first)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t)
	var out strings.Builder
	if !amqpprotocol.Validate(lockprover+" serve-reference", url, &out) {
		t.Fatalf("the reference fails validation:\n%s", out.String())
	}
	out.Reset()
	if amqpprotocol.Validate(`read l; echo '{"id":7,"type":"init_ok"}'; sleep 1`, url, &out) {
		t.Fatal("an implementation answering the wrong id passed validation")
	}
	if !strings.Contains(out.String(), "answered id 7 to request id 1") {
		t.Errorf("validation does not say what is wrong:\n%s", out.String())
	}
}

// pythonExample is the folder of the Python example implementation.
var pythonExample = filepath.Join("..", "..", "..", "examples", "python")

// needPika skips a test without Debian's python3 and its pika.
func needPika(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import pika").Run(); err != nil {
		t.Skip("needs Debian's /usr/bin/python3 with python3-pika")
	}
}

// The Python example, written from the spec with pika, is proven through
// the protocol.
func TestPythonExample(t *testing.T) {
	quick.Skip(t, "RabbitMQ and Python processes")
	t.Parallel()
	needPika(t)
	script := filepath.Join(pythonExample, "lockprover_impl.py")
	if _, err := os.Stat(script); err != nil {
		t.Fatal("the Python example is missing:", err)
	}
	cmd := "/usr/bin/python3 " + script
	var out strings.Builder
	if !amqpprotocol.ValidateInit(context.Background(), cmd, loadedInit, rabbitmqtest.URL(t), &out) {
		t.Fatalf("the Python example fails validation:\n%s", out.String())
	}
	o := search(t, amqpprotocol.NewProcesses(cmd), 3, nil, "kill", "pause", "partition")
	if o.Found != nil {
		unexpected(t, o.Found)
	}
}

// The Python example's own unit tests pass against the same broker: the
// tests python3 -m unittest discovers, a process for each class of them,
// all at once (each test works on queues of its own).
func TestPythonExampleUnitTests(t *testing.T) {
	t.Parallel()
	needPika(t)
	env := append(os.Environ(), "AMQP_URL="+rabbitmqtest.URL(t), "PYTHONDONTWRITEBYTECODE=1")
	list := exec.Command("/usr/bin/python3", "-c", `import unittest
def ids(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from ids(t)
        else:
            yield t.id()
for i in ids(unittest.defaultTestLoader.discover(".")):
    print(i)`)
	list.Dir, list.Env = pythonExample, env
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("listing the unit tests: %v\n%s", err, out)
	}
	var classes []string
	tests := map[string][]string{}
	for _, id := range strings.Fields(string(out)) {
		class := id[:max(strings.LastIndexByte(id, '.'), 0)]
		if tests[class] == nil {
			classes = append(classes, class)
		}
		tests[class] = append(tests[class], id)
	}
	if len(classes) == 0 {
		t.Fatal("python3 -m unittest finds no tests")
	}
	for _, class := range classes {
		t.Run(class, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("/usr/bin/python3", append([]string{"-m", "unittest"}, tests[class]...)...)
			cmd.Dir, cmd.Env = pythonExample, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python3 -m unittest %s: %v\n%s", strings.Join(tests[class], " "), err, out)
			}
			if want := fmt.Sprintf("Ran %d test", len(tests[class])); !strings.Contains(string(out), want) {
				t.Fatalf("python3 -m unittest %s: no %q in\n%s", class, want, out)
			}
		})
	}
}
