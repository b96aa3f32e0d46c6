package prover_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// This file is a whole lock family, small enough to live in a test: its
// vocabulary, plans, drawing, a deterministic simulated backend, a mutant
// and a checker registered with model. It uses nothing of the core but its
// exported API, so a new family needs no change to the core.

// The toy family's vocabulary: a try-lock mutex of kind toyKind; take is
// an acquire that fails "held" when another process holds the lock, drop
// a release. toyExclusive is its one property.
const (
	toyKind      = "toy-mutex"
	take, drop   = "take", "drop"
	toyExclusive = "toy-exclusive"
)

func init() {
	reason := func(r string) histories.Shape {
		return histories.Shape{Fields: []string{"reason"}, Reasons: []string{r}}
	}
	histories.DeclareKind(toyKind, toyValues, histories.Operation{F: take, Fail: reason("held")},
		histories.Operation{F: drop, Fail: reason("not held")})
	model.Register(toyKind, checkToy)
}

// toyPlan is a plan of the toy family: each client's script, and the
// simulator's schedule (which client moves next, modulo the runnable ones).
type toyPlan struct {
	Clients  [][]string `json:"clients"`
	Schedule []int      `json:"schedule"`
	Model    string     `json:"model,omitempty"`
	Props    []string   `json:"properties,omitempty"`
}

func (p *toyPlan) Write(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(p)
}

func (p *toyPlan) Brief() string {
	return fmt.Sprintf("%d clients, %d scheduling decisions", len(p.Clients), len(p.Schedule))
}

func (p *toyPlan) Judged(m string, props []string) { p.Model, p.Props = m, props }

// toyFamily proves the toy lock, or (broken) its mutant whose take never
// looks at the holder.
type toyFamily struct{ broken bool }

func (f toyFamily) Draw(t *rapid.T) prover.Plan {
	op := rapid.SampledFrom([]string{take, drop})
	return &toyPlan{
		Clients:  rapid.SliceOfN(rapid.SliceOfN(op, 1, 4), 1, 3).Draw(t, "clients"),
		Schedule: rapid.SliceOfN(rapid.IntRange(0, 3), 0, 12).Draw(t, "schedule"),
	}
}

// Run is the toy's simulated backend: one step at a time, chosen by the
// plan's schedule, on a virtual clock; the same plan gives the same
// history.
func (f toyFamily) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	tp, ok := p.(*toyPlan)
	if !ok {
		return nil, fmt.Errorf("toy: a plan of another family (%T)", p)
	}
	var now int64
	rec := histories.NewRecorder(func() int64 { now += 1000; return now })
	pos := make([]int, len(tp.Clients))
	holder := ""
	for step := 0; ; step++ {
		var runnable []int
		for i, s := range tp.Clients {
			if pos[i] < len(s) {
				runnable = append(runnable, i)
			}
		}
		if len(runnable) == 0 {
			break
		}
		i := runnable[0]
		if step < len(tp.Schedule) {
			i = runnable[tp.Schedule[step]%len(runnable)]
		}
		name, f2 := fmt.Sprintf("c%d", i+1), tp.Clients[i][pos[i]]
		pos[i]++
		rec.Add(histories.Event{Process: name, Type: histories.Invoke, F: f2, Lock: "toy", Kind: toyKind})
		done := histories.Event{Process: name, Type: histories.Ok, F: f2, Lock: "toy", Kind: toyKind}
		switch {
		case f2 == take && (holder == "" || holder == name || f.broken):
			holder = name
		case f2 == take:
			done.Type, done.Value = histories.Fail, &toyValue{Reason: "held"}
		case holder == name:
			holder = ""
		default:
			done.Type, done.Value = histories.Fail, &toyValue{Reason: "not held"}
		}
		rec.Add(done)
	}
	return &prover.Result{History: rec.Events(), Evidence: model.Evidence{Lock: "toy"}}, nil
}

func (toyFamily) Deterministic() bool { return true }

func (f toyFamily) String() string {
	if f.broken {
		return "the toy's mutant"
	}
	return "the toy"
}

// judgedBy counts the toy's checks by status only (true) and in full.
var judgedBy = map[bool]*atomic.Int64{true: {}, false: {}}

// checkToy judges toy-exclusive: no take succeeds while another process
// holds the lock (a take's ok until its holder's ok drop).
func checkToy(events []histories.Event, o model.Options) []verdict.Verdict {
	judgedBy[o.StatusOnly].Add(1)
	v := verdict.Verdict{Lock: "toy", Property: toyExclusive, Status: verdict.Pass}
	holder := ""
	for _, e := range events {
		if e.Lock == "" || e.Type != histories.Ok {
			continue
		}
		v.Judged++
		switch {
		case e.F == take && holder != "" && holder != e.Process:
			v.Status, v.Ops = verdict.Fail, []int{e.Index}
			v.Detail = fmt.Sprintf("%s took the lock %s held", e.Process, holder)
			return []verdict.Verdict{v}
		case e.F == take:
			holder = e.Process
		case e.F == drop && holder == e.Process:
			holder = ""
		}
	}
	return []verdict.Verdict{v}
}

// The core proves a family it has never heard of: the correct toy holds on
// every plan, through Check and through a Search.
func TestFamilySeamHolds(t *testing.T) {
	prover.Check(t, prover.Config{Subject: toyFamily{}})
	judgedBy[true].Store(0)
	judgedBy[false].Store(0)
	out, err := prover.Search{Config: prover.Config{Subject: toyFamily{}}, Seed: 1, Plans: 300}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("the correct toy failed:\n%s", out.Found.Summary())
	}
	// A plan in which no take or drop succeeded gives the toy's checker
	// nothing to judge: not judged, never a pass.
	if v := out.Verdicts[toyExclusive]; out.Plans != 300 || v[verdict.Pass]+v[verdict.NotJudged] != 300 || v[verdict.Pass] == 0 {
		t.Fatalf("%d plans, verdicts %v: want 300 plans, each judged %s by the toy's checker", out.Plans, out.Verdicts, toyExclusive)
	}
	if out.BatchSize == 0 {
		t.Errorf("a deterministic family's search has no fixed batch size")
	}
	// Passing plans are judged by status only: nobody reads their excuses.
	if q, f := judgedBy[true].Load(), judgedBy[false].Load(); q != 300 || f != 0 {
		t.Errorf("300 passing plans judged %d times by status only and %d in full, want 300 and 0", q, f)
	}
}

// The core catches the toy's mutant by the family's property, shrinks the
// plan to the minimal one (two clients taking once each), and writes a
// counterexample that reads back and fails again.
func TestFamilySeamCatches(t *testing.T) {
	judgedBy[true].Store(0)
	judgedBy[false].Store(0)
	out, err := prover.Search{Config: prover.Config{Subject: toyFamily{broken: true}}, Seed: 1, Plans: 300, Shrink: 0}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil || out.Found.Property != toyExclusive {
		t.Fatalf("the toy's mutant was not caught by %s in %d plans", toyExclusive, out.Plans)
	}
	p := out.Found.Plan.(*toyPlan)
	var steps int
	for _, s := range p.Clients {
		steps += len(s)
	}
	if len(p.Clients) != 2 || steps != 2 {
		t.Errorf("not shrunk to two takes: %+v", p.Clients)
	}
	// A plan that fails is judged again in full, for its report: the
	// first found and each failing plan the shrink tries.
	if q, f := judgedBy[true].Load(), judgedBy[false].Load(); f == 0 || f > q {
		t.Errorf("judged %d times by status only and %d in full: want the failing plans judged again in full", q, f)
	}
	if out.Found.Impl != "the toy's mutant" {
		t.Errorf("Impl %q: the family says what is proven", out.Found.Impl)
	}
	dir := t.TempDir()
	if err := out.Found.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plan.json", "history.jsonl", "summary.txt", "index.html"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("counterexample: %v", err)
		}
	}
	// The toy's checker is no linearizability check: no timeline to show.
	if _, err := os.Stat(filepath.Join(dir, "history.html")); err == nil {
		t.Errorf("counterexample: an empty history.html was written")
	}
	// Nor did its runner trace a server; one that did has its trace kept.
	if _, err := os.Stat(filepath.Join(dir, "trace.txt")); err == nil {
		t.Errorf("counterexample: a trace.txt was written with no trace")
	}
	traced := *out.Found
	tres := *traced.Result
	tres.Evidence.Trace = []string{"0.1s c1: connection opened", "0.2s c1: connection ended"}
	traced.Result = &tres
	tdir := t.TempDir()
	if err := traced.Write(tdir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(tdir, "trace.txt")); err != nil || string(b) != "0.1s c1: connection opened\n0.2s c1: connection ended\n" {
		t.Errorf("trace.txt = %q, %v", b, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var again toyPlan
	if err := json.Unmarshal(data, &again); err != nil {
		t.Fatal(err)
	}
	res, err := toyFamily{broken: true}.Run(context.Background(), &again)
	if err != nil {
		t.Fatal(err)
	}
	rep := prover.Judge(res, model.Options{})
	if rep.Status() != verdict.Fail || !slices.ContainsFunc(rep.Verdicts, func(v verdict.Verdict) bool { return v.Property == toyExclusive && v.Status == verdict.Fail }) {
		t.Errorf("the written plan does not fail again: %+v", rep.Verdicts)
	}
	h, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatalf("the toy's history does not read back: %v", err)
	}
	if rep := model.Check(h, model.Options{}); rep.Status() != verdict.Fail {
		t.Errorf("the history read back passes: %+v", rep.Verdicts)
	}
}

// A family's declared kind is read with the same care as the built-in
// ones: an operation it did not declare, a value field it does not allow,
// a reason it does not give are errors that name the line.
func TestFamilySeamHistories(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"index":0,"time":1,"process":"c1","type":"invoke","f":"grab","lock":"toy","kind":"toy-mutex"}`, `h.jsonl:1: f: unknown operation "grab" for a toy-mutex lock (want one of take, drop)`},
		{`{"index":0,"time":1,"process":"c1","type":"invoke","f":"take","lock":"toy","kind":"toy-mutex","value":{"slot":1}}`, `h.jsonl:1: unknown field "slot" in a toy-mutex lock's value (want reason)`},
		{`{"index":0,"time":1,"process":"c1","type":"invoke","f":"take","lock":"toy","kind":"toy-mutex"}
{"index":1,"time":2,"process":"c1","type":"fail","f":"take","lock":"toy","kind":"toy-mutex","value":{"reason":"full"}}`, `h.jsonl:2: value.reason`},
		{`{"index":0,"time":1,"process":"c1","type":"invoke","f":"take","lock":"toy","kind":"toy-mutant"}`, `h.jsonl:1: kind: want`},
	} {
		_, err := histories.Read(strings.NewReader(c.line+"\n"), "h.jsonl")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s\nerror %v, want it to start %q", c.line, err, c.want)
		}
	}
}

// panicky is the toy family whose runner panics on a plan with three
// clients.
type panicky struct{ toyFamily }

func (f panicky) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	if len(p.(*toyPlan).Clients) == 3 {
		panic("the runner broke")
	}
	return f.toyFamily.Run(ctx, p)
}

// A family's panic stops a search with an error that says so, instead of
// being shrunk in silence and its shrinking counted as plans.
func TestFamilyPanicIsAnError(t *testing.T) {
	out, err := prover.Search{Config: prover.Config{Subject: panicky{}}, Seed: 1, Plans: 300}.Run()
	if err == nil || !strings.Contains(err.Error(), "panic while running a plan: the runner broke") {
		t.Fatalf("err %v, want the panic", err)
	}
	if out != nil && out.Plans > 300 {
		t.Errorf("%d plans counted of 300", out.Plans)
	}
}

// toyValue is the toy's own value type: why a take or a drop failed. The
// family declares it (histories.DeclareKind); the format knows nothing of
// it.
type toyValue struct{ Reason string }

func (v *toyValue) WriteFields(w *histories.FieldWriter) { w.String("reason", v.Reason) }
func (v *toyValue) Text() string                         { return "" }

var toyValues = &histories.ValueType{
	Fields: []histories.Field{{Name: "reason", Type: histories.StringField}},
	Make:   func(r *histories.FieldReader) histories.Value { return &toyValue{Reason: r.String("reason")} },
}
