package consulsemcli

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/bench"
)

// versionSettings are the settings of a command line of --target target
// with flags.
func versionSettings(target string, flags map[string]string) family.Settings {
	return family.Settings{Kind: consulsemrun.Kind, Target: target, Faults: "all",
		Flag:  func(name string) string { return flags[name] },
		Given: func(name string) bool { _, ok := flags[name]; return ok }}
}

// --server-version names the version of the private real servers: it
// goes into the config, the setup says it (Where, Server) and its replay
// keeps it; without it the setup runs as before, saying the default's
// name. What it cannot name is a usage error naming the flag.
func TestServerVersion(t *testing.T) {
	for _, c := range []struct {
		target, version, server, where string
	}{
		{"etcd", "", "etcd 3.4.23", "a private real etcd for each plan"},
		{"etcd", "3.5.30", "etcd 3.5.30", "a private real etcd 3.5.30 for each plan"},
		{"consul", "", "consul 1.16.3", "a private real consul for each plan"},
		{"consul", "1.20.2", "consul 1.20.2", "a private real consul 1.20.2 for each plan"},
		{"etcd-cluster", "3.5.16", "etcd 3.5.16", "a private etcd 3.5.16 cluster (e1, e2, e3)"},
		{"consul-cluster", "", "consul 1.16.3", "a private consul cluster (s1, s2, s3, a1, a2)"},
	} {
		t.Setenv("LOCKPROVER_ETCD_VERSION", "")
		flags := map[string]string{}
		if c.version != "" {
			flags["server-version"] = c.version
		}
		setup, err := consulSetup(versionSettings(c.target, flags))
		if err != nil {
			t.Fatalf("--target %s --server-version %q: %v", c.target, c.version, err)
		}
		cfg := setup.Prove.(consulsemrun.Config)
		if setup.Server != c.server || setup.Where != c.where || cfg.Version.Name != c.version {
			t.Errorf("--target %s --server-version %q: Server %q, Where %q, config's version %v; want %q, %q", c.target, c.version, setup.Server, setup.Where, cfg.Version, c.server, c.where)
		}
		if i := slices.Index(setup.Replay, "--server-version"); (c.version != "") != (i >= 0) || i >= 0 && setup.Replay[i+1] != c.version {
			t.Errorf("--target %s --server-version %q: replay %v", c.target, c.version, setup.Replay)
		}
	}
	for _, bad := range []struct {
		target, version, other, want string
	}{
		{"etcd", "3.6.0", "", "3.4.23, 3.5.16, 3.5.30"},
		{"etcd", "1.16.3", "", "a version of consul"},
		{"consul", "3.5.30", "", "a version of etcd"},
		{"", "3.5.30", "", "--target consul or etcd"},
		{SimCluster, "3.5.30", "", "simulated"},
		{"etcd", "3.5.30", "etcd-endpoints", "runs whatever version it runs"},
	} {
		flags := map[string]string{"server-version": bad.version}
		if bad.other != "" {
			flags[bad.other] = "127.0.0.1:2379"
		}
		_, err := consulSetup(versionSettings(bad.target, flags))
		var u *family.UsageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), "--server-version") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--target %q --server-version %s: %v, want a usage error naming the flag and %q", bad.target, bad.version, err, bad.want)
		}
	}
}

// conform and bench run one server of each backend when --backend is
// not given: --server-version, the version of one, then wants it.
func TestServerVersionWantsABackend(t *testing.T) {
	s := versionSettings("", map[string]string{"server-version": "3.5.30"})
	_, err := consulConform(context.Background(), s, family.ConformConfig{Sequences: 1}, nil)
	var u *family.UsageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "--backend") {
		t.Errorf("conform --server-version 3.5.30: %v, want a usage error naming --backend", err)
	}
	if err := consulBench(context.Background(), s, bench.Config{N: 1}, io.Discard); !errors.As(err, &u) || !strings.Contains(err.Error(), "--backend") {
		t.Errorf("bench --server-version 3.5.30: %v, want a usage error naming --backend", err)
	}
}
