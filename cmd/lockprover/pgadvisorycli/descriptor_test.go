package pgadvisorycli

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/internal/family"
)

// settings are a command line's settings with the family flags in flags.
func settings(target string, flags map[string]string) family.Settings {
	return family.Settings{Kind: pgadvisoryrun.Kind, Target: target, Faults: "all",
		Flag:   func(name string) string { return flags[name] },
		Given:  func(name string) bool { _, ok := flags[name]; return ok },
		Stdout: io.Discard, Stderr: io.Discard}
}

// --server-version names the private server's version: the setup says it
// (Server, Where) and a replay's flags keep it; without the flag the setup
// is today's, naming the machine's own; an unknown version, or one for
// the simulator, is a usage error that says what the flag takes.
func TestServerVersion(t *testing.T) {
	st, err := setup(settings("postgres", map[string]string{"server-version": "18"}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Server != "postgresql 18" || !strings.Contains(st.Where, "PostgreSQL 18") || !strings.Contains(st.Where, "sid") {
		t.Errorf("Server %q, Where %q", st.Server, st.Where)
	}
	if i := slices.Index(st.Replay, "--server-version"); i < 0 || i+1 >= len(st.Replay) || st.Replay[i+1] != "18" {
		t.Errorf("replay flags %v lack --server-version 18", st.Replay)
	}
	st, err = setup(settings("postgres", nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.Server != "postgresql 15" || st.Where != "a private PostgreSQL of the run's own" || slices.Contains(st.Replay, "--server-version") {
		t.Errorf("without the flag: Server %q, Where %q, replay %v", st.Server, st.Where, st.Replay)
	}
	for _, c := range []struct {
		target, version, says string
	}{
		{"postgres", "16", "15, 17, 18"},
		{"", "18", "--target postgres"},
		{"sim", "17", "--target postgres"},
	} {
		_, err := setup(settings(c.target, map[string]string{"server-version": c.version}))
		var ue *family.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "--server-version") {
			t.Errorf("--target %q --server-version %s: %v, want a usage error saying %q", c.target, c.version, err, c.says)
		}
	}
	_, err = conform(context.Background(), settings("", map[string]string{"server-version": "9.6"}), family.ConformConfig{Sequences: 1}, io.Discard)
	var ue *family.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "15, 17, 18") {
		t.Errorf("conform --server-version 9.6: %v", err)
	}
	if !strings.Contains(serverVersionFlag.Usage, "15, 17, 18") || serverVersionFlag.Verbs&family.Conform == 0 || serverVersionFlag.Verbs&family.Validate == 0 {
		t.Errorf("the flag: %+v", serverVersionFlag)
	}
}
