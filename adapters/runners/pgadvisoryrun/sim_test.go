package pgadvisoryrun

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"pgregory.net/rapid"
)

// The reference holds on the simulator under the default faults (kill,
// pause, partition), every property it can be judged by judged on some
// plan.
func TestReferenceHoldsOnTheSimulator(t *testing.T) {
	out, err := prover.Search{Config: prover.Config{Subject: Config{}}, Seed: 1, Plans: 1000, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	for _, p := range []string{"lease-exclusive", "no-revival", "acquire-exact", "recovers", "available"} {
		if out.Verdicts[p][verdict.Pass] == 0 {
			t.Errorf("%s never passed on a plan: %v", p, out.Verdicts[p])
		}
	}
}

// Every mutant is caught on the simulator, by its property.
func TestMutantsAreCaughtOnTheSimulator(t *testing.T) {
	for _, m := range Mutants {
		t.Run(m.Name, func(t *testing.T) {
			out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: m.Name}}, Properties: []string{m.Property}},
				Seed: 1, Plans: 5000, Shrink: time.Second}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found == nil || out.Found.Property != m.Property {
				t.Fatalf("not caught by %s in %d plans", m.Property, out.Plans)
			}
			t.Logf("caught after %d plans: %s", out.Plans, out.Found.Summary())
		})
	}
}

// The same plan gives the same history and the same trace, byte for
// byte: a drawn batch (every fault, force-close and restart-broker among
// them, and the mutants), run twice.
func TestSameSeedSameHistory(t *testing.T) {
	c := Config{Scope: prover.Scope{Faults: FaultNames(), MaxFaults: 4}}
	gen := rapid.Custom(func(rt *rapid.T) *Plan { return c.Draw(rt).(*Plan) })
	run := func(p *Plan) []byte {
		var b bytes.Buffer
		res, err := Simulate(p, &b)
		if err != nil {
			t.Fatal(err)
		}
		histories.Write(&b, res.History)
		return b.Bytes()
	}
	faults := map[string]int{}
	for i := range 300 {
		p := gen.Example(i)
		if i%4 != 0 {
			p.Mutant = Mutants[i%len(Mutants)].Name
		}
		for _, f := range p.Nemesis {
			faults[f.Fault]++
		}
		a, b := run(p), run(p)
		if !bytes.Equal(a, b) {
			t.Fatalf("plan %d: two runs differ:\n%s\n----\n%s", i, a, b)
		}
		if i == 0 && !strings.Contains(string(a), "connects: session 1000") {
			t.Fatalf("plan 0: no trace of a session:\n%s", a)
		}
	}
	for _, f := range FaultNames() {
		if faults[f] == 0 {
			t.Errorf("no plan of the batch held %s: %v", f, faults)
		}
	}
}
