package amqprun_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// exhaustServed searches every schedule of scope for impl in processes on
// the simulator served on the wire, without pruning at states (it sees
// none of a process's), or, impl nil, for the reference in-process the
// same way.
func exhaustServed(t *testing.T, kind string, impl *amqpprotocol.Processes, scope prover.ExhaustScope) *prover.ExhaustOutcome {
	t.Helper()
	c := amqprun.Config{Kind: kind}
	if impl != nil {
		defer impl.Stop()
		impl.InitTimeout = loadedInit
		c.Target, c.Impl = amqprun.Simulator{Wire: amqpprotocol.Wire("", -1)}, impl
	}
	o, err := prover.Exhaust{Config: prover.Config{Subject: c, Out: t.TempDir()}, Scope: scope, Context: context.Background()}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The reference served as a process (serve-reference) is searched through
// the wire over the very tree the in-process search walks: the same plans
// (its faults placed after the same methods), schedules, choice points
// and verdicts, within a bound of preemptions and with every fault; and
// two searches of a scope agree (the bounded one's).
func TestExhaustImplIsTheReferencesTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		scope prover.ExhaustScope
		runs  int // searches through the wire, each to agree with the first
	}{
		{"two clients", prover.ExhaustScope{Clients: 2, Ops: 1, Bounded: true, Preemptions: 1}, 2},
		// Once: 123 plans, each a process's start; on two cores beside
		// the suite a search took over 7 minutes.
		{"a fault", prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{"kill", "drop-reply"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := exhaustServed(t, histories.Mutex, nil, tc.scope)
			for run := range tc.runs {
				wire := exhaustServed(t, histories.Mutex, amqpprotocol.NewProcesses(lockprover+" serve-reference"), tc.scope)
				if wire.Undecided > 0 || wire.Found != nil {
					t.Fatalf("run %d: %d undecided (%s), found %v", run+1, wire.Undecided, wire.FirstUndecided, wire.Found)
				}
				got := []any{wire.Plans, wire.Schedules, wire.States, wire.Outcomes}
				if want := []any{in.Plans, in.Schedules, in.States, in.Outcomes}; !reflect.DeepEqual(got, want) {
					t.Fatalf("run %d through the wire: plans, schedules, choice points, verdicts %v; in-process %v", run+1, got, want)
				}
			}
			t.Logf("%d plans, %d schedules, %d choice points, as in-process", in.Plans, in.Schedules, in.States)
		})
	}
}

// Searched whole through the wire, a mutant of the reference served as a
// process and the Python example's seeded defect are caught in the scopes
// that catch the mutants in-process (docs/exhaustive-by-family.md, A and
// B), each by its shortest counterexample, which replays frame for frame;
// the Python example itself holds in them.
func TestExhaustImplCatches(t *testing.T) {
	t.Parallel()
	one := prover.ExhaustScope{Clients: 1, Ops: 1}
	type search struct {
		name, kind, cmd string
		caught          bool
	}
	cases := []search{{"mutant release-deletes-a", histories.Semaphore, lockprover + " serve-reference --mutant release-deletes-a", true}}
	if exec.Command("/usr/bin/python3", "-c", "import pika").Run() == nil {
		py := "/usr/bin/python3 " + pythonExample + "/lockprover_impl.py"
		cases = append(cases, search{"python", histories.Mutex, py, false},
			search{"python verify-from-cache", histories.Mutex, py + " --defect verify-from-cache", true})
	} else {
		t.Log("no python3 with pika: the Python example's cases skip")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			impl := amqpprotocol.NewProcesses(tc.cmd)
			o := exhaustServed(t, tc.kind, impl, one)
			if o.Undecided > 0 || (o.Found != nil) != tc.caught {
				t.Fatalf("%d schedules, %d undecided (%s), found %v; want caught %v", o.Schedules, o.Undecided, o.FirstUndecided, o.Found, tc.caught)
			}
			if o.Found == nil {
				return
			}
			t.Logf("%s violated after %d schedules: %s", o.Found.Property, o.Schedules, o.Found.Plan.Brief())
			again := amqpprotocol.NewProcesses(tc.cmd)
			defer again.Stop()
			again.InitTimeout = loadedInit
			p := o.Found.Plan.(*amqprun.Plan)
			if len(p.Wire) == 0 {
				t.Fatal("the counterexample's plan has no log of its steps")
			}
			res, err := amqprun.Simulator{Wire: amqpprotocol.Wire("", -1)}.Run(context.Background(), p, again)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Evidence.Trace; len(d) > 0 {
				t.Errorf("the replay left the log: %q", d)
			}
			if !reflect.DeepEqual(outcomes(res.History), outcomes(o.Found.Result.History)) {
				t.Errorf("the replay's history differs:\n%v\nthe search's:\n%v", outcomes(res.History), outcomes(o.Found.Result.History))
			}
		})
	}
}

// BenchmarkExhaustImpl times a search of one scope (a mutex, two clients
// of one operation each, within one preemption: 102 schedules), of the
// reference in-process and as a process through the wire (serve-reference,
// Go; the Python example where pika is installed), and reports schedules
// a second (docs/measurements/exhaustive.md).
func BenchmarkExhaustImpl(b *testing.B) {
	scope := prover.ExhaustScope{Clients: 2, Ops: 1, Bounded: true, Preemptions: 1}
	cmds := map[string]string{"in-process": "", "serve-reference": lockprover + " serve-reference"}
	if exec.Command("/usr/bin/python3", "-c", "import pika").Run() == nil {
		cmds["python"] = "/usr/bin/python3 " + pythonExample + "/lockprover_impl.py"
	}
	for _, name := range []string{"in-process", "serve-reference", "python"} {
		cmd, ok := cmds[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			c := amqprun.Config{Kind: histories.Mutex}
			if cmd != "" {
				impl := amqpprotocol.NewProcesses(cmd)
				defer impl.Stop()
				impl.InitTimeout = loadedInit
				c.Target, c.Impl = amqprun.Simulator{Wire: amqpprotocol.Wire("", -1)}, impl
			}
			var schedules int64
			for b.Loop() {
				o, err := prover.Exhaust{Config: prover.Config{Subject: c, Out: b.TempDir()}, Scope: scope, Context: context.Background()}.Run()
				if err != nil || o.Found != nil || o.Undecided > 0 {
					b.Fatalf("%v, found %v, %d undecided", err, o.Found, o.Undecided)
				}
				schedules += o.Schedules
			}
			b.ReportMetric(float64(schedules)/b.Elapsed().Seconds(), "schedules/s")
		})
	}
}

// A process the simulator kills while it starts (its init in flight) is
// gone once its run is: the World drops the coroutine that was starting
// it, never to return, and the run's end kills the process (Drain), where
// it had lived on until the search ended, one a plan.
func TestKilledWhileStartingIsGone(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("killed-while-starting-%d", time.Now().UnixNano())
	impl := amqpprotocol.NewProcesses("true " + marker + "; " + lockprover + " serve-reference")
	defer impl.Stop()
	impl.InitTimeout = loadedInit
	for k := 1; k <= 3; k++ {
		p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: histories.Mutex, Lock: "lp", Clients: [][]amqprun.Step{{{Op: histories.Acquire}}},
			Nemesis: []amqprun.Fault{{Fault: histories.Kill, Target: "c1", AfterCalls: k}}}
		if _, err := (amqprun.Simulator{Wire: amqpprotocol.Wire("", -1)}).Run(context.Background(), p, impl); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := alive(marker)
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the three runs still alive after them", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive counts the processes whose command line holds marker.
func alive(marker string) int {
	dirs, _ := os.ReadDir("/proc")
	n := 0
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && strings.Contains(string(b), marker) {
			n++
		}
	}
	return n
}
