package amqprun

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
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
		{"bad mode", func(p *Plan) { p.PartitionHandling = "pause_majority" }, `partition_handling: want ignore, pause_minority, autoheal or khepri, got "pause_majority"`},
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

// The hand plan examples/cluster/isolated-holder.json reaches on the
// simulated cluster the verdicts it reaches on the real one (docs/
// rabbitmq-cluster.md): under ignore and autoheal n2 lets c2
// take the slot c1 still holds through the cut-off n1, and slot-exclusive
// fails, explained in the cluster's terms; under pause_minority n1 closes
// c1's connection when it finds itself alone, before n2 frees the slot,
// and the history records that close as the broker's force-close. The
// probe runs on a cluster made one again, and succeeds.
func TestSimulatedClusterIsolatedHolder(t *testing.T) {
	for _, c := range []struct {
		mode string
		fail bool
	}{{"ignore", true}, {"pause_minority", false}, {"autoheal", true}} {
		res, err := Simulator{PartitionHandling: c.mode}.Run(context.Background(), isolatedHolder(), Reference)
		if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		rep := prover.Judge(res, model.Options{Timeout: time.Minute, Family: []any{amqpcheck.Options{}}})
		v := map[string]verdict.Verdict{}
		for _, x := range rep.Verdicts {
			v[x.Property] = x
		}
		se := v[amqpcheck.SlotExclusive]
		want := "On the cluster (partition handling " + c.mode + "): c1 held it through n1, c2 took it through n2, while the partition at #4 cut n1>n2 n1>n3 n2>n1 n3>n1 (n1 and n2 cut off from each other) and was not healed: n2 had declared n1 down"
		switch {
		case c.fail && (se.Status != verdict.Fail || !strings.Contains(se.Detail, want)):
			t.Errorf("%s: slot-exclusive %s %s\nwant a failure explained: %s", c.mode, se.Status, se.Detail, want)
		case !c.fail && se.Status != verdict.Pass:
			t.Errorf("%s: slot-exclusive %s %s, want pass", c.mode, se.Status, se.Detail)
		}
		for _, prop := range []string{amqpcheck.CountExact, amqpcheck.Persistent, amqpcheck.NoLeak} {
			if v[prop].Status != verdict.Pass {
				t.Errorf("%s: %s %s %s", c.mode, prop, v[prop].Status, v[prop].Detail)
			}
		}
		closed, probed := false, 0
		for _, e := range res.History {
			switch {
			case e.Process == "nemesis" && e.F == histories.ForceClose && e.Type == histories.Info:
				closed = closed || histories.FaultOf(&e).Process == "c1" && strings.Contains(e.Error, "not struck by lockprover") && strings.Contains(e.Error, "320 CONNECTION_FORCED")
			case e.Process == "probe" && e.Type == histories.Ok:
				probed++
			case e.Process == "probe" && e.Type != histories.Invoke:
				t.Errorf("%s: the probe's %s did not succeed: %+v", c.mode, e.F, e)
			}
		}
		if closed != (c.mode == "pause_minority") {
			t.Errorf("%s: the broker's force-close of c1 recorded: %v", c.mode, closed)
		}
		if probed != 6 {
			t.Errorf("%s: %d of the probe's 6 operations succeeded", c.mode, probed)
		}
	}
}

// Plans on the simulated cluster are deterministic: the same plan gives
// the same history, byte for byte, drawn plans with every cluster fault
// as well as the hand plans.
func TestSimulatedClusterSameBytes(t *testing.T) {
	c := Config{Scope: prover.Scope{Faults: append(slices.DeleteFunc(FaultNames(), func(f string) bool { return f == histories.RestartBroker }), ClusterFaultNames...)},
		Target: Simulator{Cluster: []string{"n1", "n2", "n3"}, PartitionHandling: "autoheal"}}
	plans := rapid.Custom(func(t *rapid.T) *Plan { return Draw(t, c) })
	run := func(p *Plan) string {
		res, err := c.Target.Run(context.Background(), p, Reference)
		if err != nil {
			t.Fatalf("%v\n%+v", err, p)
		}
		var b strings.Builder
		histories.Write(&b, res.History)
		return b.String()
	}
	onCluster := 0
	for seed := range 40 {
		p := plans.Example(seed)
		if err := p.Validate(); err != nil {
			t.Fatalf("plan %d: %v", seed, err)
		}
		for _, f := range p.Nemesis {
			if f.OnCluster() {
				onCluster++
			}
		}
		if a, b := run(p), run(p); a != b {
			t.Fatalf("plan %d: two runs differ:\n%s\n---\n%s", seed, a, b)
		}
	}
	if onCluster == 0 {
		t.Error("no plan drew a fault on the cluster")
	}
	for _, file := range []string{"isolated-holder", "bridge", "alp-node-kill"} {
		p, err := ReadPlan("../../../examples/cluster/" + file + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if a, b := run(p), run(p); a != b {
			t.Fatalf("%s: two runs differ:\n%s\n---\n%s", file, a, b)
		}
	}
}

// isolatedHolder is the hand plan examples/cluster/isolated-holder.json
// (adapters/runners/amqprun/clusters runs it on real clusters).
// The hand plan for the true mutex: as the semaphore's, the double hold
// under ignore and autoheal, none under pause_minority; and the holder,
// whose verify asks only its own queue on its own node, is never told
// (on the real cluster: docs/rabbitmq-cluster.md "Verdicts on the cluster").
func TestSimulatedClusterIsolatedMutexHolder(t *testing.T) {
	p, err := ReadPlan("../../../examples/cluster/isolated-mutex-holder.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode string
		fail bool
	}{{"ignore", true}, {"pause_minority", false}, {"autoheal", true}} {
		res, err := Simulator{PartitionHandling: c.mode}.Run(context.Background(), p, Reference)
		if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		rep := prover.Judge(res, model.Options{Timeout: time.Minute, Family: []any{amqpcheck.Options{}}})
		for _, v := range rep.Verdicts {
			if v.Property != amqpcheck.SlotExclusive {
				continue
			}
			switch {
			case c.fail && (v.Status != verdict.Fail || !strings.Contains(v.Detail, "c1 was not told it had lost the slot")):
				t.Errorf("%s: slot-exclusive %s %s, want a failure c1 was not told of", c.mode, v.Status, v.Detail)
			case !c.fail && v.Status != verdict.Pass:
				t.Errorf("%s: slot-exclusive %s %s, want pass", c.mode, v.Status, v.Detail)
			}
		}
	}
}

func isolatedHolder() *Plan {
	p, err := ReadPlan("../../../examples/cluster/isolated-holder.json")
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
