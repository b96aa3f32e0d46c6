package redlockprotocol_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun/redlockprotocol"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// proveServed proves the implementation command serves on the simulated
// servers served on the wire: up to plans drawn plans, judged on props.
func proveServed(t *testing.T, command string, seed uint64, plans int, c redlockrun.Config, props []string) *prover.Outcome {
	t.Helper()
	c.Target = redlockrun.Simulator{Impl: processes(t, command), Wire: redlockprotocol.Wire}
	out, err := prover.Search{Config: prover.Config{Subject: c, Properties: props}, Seed: seed, Plans: plans, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// minimal is the command of the minimal example
// (examples/minimal/redis_lock.py), with args.
func minimal(t *testing.T, args string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "examples", "minimal", "redis_lock.py"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(strings.Fields(python(t, ""))[0] + " " + script + " " + args)
}

// The minimal example (examples/minimal/redis_lock.py) holds on drawn
// plans on the simulated servers served on the wire, with no
// redis-server, and its --unsafe-release fails the README's plan there
// (examples/minimal/release-after-expiry.json) every time, by
// lease-exclusive, where the safe release holds it.
func TestMinimalExampleOnTheServedSimulator(t *testing.T) {
	t.Parallel()
	out := proveServed(t, minimal(t, ""), 1, 10, redlockrun.Config{Servers: 1}, safety)
	if out.Found != nil {
		var b strings.Builder
		histories.Write(&b, out.Found.Result.History)
		t.Fatalf("the minimal example on the served simulator: %s\n%s", out.Found.Summary(), b.String())
	}
	t.Logf("the minimal example: %d plans, %v", out.Plans, out.Verdicts)
	for _, c := range []struct {
		args  string
		fails bool
	}{{"", false}, {"--unsafe-release", true}, {"--unsafe-release", true}} {
		p, err := redlockrun.ReadPlan(filepath.Join("..", "..", "..", "..", "examples", "minimal", "release-after-expiry.json"))
		if err != nil {
			t.Fatal(err)
		}
		target := redlockrun.Simulator{Impl: processes(t, minimal(t, c.args)), Wire: redlockprotocol.Wire}
		res, err := target.Run(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		failed := false
		for _, v := range model.Check(res.History, model.Options{Family: []any{redlockrun.Config{}.Judging("")}}).Verdicts {
			failed = failed || v.Property == lease.LeaseExclusive && v.Status == verdict.Fail
		}
		if failed != c.fails {
			var b strings.Builder
			histories.Write(&b, res.History)
			t.Fatalf("%q on release-after-expiry.json: lease-exclusive failed %v, want %v:\n%s", c.args, failed, c.fails, b.String())
		}
	}
}

// On the served simulator an operation that is not answered is given up
// on the simulator's clock as well as the machine's: after its bound of
// virtual time (the launcher's: 30 s with the tests' init timeout of a
// minute), so at the same point of the history in every run, the process
// named hung.
func TestHungOperationOnTheSimulatorsClock(t *testing.T) {
	t.Parallel()
	var first string
	for run := range 2 {
		res := onePlanOn(t, true, "hang-release", []redlockrun.Step{{Op: histories.Acquire}, {Op: histories.Release}})
		var b strings.Builder
		histories.Write(&b, res.History)
		h := drawnToken.ReplaceAllString(b.String(), `"token":"T"`) // the fake draws its tokens
		var invoke, end int64 = -1, -1
		for _, e := range res.History {
			if e.Process == "c1" && e.F == histories.Release {
				if e.Type == histories.Invoke {
					invoke = e.Time
				} else {
					end = e.Time
				}
			}
		}
		switch {
		case !strings.Contains(strings.Join(res.Evidence.Problems, "\n"), "hung: no answer to its release within 30s"):
			t.Fatalf("run %d: problems %q, want the release hung", run, res.Evidence.Problems)
		case invoke < 0 || end-invoke < int64(30*time.Second-time.Millisecond):
			t.Fatalf("run %d: the release ended %v after its invoke, want at least 30s of virtual time:\n%s", run, time.Duration(end-invoke), b.String())
		case run == 1 && h != first:
			t.Fatalf("the second run's history differs:\n%s\nthe first's:\n%s", h, first)
		}
		first = h
	}
}

var drawnToken = regexp.MustCompile(`"token":"[0-9a-f]+"`)
