package consulsemcli

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model/lease"
)

// givenSettings are the settings of a command line with target, faults
// and the family flags given.
func givenSettings(target, faults string, flags map[string]string) family.Settings {
	return family.Settings{Kind: consulsemrun.Kind, Target: target, Faults: faults,
		Flag:  func(name string) string { return flags[name] },
		Given: func(name string) bool { _, ok := flags[name]; return ok }}
}

// --consul-addr and --etcd-endpoints name a server the user runs: the
// setup is a real run there (its replay flags say it), whose plans draw
// no restart; what cannot be is refused naming the flag: either with
// another target (or none), --persistent beside --consul-addr, restart-
// broker among the faults, an address that is not host:port.
func TestConsulGivenFlags(t *testing.T) {
	for _, tc := range []struct{ target, flag, addr string }{
		{consulsemrun.Consul, "consul-addr", "127.0.0.1:8500"},
		{consulsemrun.Etcd, "etcd-endpoints", "127.0.0.1:2379,127.0.0.1:22379"},
	} {
		setup, err := consulSetup(givenSettings(tc.target, "all", map[string]string{tc.flag: tc.addr}))
		if err != nil {
			t.Fatalf("--target %s --%s %s: %v", tc.target, tc.flag, tc.addr, err)
		}
		c := setup.Prove.(consulsemrun.Config)
		replay := strings.Join(setup.Replay, " ")
		if !setup.Real || c.Target != tc.target || strings.Join(c.Addrs, ",") != tc.addr || setup.Start == nil || replay != "--target "+tc.target+" --"+tc.flag+" "+tc.addr {
			t.Errorf("--%s %s: setup %+v, config %+v: want a real run there, replayed there", tc.flag, tc.addr, setup, c)
		}
	}
	for _, bad := range []struct {
		target, faults string
		flags          map[string]string
		want           []string
	}{
		{"etcd", "all", map[string]string{"consul-addr": "127.0.0.1:8500"}, []string{"--consul-addr", "--target etcd"}},
		{"sim", "all", map[string]string{"consul-addr": "127.0.0.1:8500"}, []string{"--consul-addr", "--target sim"}},
		{"", "all", map[string]string{"consul-addr": "127.0.0.1:8500"}, []string{"--consul-addr", "--target consul"}},
		{"consul", "all", map[string]string{"etcd-endpoints": "127.0.0.1:2379"}, []string{"--etcd-endpoints", "--target consul"}},
		{"consul", "all", map[string]string{"consul-addr": "127.0.0.1:8500", "persistent": "true"}, []string{"--persistent", "--consul-addr 127.0.0.1:8500"}},
		{"consul", "kill,restart-broker", map[string]string{"consul-addr": "127.0.0.1:8500"}, []string{"restart-broker", "--consul-addr"}},
		{"etcd", "restart-broker", map[string]string{"etcd-endpoints": "127.0.0.1:2379"}, []string{"restart-broker", "--etcd-endpoints"}},
		{"consul", "all", map[string]string{"consul-addr": "http://127.0.0.1:8500"}, []string{"--consul-addr", "host:port"}},
		{"consul", "all", map[string]string{"consul-addr": "127.0.0.1:8500,127.0.0.1:8501"}, []string{"--consul-addr", "one agent"}},
	} {
		_, err := consulSetup(givenSettings(bad.target, bad.faults, bad.flags))
		for _, w := range bad.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("--target %q --faults %s %v: %v, want an error naming %s", bad.target, bad.faults, bad.flags, err, w)
			}
		}
	}
}

// An address where nothing answers is refused before the first plan (the
// setup's Start), soon, as a usage error naming the flag and the address.
func TestConsulGivenNotAnswering(t *testing.T) {
	quick.Skip(t, "a private Consul agent")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, tc := range []struct{ target, flag string }{{consulsemrun.Consul, "consul-addr"}, {consulsemrun.Etcd, "etcd-endpoints"}} {
		setup, err := consulSetup(givenSettings(tc.target, "all", map[string]string{tc.flag: addr}))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = setup.Start(context.Background())
		var usage *family.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--"+tc.flag+" "+addr) || time.Since(start) > 10*time.Second {
			t.Errorf("--target %s --%s %s (nothing there): %v after %v, want a usage error naming the flag and the address, within 10 s",
				tc.target, tc.flag, addr, err, time.Since(start).Round(time.Millisecond))
		}
	}
}

// Through the flags, on a server the test starts as a user would: the
// preflight passes, a drawn plan runs there with the reference holding
// the safety properties, the server still answers after (lockprover did
// not stop it), and a replay of a plan that restarts it is refused
// naming the fault and the flag.
func TestConsulGivenRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	for _, tc := range []struct{ target, flag string }{{consulsemrun.Consul, "consul-addr"}, {consulsemrun.Etcd, "etcd-endpoints"}} {
		t.Run(tc.target, func(t *testing.T) {
			addr := startGiven(t, tc.target)
			flags := map[string]string{tc.flag: addr, "ttl": "2s"}
			setup, err := consulSetup(givenSettings(tc.target, "all", flags))
			if err != nil {
				t.Fatal(err)
			}
			if err := setup.Start(context.Background()); err != nil {
				t.Fatalf("preflight of the server at %s: %v", addr, err)
			}
			safety := []string{lease.LeaseExclusive, lease.NoRevival, lease.Fencing, lease.Aware}
			out, err := prover.Search{Config: prover.Config{Subject: setup.Prove, Properties: safety}, Seed: 2, Plans: 1, Parallel: 1, Shrink: time.Nanosecond}.Run()
			if err != nil || out.Found != nil || out.Plans != 1 {
				t.Fatalf("a plan on the %s at %s: %d plans, %v, found %v", tc.target, addr, out.Plans, err, out.Found)
			}
			if err := setup.Start(context.Background()); err != nil {
				t.Errorf("the server at %s after the run: %v", addr, err)
			}
			p := &consulsemrun.Plan{Version: consulsemrun.PlanVersion, Kind: consulsemrun.Kind, Prefix: "lp", Backend: tc.target, Limit: 1, TTLMs: 2000,
				Clients: [][]consulsemrun.Step{{{Op: histories.Acquire}, {Op: histories.Release}}},
				Faulted: leaserun.Faulted[consulsemrun.Fault]{Nemesis: []consulsemrun.Fault{{At: 100, Fault: histories.RestartBroker, For: 500}}}}
			_, err = consulReplay(p, givenSettings(tc.target, "", flags))
			var usage *family.UsageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), histories.RestartBroker) || !strings.Contains(err.Error(), "--"+tc.flag) {
				t.Errorf("replaying a restart on the given %s: %v, want a usage error naming %s and --%s", tc.target, err, histories.RestartBroker, tc.flag)
			}
		})
	}
}

// startGiven starts a private server of target for the test (stopped at
// its end), skipping the test where this machine has none, and answers
// its address.
func startGiven(t *testing.T, target string) string {
	if err := consulsemrun.Preflight(target); errors.Is(err, consul.ErrNoConsul) || errors.Is(err, etcd.ErrNoEtcd) {
		t.Skipf("skipped: %v", err)
	}
	if target == consulsemrun.Consul {
		a, stop, err := consul.StartTemp(context.Background(), consul.Options{Mode: consul.Dev, SessionTTLMin: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return a.Addr()
	}
	s, stop, err := etcd.StartTemp(context.Background(), etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s.Addr()
}
