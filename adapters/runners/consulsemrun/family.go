// Package consulsemrun is the consul-semaphore family (issue 23):
// Consul's semaphore recipe (package consulsem, the reference), at most
// limit holders of a prefix, each holding a session that expires unless
// renewed, proven on the simulator of Consul and etcd (package
// sim/consulsim) and on private real ones (RunReal, Config.Target) or
// one the user runs (RunOn, Config.Addrs). It says what a plan of the
// family is (the backend, the limit and TTL, clients that acquire,
// refresh and release, faults: kills, pauses of a client beyond its
// session's life, partitions, lost replies to the granting write,
// restarts of the server, force-closes of a client's connections), how
// plans are drawn, and how they run.
// Histories are of lock kind histories.Lease, judged by model/lease
// with the backend's expiry factor: Consul invalidates a session
// between one and two TTLs after its last renewal, etcd one TTL after
// it, noticed within its lessor's 500 ms sweep.
//
// A restart of the server either keeps its sessions and gives each a
// fresh TTL from when it is back (a persistent Consul agent, etcd), which
// the lease checker is told (lease.Options.RestartKeeps), or forgets every
// session and key and starts its indexes again (a Consul -dev agent),
// which breaks exclusivity and fencing for any client. Plans draw restarts
// of a server that keeps its sessions; of a -dev agent only when
// Config.AnyRestart says so, their failures being findings about the
// configuration (as for Redlock's servers that keep nothing).
package consulsemrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// Config says what to prove and how hard to look: it is a prover.Subject
// on the simulator. The zero value proves the reference on a simulated
// Consul -dev agent with every fault but restarts.
type Config struct {
	// Scope is the mutant, and how many clients, operations and faults
	// plans may have, and which faults.
	prover.Scope
	// Backend is the simulated server, Consul ("" or "consul") or etcd.
	Backend string
	// Target is where plans run: the simulator ("" or "sim"), or a real
	// server of their backend, Consul or Etcd (RunReal), which Backend
	// then names too.
	Target string
	// Addrs, if set, is the real server the user runs, which plans run on
	// instead of a private one each (RunOn): a Consul agent's HTTP
	// address, or etcd's endpoints, host:port. It is not restarted, so
	// plans draw no restart-broker.
	Addrs []string
	// Version, if set, is the version of the private real servers plans
	// run on (a Consul binary lockprover builds, etcd from a Debian
	// release's root: adapters/servers/versions); the zero value runs the
	// machine's own etcd, and the Consul adapters/servers/consul finds.
	Version versions.Version
	// TTLMs fixes the sessions' TTL; 0 draws it (1 or 2 s).
	TTLMs int
	// Persistent makes the Consul agent keep its state across a restart
	// (else a -dev agent, which forgets); AnyRestart lets plans restart a
	// -dev agent too (see the package documentation).
	Persistent, AnyRestart bool
	// StaleReads and BehaviorRelease prove the reference's correct
	// variants (consulsem.Options).
	StaleReads, BehaviorRelease bool
	// LockDelay (Consul only) creates the sessions with a lock-delay of
	// their TTL (consulsem.Options.LockDelay; none otherwise).
	LockDelay bool
	// Drift is the drift bound plans are judged with; 0 means
	// model.DefaultDrift.
	Drift float64
	// Expiry, if set, is the expiry factor plans are judged with instead
	// of the backend's (explore shows what judging Consul with 1 finds).
	Expiry float64
	// Impl, if set, is the implementation under test, in processes of its
	// own, instead of the reference, with no mutant: on a real server
	// (Target; RunImpl), with no drop-reply among its faults, or on the
	// simulated Consul agent served on the wire (SimulateImpl), with every
	// fault of the simulator.
	Impl Impl
	// Wire serves the simulated agent to Impl's processes
	// (consulsemprotocol.Wire): an implementation on the simulator needs
	// it.
	Wire Serve
	// Cluster, if set, is the private cluster of Target's backend plans
	// run on (RunCluster), started for the run: plans draw the nodes
	// their clients talk to, and faults on the nodes (ClusterFaultNames)
	// beside those on the clients.
	Cluster *Cluster
	// SimCluster makes plans run on the simulated cluster of Backend
	// (consulsim's Options.Cluster): they draw nodes and faults on them
	// as on Cluster, and are judged as there.
	SimCluster bool
}

// cluster says whether c's plans run on a cluster, real or simulated.
func (c Config) cluster() bool { return c.Cluster != nil || c.SimCluster }

func (c Config) withDefaults() Config {
	if c.real() {
		c.Backend = c.Target
	}
	faults := faultNames
	if c.real() {
		faults = realFaults
	}
	if c.Impl != nil && c.real() {
		faults = ImplFaults()
	}
	if c.cluster() {
		faults = append(slices.DeleteFunc(slices.Clone(faults), func(f string) bool { return f == histories.RestartBroker }), clusterFaults(c.Backend)...)
	}
	c.Scope = c.Scope.Defaults(faults)
	if c.TTLMs == 0 && c.real() && c.Backend == Etcd {
		// etcd's lessor notices an expiry up to 500 ms late: judged
		// with 1.5 TTLs, a lease of 1 s leaves no margin on a busy
		// machine; one of 2 s leaves 500 ms.
		c.TTLMs = 2000
	}
	if c.Backend == "" {
		c.Backend = Consul
	}
	return c
}

// CheckTTL says what is wrong with a TTL of ttlMs on backend: Consul's
// agents refuse one under session_ttl_min (1 s) or over a day; etcd
// grants whole seconds, at least its floor (1 s). Plans keep to a minute.
func CheckTTL(backend string, ttlMs int) error {
	if ttlMs < 1000 || ttlMs > 60000 || backend == Etcd && ttlMs%1000 != 0 {
		return fmt.Errorf("ttl %d ms: want 1000 to 60000 (whole seconds on etcd)", ttlMs)
	}
	return nil
}

// Draw draws a plan of c with rapid.
func (c Config) Draw(t *rapid.T) prover.Plan { return draw(t, c.withDefaults()) }

// Run runs a plan of this family on c's target.
func (c Config) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	pl, ok := p.(*Plan)
	if !ok {
		return nil, fmt.Errorf("%s: a plan of another family (%T)", Kind, p)
	}
	if err := c.refuse(pl); err != nil {
		return nil, err
	}
	if c.real() {
		if pl.Backend != c.Target {
			return nil, fmt.Errorf("backend: a plan for %s cannot run on a real %s", pl.Backend, c.Target)
		}
		if c.Cluster != nil {
			return RunCluster(ctx, pl, c.Cluster, c.Impl)
		}
		if err := checkVersion(c.Version, c.Addrs); err != nil {
			return nil, err
		}
		return runReal(ctx, pl, c.Addrs, c.Impl, nil, c.Version)
	}
	if c.Impl != nil {
		return SimulateImpl(ctx, pl, c.Impl, c.Wire, nil)
	}
	return Simulate(pl, nil)
}

// Alone says whether a plan must run with no other beside it on a real
// target (prover.Alone): one on a cluster, whose nodes and links its
// faults strike for every plan.
func (c Config) Alone(p prover.Plan) bool {
	pl, ok := p.(*Plan)
	return ok && len(pl.Cluster) > 0
}

// real says whether c's plans run on a real server.
func (c Config) real() bool { return c.Target != "" && c.Target != "sim" }

// Judging gives the lease checker the backend's expiry factor: a Consul
// session may live two TTLs after its last renewal; an etcd lease one,
// plus the lessor's sweep (500 ms, at most half a TTL of a second or
// more: 1.5 TTLs bounds both). A restart of a server that keeps its
// sessions renews them from when it is back (etcd: plus its election
// timeout). Holders verify, so aware is judged.
func (c Config) Judging(string) any {
	c = c.withDefaults()
	o := lease.Options{Drift: c.Drift, Expiry: Expiry(c.Backend), Verify: true, RestartKeeps: c.keeps()}
	if o.Drift == 0 && c.real() {
		o.Drift = realDrift
	}
	if c.Expiry != 0 {
		o.Expiry = c.Expiry
	}
	if c.Backend == Etcd {
		o.RestartGrace = electionTimeout
	}
	if c.cluster() {
		// A fault on the cluster's servers may bring an election,
		// which renews every session (docs/consul-semaphore.md, K.1,
		// K.4).
		o.Elections, o.RestartGrace = servers(c.Backend), clusterGrace
	}
	return o
}

// realDrift is the drift bound plans on a real server are judged with
// unless Config.Drift says otherwise: a real server's session timers
// fire, and their expiry is applied, late on a busy machine (Consul
// invalidates a session at two TTLs exactly, judged at two TTLs times
// 1 + drift from the renewal's return), and 8% leaves 320 ms of a 2 s
// session's 4 s (160 ms of a 1 s one's), where the simulator's 1% would
// leave 40.
const realDrift = 0.08

// electionTimeout is the simulated etcd's (consulsim.Options), which it
// adds to every lease's fresh TTL after a restart.
const electionTimeout = 500 * time.Millisecond

// keeps says whether a restart of c's server keeps its sessions.
func (c Config) keeps() bool { return c.Backend == Etcd || c.Persistent }

// Expiry is the lease checker's expiry factor for backend (lease.Options.Expiry).
func Expiry(backend string) float64 {
	if backend == Etcd {
		return 1.5
	}
	return 2
}

// Deterministic says whether plans run on the simulator.
func (c Config) Deterministic() bool { return !c.real() }

// String says what c proves.
func (c Config) String() string {
	what := "the reference"
	if c.Impl != nil {
		what = c.Impl.String()
	}
	if c.Mutant != "" {
		what = "mutant " + c.Mutant
	}
	var variants []string
	if c.StaleReads {
		variants = append(variants, "stale reads")
	}
	if c.BehaviorRelease {
		variants = append(variants, "Behavior release")
	}
	if c.LockDelay {
		variants = append(variants, "lock-delay")
	}
	for i, v := range variants {
		sep := " and "
		if i == 0 {
			sep = " with "
		}
		what += sep + v
	}
	if c.real() && len(c.Addrs) > 0 {
		return what + " on the " + c.Target + " at " + strings.Join(c.Addrs, ",")
	}
	if c.Cluster != nil {
		return what + " on a private " + c.Target + c.named() + " cluster"
	}
	if c.real() {
		return what + " on a private real " + c.Target + c.named()
	}
	return what + " on the simulated " + c.withDefaults().Backend
}

// named is " 3.5.30" when c names the version of its real servers, ""
// when it does not.
func (c Config) named() string {
	if c.Version.Server == "" {
		return ""
	}
	return " " + c.Version.Name
}

// checkVersion says why plans cannot run on servers of version v at
// addrs: a server the user runs is whatever version it is.
func checkVersion(v versions.Version, addrs []string) error {
	if v.Server != "" && len(addrs) > 0 {
		return fmt.Errorf("version %s: the server at %s is not one lockprover starts, and runs whatever version it runs", v, strings.Join(addrs, ","))
	}
	return nil
}

// refuse refuses p, naming the fault, when it holds a fault c's target
// does not strike: the simulator strikes every fault of faultNames; a
// real server realFaults; an implementation's, ImplFaults (no
// drop-reply). A cluster strikes its faults (ClusterFaultNames) on its
// nodes and links as the faults a plan holds of them.
func (c Config) refuse(p *Plan) error {
	target, strikes := "sim", faultNames
	switch {
	case c.real() && c.Impl != nil:
		target, strikes = c.Target, ImplFaults()
	case c.real():
		target, strikes = c.Target, realFaults
	}
	if c.cluster() {
		target += "-cluster"
	}
	return run.Refuse(target, strikes, "nemesis", len(p.Nemesis), func(i int) string { return p.Nemesis[i].Fault })
}
