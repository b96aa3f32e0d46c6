package consulsemcli

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
)

// --target consul-cluster and etcd-cluster prove on a private cluster of
// their backend, started by Start (not before), with the faults on its
// nodes among those drawn; what cannot run there is refused naming its
// flag; a machine without the server's binary is refused at Start as a
// usage error (exit 2) naming what is missing.
func TestClusterTargets(t *testing.T) {
	settings := func(target, faults string, flags map[string]string) family.Settings {
		return family.Settings{Kind: consulsemrun.Kind, Target: target, Faults: faults,
			Flag:  func(name string) string { return flags[name] },
			Given: func(name string) bool { _, ok := flags[name]; return ok }}
	}
	for _, tc := range []struct{ target, backend string }{
		{consulsemrun.ConsulCluster, consulsemrun.Consul},
		{consulsemrun.EtcdCluster, consulsemrun.Etcd},
	} {
		setup, err := consulSetup(settings(tc.target, "all", nil))
		if err != nil {
			t.Fatalf("--target %s: %v", tc.target, err)
		}
		c := setup.Prove.(consulsemrun.Config)
		if !setup.Real || setup.Target != tc.target || c.Backend != tc.backend || c.Cluster != nil || setup.Start == nil || setup.Stop == nil {
			t.Errorf("--target %s: setup %+v, config %+v: want a real run on a %s cluster started by Start", tc.target, setup, c, tc.backend)
		}
		if !slices.Contains(c.Faults, "isolate-leader") || slices.Contains(c.Faults, histories.RestartBroker) {
			t.Errorf("--target %s --faults all: %v, want the cluster's faults and no restart of a single server", tc.target, c.Faults)
		}
		if slices.Contains(c.Faults, "isolate-agent") != (tc.backend == consulsemrun.Consul) {
			t.Errorf("--target %s --faults all: %v: isolate-agent is Consul's only", tc.target, c.Faults)
		}
		t.Setenv("LOCKPROVER_CONSUL", "/nonexistent/consul")
		t.Setenv("PATH", t.TempDir())
		err = setup.Start(context.Background())
		var usage *family.UsageError
		if err == nil || !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.target) {
			t.Errorf("--target %s without root, ip or %s: %v, want a usage error naming the target and what is missing", tc.target, tc.backend, err)
		}
	}
	for _, bad := range []struct {
		s    family.Settings
		want string
	}{
		{settings(consulsemrun.ConsulCluster, "all", map[string]string{"backend": "etcd"}), "--backend"},
		{settings(consulsemrun.EtcdCluster, "isolate-agent", nil), "isolate-agent"},
		{settings(consulsemrun.EtcdCluster, "restart-broker", nil), "restart-broker"},
		{settings(consulsemrun.ConsulCluster, "all", map[string]string{"persistent": "true"}), "--persistent"},
		{settings(consulsemrun.EtcdCluster, "all", map[string]string{"etcd-endpoints": "127.0.0.1:2379"}), "--etcd-endpoints"},
	} {
		if _, err := consulSetup(bad.s); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--target %s --faults %s: %v, want an error naming %s", bad.s.Target, bad.s.Faults, err, bad.want)
		}
	}
}
