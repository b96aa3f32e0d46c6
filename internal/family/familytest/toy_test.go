package familytest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// The toy's vocabulary: a try-lock of kind toyKind; take is an acquire
// that fails "held" while another process holds the lock, drop a release;
// toyExclusive is its one property.
const (
	toyKind      = "toy-lock"
	take, drop   = "take", "drop"
	toyExclusive = "toy-exclusive"
)

// toy is the family's descriptor: everything the command line does with
// it comes from here.
var toy = &family.Descriptor{
	Name:       "toy",
	Kinds:      []string{toyKind},
	Properties: []string{toyExclusive},
	Mutants:    []family.Mutant{{Name: "takes-held", Property: toyExclusive, Defect: "take never looks at the holder", Prove: toyProof{broken: true}}},
	Faults:     []string{},
	Targets:    []family.Target{{Name: "sim"}},
	Flags: []family.Flag{
		{Name: "toy-grace", Verbs: family.Check, Default: "0", Usage: "toy: the grace its checker is told of"},
		{Name: "toy-lens", Bool: true, Verbs: family.Check, Usage: "toy: judge Jepsen histories as the toy lock's"},
	},
	Judging:    func(flag func(string) string) any { return toyOptions{Grace: flag("toy-grace")} },
	CheckFlags: &family.CheckFlags{Check: toyCheckFlags, Lens: toyLens},
	Setup: func(s family.Settings) (*family.Setup, error) {
		if s.Faults != "all" && s.Faults != "none" {
			return nil, fmt.Errorf("--faults: the toy has none")
		}
		if s.Mutant != "" && s.Mutant != "takes-held" {
			return nil, fmt.Errorf("--mutant: no toy mutant named %q", s.Mutant)
		}
		if s.Impl != "" {
			return toyImplSetup(s.Impl), nil
		}
		return &family.Setup{Prove: toyProof{broken: s.Mutant != ""}, Target: "sim", Where: "the toy's simulator"}, nil
	},
	ReadPlan: func(path string) (prover.Plan, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var p toyPlan
		if err := prover.ParsePlan(path, data, &p, func() error { return nil }); err != nil {
			return nil, err
		}
		return &p, nil
	},
	Replay: func(p prover.Plan, s family.Settings) (*family.Setup, error) {
		if s.Impl != "" {
			return toyImplSetup(s.Impl), nil
		}
		broken := p.(*toyPlan).Broken
		if s.Mutant != "" {
			broken = s.Mutant != "reference"
		}
		pr := toyProof{broken: broken}
		return &family.Setup{Prove: pr, Target: "sim", Where: "the toy's simulator", What: pr.String()}, nil
	},
	Serve:    toyServe,
	Validate: toyValidate,
	Explore: func(ctx context.Context, c explore.Config) (bool, error) {
		m := explore.Matrix{Title: "variant", Rows: []string{"the toy", "takes-held"}, Cols: []string{"no faults"},
			Prove: func(r, _ int) prover.Subject { return toyProof{broken: r == 1} }}
		return m.Run(ctx, c)
	},
}

func init() {
	reason := func(r string) histories.Shape {
		return histories.Shape{Fields: []string{"reason"}, Reasons: []string{r}}
	}
	histories.DeclareKind(toyKind, toyValues, histories.Operation{F: take, Fail: reason("held")},
		histories.Operation{F: drop, Fail: reason("not held")})
	model.Register(toyKind, checkToy)
	family.Register(toy)
}

// toyPlan is a plan of the toy: each client's script, and the simulator's
// schedule (which client moves next, modulo the runnable ones).
type toyPlan struct {
	Kind     string     `json:"kind"`
	Broken   bool       `json:"broken,omitempty"`
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
	return fmt.Sprintf("%s, %d clients, %d scheduling decisions", toyKind, len(p.Clients), len(p.Schedule))
}

func (p *toyPlan) Judged(m string, props []string) { p.Model, p.Props = m, props }

// toyProof proves the toy, or its mutant whose take never looks at the
// holder, on the toy's simulator.
type toyProof struct{ broken bool }

func (f toyProof) Draw(t *rapid.T) prover.Plan {
	op := rapid.SampledFrom([]string{take, drop})
	return &toyPlan{Kind: toyKind, Broken: f.broken,
		Clients:  rapid.SliceOfN(rapid.SliceOfN(op, 1, 4), 1, 3).Draw(t, "clients"),
		Schedule: rapid.SliceOfN(rapid.IntRange(0, 3), 0, 12).Draw(t, "schedule"),
	}
}

// Run is the toy's simulated backend: one step at a time, chosen by the
// plan's schedule, on a virtual clock; the same plan gives the same
// history.
func (f toyProof) Run(_ context.Context, p prover.Plan) (*prover.Result, error) {
	tp := p.(*toyPlan)
	var now int64
	rec := histories.NewRecorder(func() int64 { now += 1000; return now })
	holder := ""
	for i, op := range tp.steps() {
		name := fmt.Sprintf("c%d", i+1)
		rec.Add(histories.Event{Process: name, Type: histories.Invoke, F: op, Lock: "toy", Kind: toyKind})
		done := histories.Event{Process: name, Type: histories.Ok, F: op, Lock: "toy", Kind: toyKind}
		switch {
		case op == take && (holder == "" || holder == name || f.broken):
			holder = name
		case op == take:
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

func (toyProof) Deterministic() bool { return true }

// steps yields the plan's operations in the order its schedule runs them,
// with the index of the client of each: one step at a time, chosen by the
// schedule (modulo the clients with steps left), the first such client
// once the schedule is over.
func (p *toyPlan) steps() iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		pos := make([]int, len(p.Clients))
		for step := 0; ; step++ {
			var runnable []int
			for i, s := range p.Clients {
				if pos[i] < len(s) {
					runnable = append(runnable, i)
				}
			}
			if len(runnable) == 0 {
				return
			}
			i := runnable[0]
			if step < len(p.Schedule) {
				i = runnable[p.Schedule[step]%len(runnable)]
			}
			pos[i]++
			if !yield(i, p.Clients[i][pos[i]-1]) {
				return
			}
		}
	}
}

func (f toyProof) String() string {
	if f.broken {
		return "mutant takes-held"
	}
	return "the toy"
}

// toyOptions are the toy checker's options, from check's --toy-grace
// (Judging): it says its grace in a pass's detail.
type toyOptions struct{ Grace string }

// toyCheckFlags refuses a --toy-grace that is not a whole number.
func toyCheckFlags(flag func(string) string) []string {
	if _, err := strconv.Atoi(flag("toy-grace")); err != nil {
		return []string{fmt.Sprintf("--toy-grace must be a whole number, not %q", flag("toy-grace"))}
	}
	return nil
}

// toyLens, with --toy-lens, judges a Jepsen history (a mutex's) as the
// toy lock's: acquire is take, release drop.
func toyLens(flag func(string) string) *family.Lens {
	if flag("toy-lens") != "true" {
		return nil
	}
	return &family.Lens{Name: "the toy lens", View: func(path string, h []histories.Event, imp *histories.Imported) ([]histories.Event, error) {
		if imp == nil {
			return nil, fmt.Errorf("%s: --toy-lens judges Jepsen histories", path)
		}
		imp.Notes = append(imp.Notes, "seen as the toy lock")
		out := make([]histories.Event, len(h))
		for i, e := range h {
			if e.Kind == histories.Mutex {
				e.Kind, e.F, e.Value = toyKind, map[string]string{histories.Acquire: take, histories.Release: drop}[e.F], nil
			}
			out[i] = e
		}
		return out, nil
	}}
}

// checkToy judges toy-exclusive: no take succeeds while another process
// holds the lock.
func checkToy(events []histories.Event, o model.Options) []verdict.Verdict {
	v := verdict.Verdict{Lock: "toy", Property: toyExclusive, Status: verdict.Pass}
	if g := model.FamilyOptions[toyOptions](o).Grace; g != "" && g != "0" {
		v.Detail = "judged with grace " + g
	}
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
