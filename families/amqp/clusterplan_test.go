package amqp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/backends/rabbitmq"
	"github.com/lockprover/lockprover/prover"
	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/histories"
)

// A plan on a cluster is checked as strictly as any: every mistake in its
// cluster, its processes' nodes and its faults on nodes and links names
// the field.
func TestClusterPlanValidation(t *testing.T) {
	good := isolatedHolder()
	if err := good.Validate(); err != nil {
		t.Fatalf("the hand plan: %v", err)
	}
	for _, tc := range []struct {
		name    string
		breakIt func(p *Plan)
		want    string
	}{
		{"node name", func(p *Plan) { p.Cluster[1] = "N-2" }, `cluster[1]: a node's name is a letter then letters or digits (n1), got "N-2"`},
		{"node twice", func(p *Plan) { p.Cluster[2] = "n1" }, `cluster[2]: node "n1" named twice`},
		{"node named as a process", func(p *Plan) { p.Cluster[0] = "c1" }, `cluster[0]: node "c1" has a process's name`},
		{"nodes without a cluster", func(p *Plan) { p.Cluster, p.Nemesis, p.PartitionHandling = nil, nil, "" }, "nodes: a plan without a cluster has no nodes to connect to"},
		{"node of no process", func(p *Plan) { p.Nodes["c9"] = "n1" }, `nodes.c9: no process named "c9" in this plan`},
		{"node not in the cluster", func(p *Plan) { p.Nodes["c2"] = "n7" }, `nodes.c2: want a node of the cluster (n1, n2, n3), got "n7"`},
		{"cut without a cluster", func(p *Plan) { p.Cluster, p.Nodes, p.PartitionHandling = nil, nil, "" }, "nemesis[0]: a fault on a node or a cut between nodes needs a cluster"},
		{"cut of a kill", func(p *Plan) { p.Nemesis[0].Fault = histories.Kill }, "nemesis[0].cut: only a partition cuts links, not a kill"},
		{"node and cut", func(p *Plan) { p.Nemesis[0].Node = "n1" }, "nemesis[0]: a fault strikes a node or cuts links between nodes, not both"},
		{"bad cut", func(p *Plan) { p.Nemesis[0].Cut = "n1>n2  n2>n1" }, `nemesis[0].cut: want directions "from>to" separated by single spaces`},
		{"cut from itself", func(p *Plan) { p.Nemesis[0].Cut = "n1>n1" }, `nemesis[0].cut: "n1>n1" cuts n1 off from itself`},
		{"cut of another node", func(p *Plan) { p.Nemesis[0].Cut = "n1>n4" }, `nemesis[0].cut: want nodes of the cluster (n1, n2, n3), got "n4"`},
		{"bad mode", func(p *Plan) { p.PartitionHandling = "pause_majority" }, `partition_handling: want ignore, pause_minority or autoheal, got "pause_majority"`},
		{"mode without a cluster", func(p *Plan) { p.Cluster, p.Nodes, p.Nemesis = nil, nil, nil }, "partition_handling: a plan without a cluster has no partition handling"},
		{"node fault", func(p *Plan) { p.Nemesis[0] = Fault{Fault: histories.ForceClose, Node: "n1"} }, "nemesis[0].node: a node can be killed, paused or restarted (restart-broker), not struck by force-close"},
		{"unknown node", func(p *Plan) { p.Nemesis[0] = Fault{Fault: histories.Kill, Node: "n5"} }, `nemesis[0].node: want a node of the cluster (n1, n2, n3), got "n5"`},
		{"target without calls", func(p *Plan) { p.Nemesis[0] = Fault{Fault: histories.Kill, Node: "n1", Target: "c1"} }, "nemesis[0].target: a fault on the cluster strikes at_ms, or after_calls of its target process"},
		{"calls without target", func(p *Plan) { p.Nemesis[0] = Fault{Fault: histories.Pause, Node: "n1", AfterCalls: 3} }, "nemesis[0].after_calls: counts the calls of a target process: name it"},
	} {
		p := isolatedHolder()
		tc.breakIt(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A process connects to the node the plan gives it, else to the nodes in
// turn, admins then clients; the probe to the first.
func TestNodeOf(t *testing.T) {
	p := isolatedHolder()
	p.Clients = append(p.Clients, []Step{{Op: "acquire"}})
	delete(p.Nodes, "admin")
	for name, want := range map[string]string{"admin": "n1", "c1": "n1", "c2": "n2", "c3": "n1", "probe": "n1"} {
		if got := p.NodeOf(name); got != want {
			t.Errorf("NodeOf(%s) = %s, want %s", name, got, want)
		}
	}
	if got := (&Plan{}).NodeOf("c1"); got != "" {
		t.Errorf("a single broker's plan gives c1 node %q", got)
	}
}

// The simulated broker refuses a plan on a cluster, saying where it runs.
func TestSimulatorRefusesClusterPlan(t *testing.T) {
	_, err := Simulator{}.Run(context.Background(), isolatedHolder(), Reference)
	if err == nil || !strings.Contains(err.Error(), "--target rabbitmq-cluster") {
		t.Errorf("the simulator ran a cluster's plan: %v", err)
	}
}

// isolatedHolder is the hand plan examples/cluster/isolated-holder.json
// (families/amqp/clusters runs it on real clusters).
func isolatedHolder() *Plan {
	p, err := ReadPlan("../../examples/cluster/isolated-holder.json")
	if err != nil {
		panic(err)
	}
	return p
}

// Plans drawn toward every coverage goal of a cluster's faults are valid
// plans: no goal asks for a cluster fault inside one process's operation.
func TestClusterGoalsDrawValidPlans(t *testing.T) {
	c := Config{Scope: prover.Scope{Faults: append(FaultNames(), ClusterFaultNames...)}}
	for _, g := range c.Goals() {
		if slices.Contains(ClusterFaultNames, g.Y) {
			t.Errorf("goal %v asks for a cluster fault inside an operation", g)
		}
	}
}

// Plans drawn for a cluster, freely and toward each goal, are valid: every
// process has a node of the cluster, every fault on a node or link names
// them.
func TestClusterDrawsValidPlans(t *testing.T) {
	cl := &rabbitmq.Cluster{Nodes: []*rabbitmq.Node{{Host: "n1"}, {Host: "n2"}, {Host: "n3"}}}
	c := Config{Scope: prover.Scope{Faults: append(slices.DeleteFunc(FaultNames(), func(f string) bool { return f == histories.RestartBroker }), ClusterFaultNames...)},
		Target: RabbitMQCluster{Cluster: cl}}
	goals := c.Goals()
	onCluster := 0
	rapid.Check(t, func(rt *rapid.T) {
		var p *Plan
		if i := rapid.IntRange(-1, len(goals)-1).Draw(rt, "goal"); i < 0 {
			p = Draw(rt, c)
		} else {
			p = DrawToward(rt, c, goals[i])
		}
		if err := p.Validate(); err != nil {
			rt.Fatalf("%v\n%+v", err, p)
		}
		if !slices.Equal(p.Cluster, []string{"n1", "n2", "n3"}) {
			rt.Fatalf("cluster %v", p.Cluster)
		}
		for _, f := range p.Nemesis {
			if f.OnCluster() {
				onCluster++
			}
		}
	})
	if onCluster == 0 {
		t.Error("no plan drew a fault on the cluster")
	}
}
