package redlockrun

import (
	"github.com/lockprover/lockprover/internal/prover"
	"pgregory.net/rapid"

	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
)

// A plan written reads back the same; a plan with a mistake is refused
// with an error naming the file and the field.
func TestPlanFiles(t *testing.T) {
	good := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Servers: 3, Persistence: PersistAlways, TTLMs: 300,
		Clients: [][]Step{{{Op: histories.Acquire}, {Op: Sleep, Ms: 10}, {Op: histories.Release}}},
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{{At: 5, Fault: histories.Partition, Target: "c1", Server: 2, For: 100}, {Fault: histories.ClockJump, Server: 3, OffsetMs: -50}}}}
	dir := t.TempDir()
	write := func(name string, p *Plan) string {
		var b bytes.Buffer
		if err := p.Write(&b); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		os.WriteFile(path, b.Bytes(), 0o644)
		return path
	}
	back, err := ReadPlan(write("good.json", good))
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	good.Write(&a)
	back.Write(&b)
	if a.String() != b.String() {
		t.Errorf("read back differs:\n%s\nwant\n%s", b.String(), a.String())
	}
	for _, c := range []struct {
		field string
		bad   func(p *Plan)
	}{
		{"servers", func(p *Plan) { p.Servers = 0 }},
		{"persistence", func(p *Plan) { p.Persistence = "sometimes" }},
		{"ttl_ms", func(p *Plan) { p.TTLMs = 5 }},
		{"mutant", func(p *Plan) { p.Mutant = "no-such" }},
		{"clients[0][1].ms", func(p *Plan) { p.Clients[0][1].Ms = 0 }},
		{"clients[0][0].op", func(p *Plan) { p.Clients[0][0].Op = "verify" }},
		{"nemesis[0].server", func(p *Plan) { p.Nemesis[0].Server = 4 }},
		{"nemesis[0].target", func(p *Plan) { p.Nemesis[0].Target = "c2" }},
		{"nemesis[1].target", func(p *Plan) { p.Nemesis[1].Target = "c1" }},
		{"nemesis[1].offset_ms", func(p *Plan) { p.Nemesis[1].OffsetMs = 0 }},
		{"nemesis[1].for_ms", func(p *Plan) { p.Nemesis[1].For = 10 }},
		{"nemesis[0].fault", func(p *Plan) { p.Nemesis[0].Fault = "force-close" }},
		{"nemesis[0]", func(p *Plan) { p.Nemesis[0].At = -1 }},
		{"limit", func(p *Plan) { p.Limit = 10 }},
		{"limit", func(p *Plan) { p.Limit = -1 }},
		{"limit", func(p *Plan) { p.Limit, p.Mutant = 2, "always-ok" }},
	} {
		p := *good
		p.Clients = [][]Step{append([]Step(nil), good.Clients[0]...)}
		p.Nemesis = append([]Fault(nil), good.Nemesis...)
		c.bad(&p)
		path := write("bad.json", &p)
		_, err := ReadPlan(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ": "+c.field+": ") {
			t.Errorf("%s: %v, want an error naming %s and the field", c.field, err, path)
		}
	}
}

// A fault is recorded only where it struck: a lost reply armed for a
// client that sends that server nothing more is not in the history; one
// that struck is, before the operation it cut short completes. Faults
// aimed at a server name it (redis1, ...), which no client is called.
func TestFaultsRecordedWhereTheyStruck(t *testing.T) {
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Servers: 1, Persistence: PersistAlways, TTLMs: 300,
		Clients: [][]Step{{{Op: histories.Acquire}, {Op: Sleep, Ms: 100}, {Op: histories.Release}}, {{Op: Sleep, Ms: 10}}},
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{
			{At: 50, Fault: histories.DropReply, Target: "c1", Server: 1}, // c1 releases at 100 ms: struck
			{At: 50, Fault: histories.DropReply, Target: "c2", Server: 1}, // c2 sends nothing: never struck
			{At: 60, Fault: histories.Pause, Server: 1, For: 10},
		}}}
	res, err := Simulate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var drops []string
	release := -1
	for _, e := range res.History {
		switch {
		case e.Process == "nemesis" && e.F == histories.DropReply && e.Type == histories.Invoke:
			drops = append(drops, histories.FaultOf(&e).Process)
			if release < 0 {
				t.Errorf("the drop (#%d) recorded before the release it cut short was invoked", e.Index)
			}
		case e.Process == "nemesis" && e.F == histories.Pause && histories.FaultOf(&e).Process != "redis1":
			t.Errorf("a pause of the server recorded as aimed at %q, want redis1", histories.FaultOf(&e).Process)
		case e.Process == "c1" && e.F == histories.Release && e.Type == histories.Invoke:
			release = e.Index
		case e.Process == "c1" && e.F == histories.Release && e.Type != histories.Info:
			t.Errorf("c1's release whose reply was lost completed %s, want unknown", e.Type)
		}
	}
	if len(drops) != 1 || drops[0] != "c1" {
		t.Errorf("drop-reply recorded for %v, want c1 only", drops)
	}
}

// A drawn plan's clients have at most Ops operations each, sleeps aside,
// and some have several cycles of acquire, work, release.
func TestDrawnPlansKeepToOps(t *testing.T) {
	for _, ops := range []int{1, 3, 8} {
		most := 0
		rapid.Check(t, func(rt *rapid.T) {
			p := Config{Scope: prover.Scope{Ops: ops}}.Draw(rt).(*Plan)
			for i, script := range p.Clients {
				n := 0
				for _, s := range script {
					if s.Op != Sleep {
						n++
					}
				}
				if n < 1 || n > ops {
					rt.Fatalf("--ops %d: client %d has %d operations: %v", ops, i+1, n, script)
				}
				if script[len(script)-1].Op == Sleep {
					rt.Fatalf("client %d ends with a sleep: %v", i+1, script)
				}
				most = max(most, n)
			}
		})
		if most != ops {
			t.Errorf("--ops %d: no client had %d operations (at most %d)", ops, ops, most)
		}
	}
}

// A limit above 1 makes an implementation's semaphore (init says it);
// the reference is a mutex, and a plan that asks it for a semaphore is
// refused rather than judged against a lock it is not.
func TestLimitNeedsAnImplementation(t *testing.T) {
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Servers: 1, Persistence: PersistNone, TTLMs: 300, Limit: 2,
		Clients: [][]Step{{{Op: histories.Acquire}}}}
	if err := p.Validate(); err != nil {
		t.Fatalf("a plan of limit 2: %v", err)
	}
	if !strings.Contains(p.Brief(), "limit 2") {
		t.Errorf("brief %q does not say the limit", p.Brief())
	}
	for _, target := range []Target{Simulator{}, Redis{}} {
		if _, err := target.Run(t.Context(), p); err == nil || !strings.Contains(err.Error(), "the reference is a mutex") {
			t.Errorf("%T: %v, want a refusal saying the reference is a mutex", target, err)
		}
	}
	p.Kind, p.Priorities = PriorityKind, []int64{1}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a priority plan of limit 2: %v, want an error naming the limit", err)
	}
}
