package cli

import (
	"strings"
	"testing"
)

// replay --times counts a run's history as the first's byte for byte,
// with the tokens renamed in order of appearance, or with the claimed
// validity set aside too, and says how many runs needed which; a history
// that differs otherwise (a time, an outcome, tokens that pair
// differently) is not counted.
func TestSameness(t *testing.T) {
	const first = `[{"time":1,"value":{"token":"aa","validity_ms":990}},{"time":2,"value":{"token":"aa"}},{"time":3,"value":{"token":"bb"}}]`
	var s sameness
	forms := func(h string) [3][]byte {
		return [3][]byte{[]byte(h), normalized([]byte(h), false), normalized([]byte(h), true)}
	}
	f := forms(first)
	for _, c := range []struct {
		h     string
		count bool
	}{
		{first, true},
		{`[{"time":1,"value":{"token":"xx","validity_ms":990}},{"time":2,"value":{"token":"xx"}},{"time":3,"value":{"token":"yy"}}]`, true},
		{`[{"time":1,"value":{"token":"xx","validity_ms":988}},{"time":2,"value":{"token":"xx"}},{"time":3,"value":{"token":"yy"}}]`, true},
		{`[{"time":1,"value":{"token":"xx","validity_ms":990}},{"time":2,"value":{"token":"yy"}},{"time":3,"value":{"token":"yy"}}]`, false},
		{`[{"time":1,"value":{"token":"aa","validity_ms":990}},{"time":5,"value":{"token":"aa"}},{"time":3,"value":{"token":"bb"}}]`, false},
	} {
		before := s.all()
		s.add(forms(c.h), f)
		if counted := s.all() > before; counted != c.count {
			t.Errorf("%s: counted %v, want %v", c.h, counted, c.count)
		}
	}
	if s.exact != 1 || s.renamed != 1 || s.claims != 1 {
		t.Errorf("exact %d, renamed %d, claims %d: want 1 each", s.exact, s.renamed, s.claims)
	}
	if says := s.says(); !strings.Contains(says, "1 of them with the tokens the implementation drew renamed") || !strings.Contains(says, "1 of them with its tokens renamed and the validity it claimed set aside") {
		t.Errorf("says %q", says)
	}
	if (sameness{exact: 3}).says() != "" {
		t.Error("a count of exact runs alone says more")
	}
}
