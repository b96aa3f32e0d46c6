package consulsemcli

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun/consulsemprotocol"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
)

// --impl proves an implementation in processes on a real server (the
// plans' faults those offered to an implementation: no drop-reply), or on
// the simulated Consul agent served on the wire (every fault), its replay
// flags naming it; what cannot run with it is refused naming its flag: the
// simulated etcd, a mutant, the reference's options, a drop-reply on a
// real server.
func TestConsulImpl(t *testing.T) {
	settings := func(target, faults, mutant, options string) family.Settings {
		return family.Settings{Kind: consulsemrun.Kind, Target: target, Faults: faults, Impl: "python3 impl.py", Mutant: mutant, Options: options,
			Flag:  func(name string) string { return "" },
			Given: func(string) bool { return false }}
	}
	for _, target := range []string{consulsemrun.Consul, consulsemrun.Etcd} {
		setup, err := consulSetup(settings(target, "all", "", ""))
		if err != nil {
			t.Fatalf("--target %s --impl: %v", target, err)
		}
		c := setup.Prove.(consulsemrun.Config)
		if _, ok := c.Impl.(*consulsemprotocol.Processes); !ok || !setup.Real || c.Target != target || setup.Stop == nil || setup.Interrupt == nil {
			t.Errorf("--target %s --impl: setup %+v, config %+v: want the implementation on a real %s", target, setup, c, target)
		}
		if got := strings.Join(setup.Replay, " "); got != "--target "+target+" --impl 'python3 impl.py'" {
			t.Errorf("--target %s --impl: replay flags %q", target, got)
		}
	}
	for _, target := range []string{"", "sim"} {
		setup, err := consulSetup(settings(target, "kill,"+histories.DropReply, "", ""))
		if err != nil {
			t.Fatalf("--target %q --impl: %v", target, err)
		}
		c := setup.Prove.(consulsemrun.Config)
		if _, ok := c.Impl.(*consulsemprotocol.Processes); !ok || setup.Real || setup.Target != "sim" || setup.Start == nil {
			t.Errorf("--target %q --impl: setup %+v, config %+v: want the implementation on the served simulator", target, setup, c)
		}
		if got := strings.Join(setup.Replay, " "); got != "--impl 'python3 impl.py'" {
			t.Errorf("--target %q --impl: replay flags %q", target, got)
		}
	}
	etcd := settings("sim", "all", "", "")
	etcd.Given, etcd.Flag = func(f string) bool { return f == "backend" }, func(f string) string { return map[string]string{"backend": "etcd"}[f] }
	for _, bad := range []struct {
		s    family.Settings
		want string
	}{
		{etcd, "--target etcd"},
		{settings("consul", "all", "consul-no-prune", ""), "--mutant"},
		{settings("etcd", "all", "", "stale-reads"), "--options"},
		{settings("consul", "kill,"+histories.DropReply, "", ""), "not offered for an implementation"},
	} {
		if _, err := consulSetup(bad.s); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--target %q --faults %s --mutant %q --options %q --impl: %v, want an error naming %s", bad.s.Target, bad.s.Faults, bad.s.Mutant, bad.s.Options, err, bad.want)
		}
	}
}
