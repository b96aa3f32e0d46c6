package consulsemrun

import (
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"pgregory.net/rapid"
)

// steering is what the lease families' steering needs of c's plans: any
// fault they may strike at a client or the server, or, on a cluster, at
// its nodes (nodeGoals), a semaphore, and how long its operations take.
func (c Config) steering() leaserun.Steering {
	faults, onNodes := c.planFaults()
	kinds := drawable(faults, c.AnyRestart || c.keeps())
	if slices.Contains(faults, histories.ForceClose) {
		kinds = append(kinds, histories.ForceClose)
	}
	for _, y := range nodeGoalOrder {
		if len(nodeKinds(y, onNodes)) > 0 && !slices.Contains(kinds, y) {
			kinds = append(kinds, y)
		}
	}
	// Measured (replay --history of one client's script): on the
	// simulator an acquire or a release is four calls of 1 ms, a refresh
	// or a verify one; on a real etcd and Consul they take milliseconds
	// to tens of them, a Consul release the longest.
	took, start := map[string]int{histories.Acquire: 4, histories.Release: 4}, 0
	switch {
	case c.real() && c.Backend == Etcd:
		took, start = map[string]int{histories.Acquire: 35, histories.Refresh: 2, histories.Verify: 3, histories.Release: 15}, 4
	case c.real():
		took, start = map[string]int{histories.Acquire: 50, histories.Refresh: 15, histories.Verify: 3, histories.Release: 150}, 1
	}
	return leaserun.Steering{Ops: steps.Ops, Faults: kinds, Clients: c.Clients, Semaphore: true, OpMs: 1, Took: took, StartMs: start,
		// A lost reply is that of the write that grants (runner.loseReply).
		Only: map[string][]string{histories.DropReply: {histories.Acquire}}}
}

// Goals are the interleavings c's plans can reach and DrawToward aims at
// (prover.Steerable; leaserun.Steering says which).
func (c Config) Goals() []prover.Interleaving { return c.withDefaults().steering().Goals() }

// DrawToward draws a plan as Draw does, then leans it toward g
// (leaserun.Steering.Toward): g's operations lead two clients' scripts
// (one's), under a limit of 2 where both must hold; the faults drawn at
// those clients or the server are left out, unless g is a fault, which
// then strikes inside the operation.
func (c Config) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	c = c.withDefaults()
	p := draw(t, c)
	s := c.steering()
	m := s.Toward(t, p.Clients, g)
	p.Clients = m.Scripts
	if m.BothHold || len(p.Limits) != len(p.Clients) {
		p.Limits = nil
	}
	if m.BothHold {
		p.Limit = 2
	}
	if p.Cluster != nil {
		for i, name := range p.processes() {
			if _, ok := p.Nodes[name]; !ok {
				p.Nodes[name] = appNodes(p.Backend)[i%len(appNodes(p.Backend))]
			}
		}
	}
	met := m.Names
	// The faults drawn that would strike the meeting's clients would
	// mostly stop it.
	p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool {
		return f.Node == "" && f.Cut == "" && (f.Target == "" || slices.Contains(met, f.Target))
	})
	if g.How != prover.Struck {
		return p
	}
	ttl, k := p.TTLMs, int(Expiry(p.Backend)+0.5)
	if _, onNodes := c.planFaults(); len(nodeKinds(g.Y, onNodes)) > 0 && (g.Y == nodesCut || !slices.Contains(c.Faults, g.Y)) {
		// A fault on the cluster's nodes, as the history names it: a cut
		// of their links, a node paused, or one killed or restarted
		// (restart-broker). A cut is aimed at the met client's own node
		// when it can be (its agent, or its etcd member).
		kind := rapid.SampledFrom(nodeKinds(g.Y, onNodes)).Draw(t, "steer_node_fault")
		f := drawNodeFault(t, p, kind, k)
		f.At = m.StrikeAt
		if own := p.Nodes[met[0]]; own != "" && (kind == run.IsolateAgent || kind == run.IsolateServer && slices.Contains(servers(p.Backend), own)) {
			f.Node = own
		}
		p.Nemesis = leaserun.Strike(p.Nemesis, f, c.MaxFaults)
		return p
	}
	f := Fault{Fault: g.Y, Target: met[0], At: m.StrikeAt}
	switch f.Fault {
	case histories.Pause:
		f.For = rapid.IntRange(ttl/2, 2*k*ttl).Draw(t, "steer_for_ms")
	case histories.Partition:
		f.For = rapid.IntRange(0, 4*k*ttl).Draw(t, "steer_for_ms")
	case histories.RestartBroker:
		f.Target, f.For = "", rapid.IntRange(0, 2*ttl).Draw(t, "steer_down_ms")
	}
	p.Nemesis = leaserun.Strike(p.Nemesis, f, c.MaxFaults)
	return p
}

// nodesCut is how a history names a cut of a cluster's links when it
// strikes (prover.Interleaving's Y): a partition of nodes, told apart
// from a client's partition.
const nodesCut = histories.Partition + " of nodes"

// nodeGoalOrder are the faults on a cluster's nodes that steering aims
// at, as histories name them when they strike: a cut of links, a node
// paused, a node killed or restarted (a restart-broker of the node).
var nodeGoalOrder = []string{nodesCut, histories.Pause, histories.RestartBroker}

// nodeKinds are the kinds of onNodes (cluster faults a plan may draw,
// ClusterFaultNames) that strike as y.
func nodeKinds(y string, onNodes []string) []string {
	var of []string
	switch y {
	case nodesCut:
		of = []string{run.IsolateAgent, run.IsolateServer, run.IsolateLeader, run.Split}
	case histories.Pause:
		of = []string{run.PauseNode}
	case histories.RestartBroker:
		of = []string{run.KillNode, run.RestartNode}
	}
	return slices.DeleteFunc(slices.Clone(onNodes), func(k string) bool { return !slices.Contains(of, k) })
}
