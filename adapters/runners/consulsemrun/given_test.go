package consulsemrun

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// A userServer is a server the test runs as a user would (Config.Addrs):
// its address, a session (lease) of the user's own on it, which a run
// must leave alone (as its key user/keep), and what lists what is on it.
type userServer struct {
	addr    string
	session string // the user's session (lease) token
	// list lists every key on the server, the lock keys too, and every
	// session (lease) but a Consul agent's start probes.
	list func(ctx context.Context) (keys, sessions []string, err error)
}

// startUser starts a private server of target for the test (stopped at
// its end), with a key user/keep and a session of an hour of the user's.
func startUser(t *testing.T, target string) *userServer {
	ctx := context.Background()
	if target == Consul {
		a, stop, err := consul.StartTemp(ctx, consul.Options{Mode: consul.Dev, SessionTTLMin: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		var out struct{ ID string }
		err = consul.Call(ctx, http.DefaultClient, http.MethodPut, a.URL(), "/v1/session/create", []byte(`{"Name":"user","TTL":"3600s"}`), &out)
		if err == nil {
			err = consul.Call(ctx, http.DefaultClient, http.MethodPut, a.URL(), "/v1/kv/user/keep", []byte("x"), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		return &userServer{addr: a.Addr(), session: out.ID, list: consulHTTP{url: a.URL()}.everything}
	}
	s, stop, err := etcd.StartTemp(ctx, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	g, err := cli.Grant(ctx, 3600)
	if err == nil {
		_, err = cli.Put(ctx, "user/keep", "x")
	}
	if err != nil {
		t.Fatal(err)
	}
	return &userServer{addr: s.Addr(), session: fmt.Sprintf("%016x", int64(g.ID)), list: etcdAdmin{cli}.everything}
}

// everything lists every key on the agent and every session but its
// start probes.
func (c consulHTTP) everything(ctx context.Context) (keys, sessions []string, err error) {
	if err := c.get(ctx, "/v1/kv/?keys", &keys); err != nil {
		return nil, nil, err
	}
	var ss []struct{ ID, Name string }
	if err := c.get(ctx, "/v1/session/list", &ss); err != nil {
		return nil, nil, err
	}
	for _, s := range ss {
		if s.Name != agentProbe {
			sessions = append(sessions, s.ID)
		}
	}
	return keys, sessions, nil
}

// everything lists every key on the etcd and every lease.
func (e etcdAdmin) everything(ctx context.Context) (keys, leases []string, err error) {
	resp, err := e.cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	ls, err := e.cli.Leases(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range ls.Leases {
		leases = append(leases, fmt.Sprintf("%016x", int64(l.ID)))
	}
	return keys, leases, nil
}

// On a server the user runs (Config.Addrs), on each real backend: drawn
// plans (every fault offered but restarts) run, the reference holding
// every safety property; nothing of the runs is left on it (their keys,
// lock keys too, and sessions gone), what the user had there is still
// there, and the server still answers (lockprover did not stop it); a
// plan that restarts it is refused, naming the fault and the flag, and
// none is drawn.
func TestGivenServer(t *testing.T) {
	t.Parallel()
	for _, target := range realTargets {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			onReal(t, target)
			u := startUser(t, target)
			c := Config{Scope: prover.Scope{Clients: 3, Ops: 5}, Target: target, Addrs: []string{u.addr}, TTLMs: 2000}
			safeOn(t, c, 3, 1)
			givenFaults(t, u, target)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			keys, sessions, err := u.list(ctx)
			if err != nil {
				t.Fatalf("the server at %s after the runs: %v", u.addr, err)
			}
			if !slices.Equal(keys, []string{"user/keep"}) || !slices.Equal(sessions, []string{u.session}) {
				t.Errorf("left on the server: keys %v, sessions %v; want the user's alone: user/keep, %s", keys, sessions, u.session)
			}
			restart := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: target, Limit: 1, TTLMs: 2000,
				Clients: [][]Step{{{Op: histories.Acquire}, {Op: histories.Release}}},
				Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{{At: 100, Fault: histories.RestartBroker, For: 500}}}}
			_, err = RunOn(context.Background(), restart, c.Addrs)
			if flag := "--" + AddrFlag(target); err == nil || !strings.Contains(err.Error(), histories.RestartBroker) || !strings.Contains(err.Error(), flag) {
				t.Errorf("a restart on the given server: %v, want it refused naming %s and %s", err, histories.RestartBroker, flag)
			}
			if err := PreflightAddrs(context.Background(), target, c.Addrs, time.Second); err != nil {
				t.Errorf("the server no longer answers after the runs: %v", err)
			}
			// The agent's session_ttl_min is 1 s: sessions of 500 ms it
			// would refuse, which its preflight says.
			err = PreflightAddrs(context.Background(), target, c.Addrs, 500*time.Millisecond)
			if target == Consul && (err == nil || !strings.Contains(err.Error(), "session_ttl_min is 1s")) {
				t.Errorf("preflight for sessions of 500 ms on an agent whose floor is 1 s: %v, want an error naming session_ttl_min", err)
			}
		})
	}
}

// givenFaults runs a plan with a kill of a holder, a partition and a
// pause on the user's server: every fault recorded, the safety properties
// holding, and no problem (the user's own session, which is not the
// run's, is not reported left behind).
func givenFaults(t *testing.T, u *userServer, target string) {
	p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: target, Limit: 1, TTLMs: 2000,
		Clients: [][]Step{{{Op: histories.Acquire}, {Op: Sleep, Ms: 1500}, {Op: histories.Refresh}, {Op: histories.Release}},
			{{Op: Sleep, Ms: 100}, {Op: histories.Acquire}, {Op: Sleep, Ms: 500}, {Op: histories.Acquire}}},
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{{At: 300, Fault: histories.Partition, Target: "c2", For: 300},
			{At: 700, Fault: histories.Pause, Target: "c2", For: 200},
			{At: 1000, Fault: histories.Kill, Target: "c1"}}}}
	res, err := RunOn(context.Background(), p, []string{u.addr})
	if err != nil {
		t.Fatal(err)
	}
	struck := 0
	for _, e := range res.History {
		if e.Process == "nemesis" && e.Type == histories.Invoke {
			struck++
		}
	}
	if struck < 3 || len(res.Evidence.Problems) > 0 {
		var b strings.Builder
		histories.Write(&b, res.History)
		t.Errorf("%d faults recorded, want 3 or more; problems %v\n%s", struck, res.Evidence.Problems, b.String())
	}
	for _, v := range prover.Judge(res, model.Options{Family: []any{Config{Target: target}.Judging("")}}).Verdicts {
		if v.Status == verdict.Fail && slices.Contains(safety, v.Property) {
			t.Errorf("%s: %s", v.Property, v.Detail)
		}
	}
}

// Plans drawn for a given server hold no restart, even when the faults
// name it; for a private one they may.
func TestGivenDrawsNoRestart(t *testing.T) {
	for _, target := range realTargets {
		restarts := map[bool]int{}
		for _, given := range []bool{false, true} {
			c := Config{Scope: prover.Scope{Faults: RealFaults(), MaxFaults: 3}, Target: target, AnyRestart: true}
			if given {
				c.Addrs = []string{"127.0.0.1:1"}
			}
			c = c.withDefaults()
			// 200 plans of fixed seeds: a restart is among their faults
			// in some (rapid.Check's random seeds, 20 plans under
			// -short, drew none now and then).
			plans := rapid.Custom(func(rt *rapid.T) *Plan { return draw(rt, c) })
			for i := range 200 {
				for _, f := range plans.Example(i).Nemesis {
					if f.Fault == histories.RestartBroker {
						restarts[given]++
					}
				}
			}
		}
		if restarts[true] != 0 || restarts[false] == 0 {
			t.Errorf("%s: restarts drawn %d times for a given server, %d for a private one; want none and some", target, restarts[true], restarts[false])
		}
	}
}
