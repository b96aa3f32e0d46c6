package consulsemcli

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/internal/family"
)

// --target consul and --target etcd prove on a private real server (a
// real setup, the backend the target's), restarts of it among the faults
// they take, and what cannot run there is refused naming its flag:
// another --backend, a fault the family does not have, a target it does
// not have.
func TestConsulTargets(t *testing.T) {
	settings := func(target, faults string, flags map[string]string) family.Settings {
		return family.Settings{Kind: consulsemrun.Kind, Target: target, Faults: faults,
			Flag: func(name string) string {
				if v, ok := flags[name]; ok {
					return v
				}
				if name == "backend" {
					return consulsemrun.Consul
				}
				return ""
			},
			Given: func(name string) bool { _, ok := flags[name]; return ok }}
	}
	for _, target := range []string{consulsemrun.Consul, consulsemrun.Etcd} {
		setup, err := consulSetup(settings(target, "all", nil))
		if err != nil {
			t.Fatalf("--target %s: %v", target, err)
		}
		c := setup.Prove.(consulsemrun.Config)
		if !setup.Real || setup.Target != target || c.Backend != target || c.Deterministic() || setup.Start == nil {
			t.Errorf("--target %s: setup %+v, config %+v: want a real run on %s", target, setup, c, target)
		}
		setup, err = consulSetup(settings(target, "kill,restart-broker", nil))
		if err != nil {
			t.Fatalf("--target %s --faults kill,restart-broker: %v", target, err)
		}
		if c := setup.Prove.(consulsemrun.Config); !strings.Contains(strings.Join(c.Faults, ","), "restart-broker") {
			t.Errorf("--target %s --faults kill,restart-broker: faults %v, want restart-broker among them", target, c.Faults)
		}
	}
	for _, bad := range []struct {
		s    family.Settings
		want string
	}{
		{settings("consul", "all", map[string]string{"backend": "etcd"}), "--backend"},
		{settings("etcd", "kill,clock-jump", nil), "clock-jump"},
		{settings("zookeeper", "all", nil), "--target"},
		{settings("etcd", "all", map[string]string{"persistent": "true"}), "--persistent"},
	} {
		if _, err := consulSetup(bad.s); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--target %s --faults %s: %v, want an error naming %s", bad.s.Target, bad.s.Faults, err, bad.want)
		}
	}
}
