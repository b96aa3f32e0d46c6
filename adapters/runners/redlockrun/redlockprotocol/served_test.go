package redlockprotocol_test

import (
	"context"
	"path/filepath"
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
