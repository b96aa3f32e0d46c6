package leaserun

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// step and plan are a family's, as small as a test needs.
type step struct {
	Op string `json:"op"`
	Ms int    `json:"ms,omitempty"`
}

type plan struct {
	Kind    string   `json:"kind"`
	Clients [][]step `json:"clients"`
}

var rules = Steps{Ops: []string{histories.Acquire, histories.Release}, MaxMs: 100}

func (p *plan) Validate() error {
	if p.Kind != "toy" {
		return Bad("kind", "want %q, got %q", "toy", p.Kind)
	}
	return Scripts(p.Clients, func(s step) error { return rules.Check(s.Op, s.Ms) })
}

// TestCheckNamesTheField: a wrong step is named by its place in the
// scripts, and says what it wants in the family's words.
func TestCheckNamesTheField(t *testing.T) {
	for _, c := range []struct {
		steps Steps
		p     plan
		want  string
	}{
		{rules, plan{Kind: "toy", Clients: [][]step{{{Op: "acquire"}}, {{Op: "sleep", Ms: 5}, {Op: "fly"}}}},
			`plan: clients[1][1].op: want acquire, release or sleep, got "fly"`},
		{rules, plan{Kind: "toy", Clients: [][]step{{{Op: "sleep", Ms: 101}}}}, "plan: clients[0][0].ms: want 1 to 100, got 101"},
		{rules, plan{Kind: "toy", Clients: [][]step{{{Op: "release", Ms: 3}}}}, "plan: clients[0][0].ms: only a sleep has ms, not release"},
		{Steps{Ops: rules.Ops, OpMs: true}, plan{Kind: "toy", Clients: [][]step{{{Op: "release", Ms: 3}, {Op: "sleep"}}}},
			"plan: clients[0][1].ms: want at least 1, got 0"},
	} {
		err := Scripts(c.p.Clients, func(s step) error { return c.steps.Check(s.Op, s.Ms) })
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
	err := Each("nemesis", 3, func(i int) error {
		if i == 2 {
			return Bad("", "whole")
		}
		return nil
	})
	if pe, ok := err.(*prover.PlanError); !ok || pe.Field != "nemesis[2]" {
		t.Errorf("got %v, want nemesis[2]", err)
	}
}

// TestWriteRead: a plan reads back as written, and a bad one is named by
// file, line and field.
func TestWriteRead(t *testing.T) {
	p := &plan{Kind: "toy", Clients: [][]step{{{Op: "acquire"}, {Op: "sleep", Ms: 7}}}}
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	file, err := os.CreateTemp(t.TempDir(), "plan*.json")
	if err != nil {
		t.Fatal(err)
	}
	file.Close()
	path := file.Name()
	os.WriteFile(path, b.Bytes(), 0o644)
	got, err := Read[plan](path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	Write(&again, got)
	if again.String() != b.String() {
		t.Errorf("read back as\n%s\nwant\n%s", again.String(), b.String())
	}
	os.WriteFile(path, bytes.Replace(b.Bytes(), []byte(`"ms": 7`), []byte(`"ms": 700`), 1), 0o644)
	if _, err := Read[plan](path); err == nil || !strings.Contains(err.Error(), path+":10:15:") || !strings.Contains(err.Error(), "clients[0][1].ms: want 1 to 100, got 700") {
		t.Errorf("got %v, want the file, line 10 and the field", err)
	}
}
