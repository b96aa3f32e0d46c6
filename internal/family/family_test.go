package family

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
)

func descriptor(name string, kinds ...string) *Descriptor {
	return &Descriptor{
		Name: name, Kinds: kinds, Targets: []Target{{Name: "sim"}},
		Setup:    func(Settings) (*Setup, error) { return &Setup{}, nil },
		ReadPlan: func(string) (prover.Plan, error) { return nil, nil },
		Replay:   func(prover.Plan, Settings) (*Setup, error) { return &Setup{}, nil },
	}
}

// panics says whether f panicked, and with what.
func panics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = r.(string)
		}
	}()
	f()
	return ""
}

// The registry finds a family by any of its kinds, lists kinds family by
// family, and refuses a family that would make a kind ambiguous.
func TestRegistry(t *testing.T) {
	a := descriptor("test-a", "ta-sem", "ta-mutex")
	a.Targets = append(a.Targets, Target{Name: "ta-server", Real: true})
	a.Flags = []Flag{{Name: "ta-url"}, {Name: "shared", Usage: "test-a: what a reads it for", Verbs: Prove}}
	b := descriptor("test-b", "tb")
	b.Flags = []Flag{{Name: "shared", Usage: "test-b: what b reads it for", Verbs: Prove | Validate}, {Name: "tb-flag", Bool: true}}
	Register(a)
	Register(b)
	if Of("ta-mutex") != a || Of("tb") != b || Of("nothing") != nil {
		t.Errorf("Of finds the wrong family")
	}
	if got := strings.Join(Kinds(), ","); !strings.Contains(got, "ta-sem,ta-mutex,tb") {
		t.Errorf("Kinds = %s", got)
	}
	if got := strings.Join(FamilyKinds(), ","); !strings.Contains(got, "ta-sem,tb") || strings.Contains(got, "ta-mutex") {
		t.Errorf("FamilyKinds = %s", got)
	}
	if got := TargetNames(); len(got) < 2 || got[0] != "sim" || !strings.Contains(strings.Join(got, ","), "ta-server") {
		t.Errorf("TargetNames = %v", got)
	}
	var names []string
	for _, f := range Flags() {
		names = append(names, f.Name)
		if f.Name == "shared" && f.Usage != "test-a: what a reads it for; test-b: what b reads it for" {
			t.Errorf("the usage of a flag two families read is %q: want each family's", f.Usage)
		}
		if f.Name == "shared" && f.Verbs != Prove|Validate {
			t.Errorf("a flag two families read goes with verbs %b: want every verb either gives it", f.Verbs)
		}
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "ta-url,shared,tb-flag") {
		t.Errorf("Flags = %s: want each flag once", got)
	}
	if fs := Flagged("shared"); len(fs) != 2 {
		t.Errorf("Flagged(shared) = %d families, want 2", len(fs))
	}
	for _, c := range []struct {
		d    *Descriptor
		want string
	}{
		{descriptor("test-a", "other"), "registered twice"},
		{descriptor("test-c", "tb"), "kind tb of test-c is test-b's"},
		{descriptor("", "x"), "needs a name"},
		{&Descriptor{Name: "test-d", Kinds: []string{"td"}, Targets: []Target{{Name: "sim"}}}, "needs Setup"},
	} {
		if got := panics(func() { Register(c.d) }); !strings.Contains(got, c.want) {
			t.Errorf("Register(%s): panic %q, want %q", c.d.Name, got, c.want)
		}
	}
}

// Start and a UsageError: what a command tells apart from a failed run.
func TestErrors(t *testing.T) {
	err := Usagef("--x: %d", 3)
	var ue *UsageError
	if !errors.As(err, &ue) || err.Error() != "--x: 3" {
		t.Errorf("Usagef: %v", err)
	}
	ie := &ImplError{Err: context.Canceled, Command: "x"}
	if ie.Error() != "the implementation failed its preflight: context canceled" {
		t.Errorf("ImplError: %v", ie)
	}
	if Quote("it's") != `'it'\''s'` {
		t.Errorf("Quote: %s", Quote("it's"))
	}
}
