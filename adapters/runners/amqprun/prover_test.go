package amqprun

import (
	"bytes"
	"context"
	"testing"

	"github.com/lockprover/lockprover/internal/prover"

	"github.com/lockprover/lockprover/histories"
)

// The reference with the spec's recommended options holds every property
// under every fault: under rapid (as a user's test would run it), and over a
// fixed-seed search per fault family.
func TestReference(t *testing.T) {
	prover.Check(t, prover.Config{Subject: Config{}})
}

func TestReferenceUnderEachFault(t *testing.T) {
	t.Parallel() // CPU of its own, beside the real-broker tests that mostly wait
	for _, f := range faultNames {
		t.Run(f, func(t *testing.T) {
			out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Faults: []string{f}}}}, Seed: 11, Plans: 1000}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found != nil {
				t.Fatalf("%s", out.Found.Summary())
			}
		})
	}
}

func TestMutexReference(t *testing.T) {
	out, err := prover.Search{Config: prover.Config{Subject: Config{Kind: "mutex"}}, Seed: 5, Plans: 2000}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
}

// Same seed, same plans, same histories, byte for byte.
func TestSameSeedSameHistory(t *testing.T) {
	run := func() (plans, hists [][]byte) {
		c := Config{Scope: prover.Scope{Mutant: "b-not-exclusive"}}
		out, err := prover.Search{Config: prover.Config{Subject: c}, Seed: 42, Plans: 200, Shrink: 1}.Run()
		if err != nil || out.Found == nil {
			t.Fatalf("search: %v, %v", out, err)
		}
		var p, h bytes.Buffer
		out.Found.Plan.Write(&p)
		histories.Write(&h, out.Found.Result.History)
		// Run the plan again from its JSON.
		pl := out.Found.Plan.(*Plan)
		res, err := Simulator{}.Run(context.Background(), pl, ImplFor(pl))
		if err != nil {
			t.Fatal(err)
		}
		var again bytes.Buffer
		histories.Write(&again, res.History)
		return [][]byte{p.Bytes()}, [][]byte{h.Bytes(), again.Bytes()}
	}
	p1, h1 := run()
	p2, h2 := run()
	if !bytes.Equal(p1[0], p2[0]) {
		t.Fatalf("same seed, different plans:\n%s\n%s", p1[0], p2[0])
	}
	if !bytes.Equal(h1[0], h2[0]) || !bytes.Equal(h1[0], h1[1]) {
		t.Fatal("same plan, different histories")
	}
	if len(h1[0]) < 100 {
		t.Fatalf("history too short to mean anything: %s", h1[0])
	}
}

func TestPlanValidation(t *testing.T) {
	ok := func() *Plan {
		return &Plan{Version: PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1, Clients: [][]Step{{{Op: "acquire"}}}, Admins: [][]Step{{}}}
	}
	for _, tc := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"version", func(p *Plan) { p.Version = 3 }, "version: want 2 (or 1, which is read as 2), got 3"},
		{"heartbeat", func(p *Plan) { p.Options.HeartbeatMs = Ms(-1) }, "options.heartbeat_ms: want 0 (propose none) or more, got -1"},
		{"kind", func(p *Plan) { p.Kind = "lock" }, `kind: want "semaphore" or "mutex"`},
		{"step", func(p *Plan) { p.Clients[0][0].Op = "grab" }, `clients[0][0].op: want acquire`},
		{"sleep", func(p *Plan) { p.Clients[0][0] = Step{Op: "sleep"} }, "clients[0][0].ms:"},
		{"admin step", func(p *Plan) { p.Admins[0] = []Step{{Op: "change"}} }, "admins[0][0].delta:"},
		{"fault", func(p *Plan) { p.Nemesis = []Fault{{Fault: "meteor", Target: "c1"}} }, "nemesis[0].fault"},
		{"target", func(p *Plan) { p.Nemesis = []Fault{{Fault: "kill", Target: "c9"}} }, `nemesis[0].target: no process named "c9"`},
		{"admin-crash target", func(p *Plan) { p.Nemesis = []Fault{{Fault: "admin-crash", Target: "c1"}} }, "an admin-crash strikes an admin"},
		{"mutant", func(p *Plan) { p.Mutant = "nope" }, `mutant: no mutant named "nope"`},
		{"option", func(p *Plan) { p.Options.ScanStart = "middle" }, "options.scan_start: want first"},
		{"mutex admins", func(p *Plan) { p.Kind, p.Slots = "mutex", 0 }, "a true mutex has no slots and no admins"},
		{"model", func(p *Plan) { p.Model = "lenient" }, `model: want "standard" or "strict"`},
		{"properties", func(p *Plan) { p.Properties = []string{"slot-exclusive", "fast"} }, `properties[1]: want one of`},
	} {
		p := ok()
		if err := p.Validate(); err != nil {
			t.Fatalf("base plan: %v", err)
		}
		tc.edit(p)
		if err := p.Validate(); err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
