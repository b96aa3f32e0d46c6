package redlockprotocol_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun/redlockprotocol"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
)

// prioritySafety are the properties a priority Redlock's process is held
// to on real Redis here (available needs a machine that answers within a
// round's timeout).
var prioritySafety = append(append([]string(nil), safety...), lease.StealOrder, lease.StealExact)

func servePriority(mutant string) string { return serveKind("priority-redlock", mutant) }

// validate-impl --kind priority-redlock passes the priority reference
// served over the protocol, and fails a mutant that steals from an equal,
// and one whose thief does not wait for its victim, at the checks that see
// them.
func TestValidatePriority(t *testing.T) {
	t.Parallel()
	onRedis(t)
	validates(t, servePriority, true, "ok    c4 is granted only after c3's lost notice came, or once c3's lease could have ended", priorityCases)
}

// The steal check takes either way the protocol gives a thief. By
// default its victim stays stopped past its whole lease, and the
// reference's thief returns once the lease could have ended
// (TestValidatePriority); here the victim is resumed after a second, and
// the thief, the reference's and the Python example's, is granted on its
// acknowledgement, after its lost notice, which names the thief.
func TestStealCheckTakesAnAcknowledgedThief(t *testing.T) {
	t.Parallel()
	onRedis(t)
	for _, c := range []struct {
		name    string
		command func(t *testing.T) string
	}{
		{"the reference", func(*testing.T) string { return servePriority("") }},
		{"the Python priority Redlock", func(t *testing.T) string { return python(t, "") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			passed, err := redlockprotocol.ValidatePriorityHolding(context.Background(), c.command(t), time.Second, &out)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"ok    c4 is granted only after c3's lost notice came", "ok    c3's lost notice names c4's token as the thief"} {
				if !passed || !strings.Contains(out.String(), want) {
					t.Fatalf("%s, its victim resumed after 1s: passed %v, want %q in:\n%s", c.name, passed, want, out.String())
				}
			}
		})
	}
}

// priorityCases are the priority mutants (or defects) validate-impl
// catches, each at its check.
var priorityCases = []validateCase{
	{"", ""},
	{"equal-steals", "FAIL  c2's acquire while c1 holds is held"},
	{"no-ack-wait", "FAIL  c4 is granted only after c3's lost notice came"},
}

// proveImpl proves the Redlock (a priority Redlock, with priority) that
// command serves over the protocol on drawn plans: up to plans of them,
// judged on props.
func proveImpl(t *testing.T, command string, priority bool, seed uint64, plans int, props []string) *prover.Outcome {
	t.Helper()
	impl := processes(t, command)
	out, err := prover.Search{Config: prover.Config{Subject: redlockrun.Config{Target: redlockrun.Redis{Impl: impl, Priority: priority}, Priority: priority}, Properties: props},
		Seed: seed, Plans: plans, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The priority reference served over the protocol holds on drawn plans
// on real redis-servers (its lost notices recorded from its processes'
// lines), and its mutant equal-steals, served so, is caught by
// steal-order.
func TestProvePriorityThroughTheProtocol(t *testing.T) {
	t.Parallel()
	onRedis(t)
	out := proveImpl(t, servePriority(""), true, 1, 4, prioritySafety)
	if out.Found != nil {
		var b strings.Builder
		histories.Write(&b, out.Found.Result.History)
		t.Fatalf("the priority reference through the protocol: %s\n%s", out.Found.Summary(), b.String())
	}
	t.Logf("the priority reference through the protocol: %d plans, %v", out.Plans, out.Verdicts)
	if out := proveImpl(t, servePriority("equal-steals"), true, 1, 20, []string{lease.StealOrder}); out.Found == nil {
		t.Fatal("equal-steals through the protocol: not caught by steal-order in 20 plans")
	} else {
		t.Logf("equal-steals through the protocol: caught after %d plans: %s", out.Plans, out.Found.Summary())
	}
}

// python is the command of the Python priority Redlock
// (examples/python/priority_redlock.py), with defect (its
// LP_PRIORITY_DEFECT, "" for none); the test is skipped, saying so,
// without python3.
func python(t *testing.T, defect string) string {
	t.Helper()
	// /usr/bin/python3 first: a pyenv shim on PATH takes a second or
	// more to start each process.
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		py, err = exec.LookPath("python3")
	}
	if err != nil {
		t.Skip("skipped: no python3 on PATH, which runs examples/python/priority_redlock.py")
	}
	script, err := filepath.Abs("../../../../examples/python/priority_redlock.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := py + " " + script
	if defect != "" {
		cmd = "LP_PRIORITY_DEFECT=" + defect + " " + cmd
	}
	return cmd
}

// The Python priority Redlock passes validate-impl; its defects
// equal-steals and no-ack-wait fail it, each at the check that sees it.
func TestValidatePythonPriority(t *testing.T) {
	t.Parallel()
	onRedis(t)
	validates(t, func(defect string) string { return python(t, defect) }, true, "ok    c4 is granted only after c3's lost notice came, or once c3's lease could have ended", priorityCases)
}

// The Python priority Redlock holds on drawn plans on real redis-servers,
// under every fault offered there; with its defect equal-steals, steal-order
// catches it.
func TestProvePythonPriority(t *testing.T) {
	t.Parallel()
	onRedis(t)
	out := proveImpl(t, python(t, ""), true, 2, 4, prioritySafety)
	if out.Found != nil {
		var b strings.Builder
		histories.Write(&b, out.Found.Result.History)
		t.Fatalf("the Python priority Redlock: %s\n%s", out.Found.Summary(), b.String())
	}
	t.Logf("the Python priority Redlock: %d plans, %v", out.Plans, out.Verdicts)
	if out := proveImpl(t, python(t, "equal-steals"), true, 1, 20, []string{lease.StealOrder}); out.Found == nil {
		t.Fatal("the Python priority Redlock with equal-steals: not caught by steal-order in 20 plans")
	} else {
		t.Logf("equal-steals: caught after %d plans: %s", out.Plans, out.Found.Summary())
	}
}
