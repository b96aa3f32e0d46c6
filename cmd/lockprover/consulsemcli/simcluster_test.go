package consulsemcli

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/internal/family"
)

// --target sim-cluster proves on the simulated cluster of --backend
// (consul when not given), drawing the cluster's faults, and replays with
// --target sim; what cannot run there is refused naming its flag.
func TestSimClusterTarget(t *testing.T) {
	settings := func(faults string, flags map[string]string) family.Settings {
		return family.Settings{Kind: consulsemrun.Kind, Target: SimCluster, Faults: faults,
			Flag:  func(name string) string { return flags[name] },
			Given: func(name string) bool { _, ok := flags[name]; return ok }}
	}
	for _, backend := range []string{"", consulsemrun.Consul, consulsemrun.Etcd} {
		flags := map[string]string{}
		if backend != "" {
			flags["backend"] = backend
		}
		setup, err := consulSetup(settings("all", flags))
		if err != nil {
			t.Fatalf("--backend %q: %v", backend, err)
		}
		c := setup.Prove.(consulsemrun.Config)
		if setup.Real || setup.Target != SimCluster || !c.SimCluster || c.Backend != cmpOr(backend, consulsemrun.Consul) ||
			!slices.Equal(setup.Replay, []string{"--target", "sim"}) || !slices.Contains(c.Faults, "isolate-leader") {
			t.Errorf("--backend %q: setup %+v, config %+v", backend, setup, c)
		}
	}
	for _, bad := range []struct {
		s    family.Settings
		want string
	}{
		{settings("all", map[string]string{"backend": "zookeeper"}), "--backend"},
		{settings("isolate-agent", map[string]string{"backend": "etcd"}), "isolate-agent"},
		{settings("all", map[string]string{"persistent": "true"}), "--persistent"},
		{func() family.Settings { s := settings("all", nil); s.Impl = "/bin/true"; return s }(), "--impl"},
	} {
		if _, err := consulSetup(bad.s); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an error naming %s", bad.s, err, bad.want)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// conform --cluster on a machine that cannot start a cluster is a usage
// error (exit 2) naming what is missing; a --backend of neither is
// refused naming it.
func TestConformClusterRefused(t *testing.T) {
	s := family.Settings{Kind: consulsemrun.Kind,
		Flag:  func(name string) string { return map[string]string{"cluster": "true", "backend": "etcd"}[name] },
		Given: func(name string) bool { return name == "cluster" || name == "backend" }}
	t.Setenv("PATH", t.TempDir())
	_, err := consulConform(context.Background(), s, family.ConformConfig{Sequences: 1, Seed: 1}, nil)
	var usage *family.UsageError
	if err == nil || !errors.As(err, &usage) || !strings.Contains(err.Error(), "--cluster") {
		t.Errorf("conform --cluster with nothing on PATH: %v, want a usage error naming --cluster", err)
	}
	s.Flag = func(name string) string { return map[string]string{"cluster": "true", "backend": "zk"}[name] }
	if _, err := consulConform(context.Background(), s, family.ConformConfig{Sequences: 1, Seed: 1}, nil); err == nil || !strings.Contains(err.Error(), "--backend") {
		t.Errorf("conform --cluster --backend zk: %v, want an error naming --backend", err)
	}
}
