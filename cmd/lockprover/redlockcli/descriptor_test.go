package redlockcli

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/family"
)

// settings are a command line's for kind, with flags given by name.
func settings(kind, target string, flags map[string]string) family.Settings {
	return family.Settings{Kind: kind, Target: target, Faults: "all",
		Flag: func(name string) string {
			if v, ok := flags[name]; ok {
				return v
			}
			for _, f := range Redlock.Flags {
				if f.Name == name {
					return f.Default
				}
			}
			return ""
		},
		Given: func(name string) bool { _, ok := flags[name]; return ok }}
}

// --server-version picks the version the Redis target's servers run, for
// both kinds: the setup says it (Server, Where) and hands it on to a
// replay; without it the target is the machine's redis-server, as
// before. An unknown version, or one for the simulator, is refused,
// naming the flag.
func TestServerVersion(t *testing.T) {
	for _, c := range []struct {
		kind  string
		setup func(family.Settings) (*family.Setup, error)
	}{{"redlock", redlockSetup}, {"priority-redlock", prioritySetup}} {
		s, err := c.setup(settings(c.kind, "redis", map[string]string{"server-version": "valkey-9.1.2"}))
		if err != nil {
			t.Fatal(err)
		}
		if s.Server != "valkey 9.1.2" || !strings.Contains(s.Where, "valkey-servers 9.1.2") {
			t.Errorf("%s on valkey-9.1.2: server %q, where %q", c.kind, s.Server, s.Where)
		}
		if !slices.Equal(s.Replay, []string{"--target", "redis", "--server-version", "valkey-9.1.2"}) {
			t.Errorf("%s on valkey-9.1.2: replay flags %q", c.kind, s.Replay)
		}

		s, err = c.setup(settings(c.kind, "redis", nil))
		if err != nil {
			t.Fatal(err)
		}
		if s.Server != "redis 7.0.15" || s.Where != "private redis-servers, each plan's own" || !slices.Equal(s.Replay, []string{"--target", "redis"}) {
			t.Errorf("%s on the machine's redis-server: server %q, where %q, replay %q", c.kind, s.Server, s.Where, s.Replay)
		}

		_, err = c.setup(settings(c.kind, "redis", map[string]string{"server-version": "9.9"}))
		var usage *family.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--server-version") || !strings.Contains(err.Error(), "valkey-9.1.2") {
			t.Errorf("%s with --server-version 9.9: %v, want a usage error listing the versions", c.kind, err)
		}
		_, err = c.setup(settings(c.kind, "", map[string]string{"server-version": "8.0.6"}))
		if err == nil || !strings.Contains(err.Error(), "--server-version") || !strings.Contains(err.Error(), "--target redis") {
			t.Errorf("%s on the simulator with --server-version 8.0.6: %v, want it refused", c.kind, err)
		}
	}
}
