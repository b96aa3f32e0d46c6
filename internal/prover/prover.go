// Package prover is lockprover's core, and knows no lock family: it draws
// a family's plans with rapid, runs them, judges each history with
// model.Check, and shrinks a failing plan to a minimal one, written out with
// its history and report so that it can be replayed. A family (adapters/runners/amqprun
// for amqp-locks) says what a plan is and how it runs.
//
// A user's test proves an implementation with Check:
//
//	func TestMyLocks(t *testing.T) {
//		prover.Check(t, prover.Config{Family: amqprun.Config{}})
//	}
//
// -rapid.checks, -rapid.seed, fail files and shrinking work as rapid users
// expect.
package prover

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// A Subject is a lock design the core proves, with what it is proven on: it
// draws plans and runs them (on its simulator, a real backend, or an
// implementation over the process protocol), and its verdicts come from
// the checker its kind is registered with (model.Register). The core knows
// no family: a family is a value the caller hands it (adapters/runners/amqprun's
// Config, for amqp-locks).
type Subject interface {
	// Draw draws a plan with rapid, so that rapid can shrink a failing
	// plan to a minimal one.
	Draw(t *rapid.T) Plan
	// Run runs a plan Draw drew (or one read back for a replay) and
	// records what happened. An error means the plan could not run.
	Run(ctx context.Context, p Plan) (*Result, error)
	// Deterministic says whether the same plan always gives the same
	// history (a simulator): a search then draws batches of a fixed size,
	// so that a seed's plans are the same whatever the machine.
	Deterministic() bool
	// String says what is proven, in words: "the reference", "mutant
	// silent-reconnect", an implementation's command.
	String() string
}

// A Plan is one run of a family, as data. Its JSON (encoding/json) is what
// a search's batch digests hash; Write is what plan.json holds.
type Plan interface {
	// Write writes the plan as its family reads it back.
	Write(w io.Writer) error
	// Brief says the plan in one line, for summaries.
	Brief() string
	// Judged records how the plan was judged ("strict" or "" for the
	// model, and the properties that counted, nil for all), so that a
	// replay judges it the same way.
	Judged(model string, properties []string)
}

// Result is what a run gives: the history, and what the history cannot
// show (the evidence model.Check judges no-leak, efficiency and the
// processes' failures by).
type Result struct {
	History  []histories.Event
	Evidence model.Evidence
}

// Judge judges a run: model.Check assembles every verdict, from its
// history and its evidence.
func Judge(res *Result, o model.Options) *verdict.Report {
	o.Evidence = &res.Evidence
	return model.Check(res.History, o)
}

// Preflighter is a family (or a target) that can check, before the first
// plan, that it can run plans at all (a reachable broker, say).
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// Config says what to prove and how to judge it.
type Config struct {
	Subject Subject // what to prove; required

	// Properties are those whose violation fails a plan; nil means all.
	Properties []string
	// Model is the family's judging model plans are judged by, as a plan
	// records it: "" for the standard one every family has, or one the
	// family offers (amqp-locks: "strict"; family.Descriptor.Models).
	Model   string
	Timeout time.Duration // per linearizability check; 0 means 10 s
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
	// goal, set by Search, says which goal the next plan rapid's loop
	// draws is steered toward (nil: none).
	goal func() *Interleaving
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// A Counterexample is a plan that broke a property: the plan, what it gave,
// and the property.
type Counterexample struct {
	Plan     Plan
	Result   *Result
	Report   *verdict.Report
	Property string
	// Inconclusive says Property could not be decided (its check ran out of
	// time) and nothing failed: no violation, but no proof either.
	Inconclusive bool
	Impl         string // what was proven, in words
	// Replay is the command that replays it, as the caller prints it (with
	// its target and implementation); empty means "lockprover replay
	// DIR/plan.json".
	Replay string

	judged  model.Options // how Report was judged (timeout, model)
	counted []string      // the properties whose violation counts; nil for all
	// aimed is the goal the plan was drawn toward (nil: none), reached
	// the interleavings its history shows.
	aimed   *Interleaving
	reached []Interleaving
}

// run runs and judges one plan.
func (c Config) run(p Plan) (*Counterexample, error) {
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := c.Subject.Run(ctx, p)
	if err != nil {
		return nil, err
	}
	// The plan records how it was judged, so that replaying it judges it
	// the same way.
	p.Judged(c.Model, c.Properties)
	// Most plans pass, and nobody reads their excuses: they are judged by
	// status only, and a plan that violates a property again in full, for
	// its report.
	quick := c.judgeOptions()
	quick.StatusOnly = true
	rep := Judge(res, quick)
	cx := &Counterexample{Plan: p, Result: res, Report: rep, Impl: c.Subject.String(), judged: c.judgeOptions(), counted: c.Properties,
		reached: Interleavings(res.History)}
	if cx.Property, _ = firstViolation(rep, c.Properties); cx.Property != "" {
		cx.Report = Judge(res, cx.judged)
	}
	cx.Property, cx.Inconclusive = firstViolation(cx.Report, c.Properties)
	return cx, nil
}

// runRecovering is run, with a panic of the family's code (its runner, its
// simulator) turned into the error of a plan that could not run, so that a
// search stops and says so instead of rapid shrinking it as if it were a
// violation.
func (c Config) runRecovering(p Plan) (cx *Counterexample, err error) {
	defer func() {
		if r := recover(); r != nil {
			cx, err = nil, fmt.Errorf("panic while running a plan: %v\n%s", r, debug.Stack())
		}
	}()
	return c.run(p)
}

func (c Config) judgeOptions() model.Options {
	o := model.Options{Timeout: c.Timeout}
	if j, ok := c.Subject.(Judging); ok {
		o.Family = append(o.Family, j.Judging(c.Model))
	}
	return o
}

// Judging is a family whose checker takes options of its own: Judging
// gives them (a value of the type its checker declares, for
// model.Options.Family) for the model a plan is judged by (Config.Model,
// a plan's "model": "" for the standard one, or one the family offers,
// as amqp-locks' "strict" acquire-exact). The database semaphore says
// that only the database's clock times its leases.
type Judging interface {
	Judging(model string) any
}

// firstViolation is the first property (in the report's fixed order) that
// failed among those that count; if none failed, the first that could not
// be decided (inconclusive true); else "".
func firstViolation(r *verdict.Report, props []string) (property string, inconclusive bool) {
	for _, status := range []verdict.Status{verdict.Fail, verdict.Inconclusive} {
		for _, v := range r.Verdicts {
			if v.Status == status && (props == nil || slices.Contains(props, v.Property)) {
				return v.Property, status == verdict.Inconclusive
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
	ready(t, c)
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
		replay := "go run github.com/lockprover/lockprover/cmd/lockprover replay " + filepath.Join(dir, "plan.json")
		if it, ok := c.Subject.(InTest); ok && it.InTest() {
			replay = fmt.Sprintf("go test -run '^%s$' with the fail file rapid names above (what is proven runs in this test's process: the lockprover command cannot run it)", t.Name())
		}
		t.Logf("counterexample: %s %s; minimal plan and history in %s\nreplay: %s", last.Property, last.verb(), dir, replay)
	})
	rapid.Check(t, c.property(func(cx *Counterexample) {
		if cx.Property != "" {
			last = cx
		}
	}))
}

// ready fails t unless c names a Subject that can run plans (its
// preflight, if it has one, passes): what Check and CheckExhaust ask
// before their first plan.
func ready(t *testing.T, c Config) {
	t.Helper()
	if c.Subject == nil {
		t.Fatalf("lockprover: Config.Subject is nil: say what to prove (amqprun.Config, for amqp-locks)")
	}
	if pf, ok := c.Subject.(Preflighter); ok {
		if err := pf.Preflight(t.Context()); err != nil {
			t.Fatalf("%v", err)
		}
	}
}

// An InTest subject runs in the test's process (a lock written in Go):
// its counterexamples replay in its test, not by the lockprover command.
type InTest interface{ InTest() bool }

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
		var goal *Interleaving
		if c.goal != nil {
			goal = c.goal()
		}
		p := c.draw(t, goal)
		cx, err := c.runRecovering(p)
		if err != nil {
			if c.runError != nil {
				c.runError(err)
			}
			var b strings.Builder
			p.Write(&b)
			t.Logf("plan:\n%s", b.String())
			t.Fatalf("run: %v", err)
		}
		cx.aimed = goal
		seen(cx)
		if cx.Property != "" && !(cx.Inconclusive && c.tolerateInconclusive) {
			t.Logf("%s", cx.Summary())
			t.Fatalf("%s %s", cx.Property, cx.verb())
		}
	}
}

// Summary says what broke, in a few lines: the property, the plan in
// brief, and every failed verdict's explanation, those of properties
// that do not count (outside Config.Properties) marked so.
func (cx *Counterexample) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", cx.Property, cx.verb())
	fmt.Fprintf(&b, "plan: %s; %s\n", cx.Plan.Brief(), cx.Impl)
	for _, v := range cx.Report.Verdicts {
		if v.Status == verdict.Fail || v.Status == verdict.Inconclusive {
			uncounted := ""
			if len(cx.counted) > 0 && !slices.Contains(cx.counted, v.Property) {
				uncounted = " (not counted: not among the properties asked for)"
			}
			fmt.Fprintf(&b, "%s %s%s: %s\n", v.Property, v.Status, uncounted, v.Detail)
		}
	}
	return b.String()
}

// violated says whether a property that counts was violated (not only
// inconclusive).
func (cx *Counterexample) violated() bool { return cx.Property != "" && !cx.Inconclusive }

// verb is what happened to the property: violated, or inconclusive (its
// check ran out of time: no violation shown, but no proof either).
func (cx *Counterexample) verb() string {
	if cx.Inconclusive {
		return "inconclusive (its linearizability check ran out of time)"
	}
	return "violated"
}

// Write writes the counterexample into dir (created if needed).
func (cx *Counterexample) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writeArtifacts(dir, cx)
}
