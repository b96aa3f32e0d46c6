// Package prover proves amqp-locks implementations: it draws plans (what
// admins and clients do, which faults strike when, how the simulator
// schedules them) with rapid, runs them against a target, records the
// history and judges it, property by property. A failing plan is shrunk by
// rapid to a minimal one and written out with its history, so that it can
// be replayed.
//
// A user's test proves an implementation with Check:
//
//	func TestMyLocks(t *testing.T) {
//		prover.Check(t, prover.Config{})
//	}
//
// -rapid.checks, -rapid.seed, fail files and shrinking work as rapid users
// expect.
package prover

import (
	"context"
	"fmt"
	"github.com/lockprover/lockprover/histories"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// A Target runs plans: the simulator, or a real broker.
type Target interface {
	Run(ctx context.Context, p *Plan, impl Impl) (*Result, error)
}

// Config says what to prove and how hard to look. The zero value proves the
// reference on the simulator with every fault.
type Config struct {
	Target Target // nil: the simulator
	Impl   Impl   // nil: the reference (or Mutant of it)
	Mutant string // a mutant of the reference to prove instead

	Kind      string   // histories.Semaphore (default) or histories.Mutex
	Clients   int      // at most this many clients; 0 means 3
	Ops       int      // at most this many steps per client; 0 means 8
	Admins    int      // at most this many admins; 0 means 2
	Faults    []string // the faults plans may hold; nil means every fault, empty means none
	MaxFaults int      // at most this many faults per plan; 0 means 3
	Options   Options  // the reference's options

	// Properties are those whose violation fails a plan; nil means all.
	Properties []string
	Strict     bool          // judge acquire-exact with the strict model
	Timeout    time.Duration // per linearizability check; 0 means 10 s
	// Out is where a counterexample is written; "" means the test's
	// artifact directory or a temporary one.
	Out string

	ctx context.Context // interrupts runs (set by Search)
	// Set by Search: stop skips the plans left once it says so (a passed
	// deadline, an interrupt); runError hears of plans that could not run;
	// tolerateInconclusive lets a plan whose checks ran out of time pass
	// (the search counts it) instead of failing it.
	stop                 func() bool
	runError             func(error)
	tolerateInconclusive bool
}

func (c Config) withDefaults() Config {
	if c.Kind == "" {
		c.Kind = histories.Semaphore
	}
	if c.Clients == 0 {
		c.Clients = 3
	}
	if c.Ops == 0 {
		c.Ops = 8
	}
	if c.Admins == 0 {
		c.Admins = 2
	}
	if c.Faults == nil {
		c.Faults = faultNames
	}
	if c.MaxFaults == 0 {
		c.MaxFaults = 3
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Target == nil {
		c.Target = Simulator{}
	}
	if c.Impl == nil {
		c.Impl = Reference
	}
	return c
}

// A Counterexample is a plan that broke a property: the plan, what it gave,
// and the property.
type Counterexample struct {
	Plan     *Plan
	Result   *Result
	Report   *model.Report
	Property string
	// Inconclusive says Property could not be decided (its check ran out of
	// time) and nothing failed: no violation, but no proof either.
	Inconclusive bool
	Impl         string // what was proven, in words
	// Replay is the command that replays it, as the caller prints it (with
	// its target and implementation); empty means "lockprover replay
	// DIR/plan.json".
	Replay string

	judged model.Options // how Report was judged (timeout, model)
}

// run runs and judges one plan.
func (c Config) run(p *Plan) (*Counterexample, error) {
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := c.Target.Run(ctx, p, implFor(p, c.Impl))
	if err != nil {
		return nil, err
	}
	// The plan records how it was judged, so that replaying it judges it
	// the same way.
	p.Model, p.Properties = "", c.Properties
	if c.Strict {
		p.Model = "strict"
	}
	rep := Judge(p, res, c.judgeOptions())
	cx := &Counterexample{Plan: p, Result: res, Report: rep, Impl: describeImpl(c.Impl, p), judged: c.judgeOptions()}
	cx.Property, cx.Inconclusive = firstViolation(rep, c.Properties)
	return cx, nil
}

func (c Config) judgeOptions() model.Options {
	return model.Options{Strict: c.Strict, Timeout: c.Timeout}
}

// firstViolation is the first property (in the report's fixed order) that
// failed among those that count; if none failed, the first that could not
// be decided (inconclusive true); else "".
func firstViolation(r *model.Report, props []string) (property string, inconclusive bool) {
	for _, status := range []model.Status{model.Fail, model.Inconclusive} {
		for _, v := range r.Verdicts {
			if v.Status == status && (props == nil || contains(props, v.Property)) {
				return v.Property, status == model.Inconclusive
			}
		}
	}
	return "", false
}

// Check proves c's target under rapid: it draws -rapid.checks plans, and
// on a violation rapid shrinks the plan and Check writes the minimal
// counterexample (plan.json, history.jsonl, history.html, summary.txt)
// under c.Out and reports its path.
func Check(t *testing.T, c Config) {
	t.Helper()
	if pf, ok := c.Target.(Preflighter); ok {
		if err := pf.Preflight(t.Context()); err != nil {
			t.Fatalf("%v", err)
		}
	}
	var last *Counterexample
	t.Cleanup(func() {
		if last == nil || !t.Failed() {
			return
		}
		dir := c.Out
		if dir == "" {
			dir = t.ArtifactDir()
		}
		if err := last.Write(dir); err != nil {
			t.Errorf("writing the counterexample: %v", err)
			return
		}
		t.Attr("counterexample", dir)
		t.Logf("counterexample: %s %s; minimal plan and history in %s\nreplay: go run github.com/lockprover/lockprover/cmd/lockprover replay %s", last.Property, last.verb(), dir, filepath.Join(dir, "plan.json"))
	})
	rapid.Check(t, c.property(func(cx *Counterexample) {
		if cx.Property != "" {
			last = cx
		}
	}))
}

// property is the rapid property: draw a plan, run it, judge it, hand the
// outcome to seen, and fail with a message that names only the property,
// so that rapid shrinks towards the same failure (after shrinking, the last
// failing plan seen is the minimal one).
func (c Config) property(seen func(*Counterexample)) func(*rapid.T) {
	c = c.withDefaults()
	return func(t *rapid.T) {
		if c.stop != nil && c.stop() {
			return
		}
		p := Draw(t, c)
		cx, err := c.run(p)
		if err != nil {
			if c.runError != nil {
				c.runError(err)
			}
			var b strings.Builder
			p.Write(&b)
			t.Logf("plan:\n%s", b.String())
			t.Fatalf("run: %v", err)
		}
		seen(cx)
		if cx.Property != "" && !(cx.Inconclusive && c.tolerateInconclusive) {
			t.Logf("%s", cx.Summary())
			t.Fatalf("%s %s", cx.Property, cx.verb())
		}
	}
}

// Summary says what broke, in a few lines: the property, the plan in
// brief, and every failed verdict's explanation.
func (cx *Counterexample) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", cx.Property, cx.verb())
	p := cx.Plan
	fmt.Fprintf(&b, "plan: %s %q, %d slots, %d clients, %d admins, %d faults, %d scheduling decisions; %s\n",
		p.Kind, p.Lock, p.Slots, len(p.Clients), len(p.Admins), len(p.Nemesis), len(p.Schedule), cx.Impl)
	for _, v := range cx.Report.Verdicts {
		if v.Status == model.Fail || v.Status == model.Inconclusive {
			fmt.Fprintf(&b, "%s %s: %s\n", v.Property, v.Status, v.Detail)
		}
	}
	return b.String()
}

// verb is what happened to the property: violated, or inconclusive (its
// check ran out of time: no violation shown, but no proof either).
func (cx *Counterexample) verb() string {
	if cx.Inconclusive {
		return "inconclusive (its linearizability check ran out of time)"
	}
	return "violated"
}

// describeImpl says what a run proves: the reference, a mutant of it, or an
// implementation that describes itself (fmt.Stringer).
func describeImpl(impl Impl, p *Plan) string {
	if s, ok := impl.(fmt.Stringer); ok {
		return s.String()
	}
	if p.Mutant != "" {
		return "mutant " + p.Mutant
	}
	return "the reference"
}

// Write writes the counterexample into dir (created if needed).
func (cx *Counterexample) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writeArtifacts(dir, cx)
}
