package consulsemrun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// A plan on a cluster is read as strictly as any: its nodes are the
// backend's, each client talks to a node a client may talk to, and each
// fault on the cluster names a node that can take it (a server for a
// kill or a restart, the leader only for a partition) or a cut of the
// cluster's own links.
func TestReadClusterPlanErrors(t *testing.T) {
	t.Parallel()
	good := `{"version":1,"kind":"consul-semaphore","prefix":"lp","backend":"consul","limit":1,"ttl_ms":1000,` +
		`"clients":[[{"op":"acquire"}],[{"op":"acquire"}]],"cluster":["s1","s2","s3","a1","a2"],"nodes":{"c1":"a1","c2":"a2"},` +
		`"nemesis":[{"at_ms":5,"fault":"partition","node":"a1","for_ms":100},{"at_ms":5,"fault":"kill","node":"s2","for_ms":100},` +
		`{"at_ms":9,"fault":"partition","cut":"s1>s2 a2>s3"}],"schedule":[],"schedule_seed":0}`
	for _, c := range []struct{ name, from, to, want string }{
		{"good", "", "", ""},
		{"leader", `"node":"a1"`, `"node":"leader"`, ""},
		{"nodes of etcd", `"backend":"consul"`, `"backend":"etcd"`, "cluster"},
		{"missing node", `"s1","s2","s3","a1","a2"`, `"s1","s2","a1","a2"`, "cluster"},
		{"client on a server", `"c2":"a2"`, `"c2":"s2"`, "nodes.c2"},
		{"no such client", `"c2":"a2"`, `"c9":"a2"`, "nodes.c9"},
		{"unknown node", `"node":"a1"`, `"node":"a7"`, "nemesis[0].node"},
		{"pause the leader", `"fault":"partition","node":"a1"`, `"fault":"pause","node":"leader"`, "nemesis[0].node"},
		{"kill an agent", `"node":"s2"`, `"node":"a2"`, "nemesis[1].node"},
		{"node and target", `"node":"a1"`, `"node":"a1","target":"c1"`, "nemesis[0].target"},
		{"node and cut", `"node":"a1"`, `"node":"a1","cut":"s1>s2"`, "nemesis[0]"},
		{"cut unknown", `"cut":"s1>s2 a2>s3"`, `"cut":"s1>s9"`, "nemesis[2].cut"},
		{"cut a kill", `"fault":"partition","cut"`, `"fault":"pause","cut"`, "nemesis[2].cut"},
		{"drop-reply on a node", `"fault":"kill","node":"s2","for_ms":100`, `"fault":"drop-reply","node":"s2"`, "nemesis[1].fault"},
		{"server restart", `"fault":"kill","node":"s2","for_ms":100`, `"fault":"restart-broker"`, "nemesis[1].node"},
		{"node without cluster", `"cluster":["s1","s2","s3","a1","a2"],"nodes":{"c1":"a1","c2":"a2"},`, ``, "nemesis[0].node"},
		{"nodes without cluster", `"cluster":["s1","s2","s3","a1","a2"],`, ``, "nodes"},
	} {
		path := filepath.Join(t.TempDir(), "plan.json")
		os.WriteFile(path, []byte(strings.Replace(good, c.from, c.to, 1)), 0o644)
		_, err := ReadPlan(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path+":")):
			t.Errorf("%s: got %v, want an error naming %s and %q", c.name, err, path, c.want)
		}
	}
}

// The hand plans of examples/cluster run on the simulated cluster and
// reach the real clusters' verdicts (docs/consul-semaphore.md, "Hand
// plans and verdicts on the clusters"): the reference holds on each; the
// mutant consul-monitor-forever, whose verify says held when its agent
// does not answer, fails aware on consul-isolated-agent. A single server
// refuses them, naming the target that runs them.
func TestClusterPlansOnTheSimulator(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, mutant, fails string }{
		{"consul-isolated-agent", "", ""},
		{"consul-isolated-agent", "consul-monitor-forever", "aware"},
		{"etcd-isolated-holder", "", ""},
		{"etcd-leader-election", "", ""},
	} {
		p, err := ReadPlan(filepath.Join("..", "..", "..", "examples", "cluster", c.name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		p.Mutant = c.mutant
		res, err := Simulate(p, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		conf := Config{Backend: p.Backend, SimCluster: true, Scope: prover.Scope{Mutant: c.mutant}}
		for _, v := range prover.Judge(res, model.Options{Family: []any{conf.Judging("")}}).Verdicts {
			if (v.Status == verdict.Fail) != (v.Property == c.fails) {
				t.Errorf("%s %s: %s %v", c.name, c.mutant, v.Property, v.Status)
			}
		}
		if err := checkReal(p, nil, false); err == nil || !strings.Contains(err.Error(), "--target "+p.Backend+"-cluster") {
			t.Errorf("%s on a single server: %v, want an error naming its cluster target", c.name, err)
		}
	}
}

// Plans drawn for a cluster are valid, give every client a node, and
// draw each fault on the nodes the backend offers (etcd has no client
// agents, so no isolate-agent nor split), alone or beside the clients'
// faults; a cluster's plans run alone and are judged with elections.
func TestClusterDraws(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{Consul, Etcd} {
		c := Config{Backend: backend, Target: backend, Cluster: &Cluster{Backend: backend}}
		seen := map[string]bool{}
		gen := rapid.Custom(func(t *rapid.T) *Plan { return c.Draw(t).(*Plan) })
		for i := range 200 {
			p := gen.Example(i)
			if err := p.Validate(); err != nil {
				t.Fatalf("%s: %v", backend, err)
			}
			if !slices.Equal(p.Cluster, ClusterNodes(backend)) || len(p.Nodes) != len(p.Clients) {
				t.Fatalf("%s: cluster %v, nodes %v for %d clients", backend, p.Cluster, p.Nodes, len(p.Clients))
			}
			if !c.Alone(p) {
				t.Fatal("a plan on a cluster must run alone")
			}
			for _, f := range p.Nemesis {
				switch {
				case f.Fault == histories.RestartBroker && f.Node == "":
					t.Fatalf("a restart of no node on a cluster: %+v", f)
				case f.Node == "a1" || f.Node == "a2" || strings.Contains(f.Cut, "a1") || strings.Contains(f.Cut, "a2"):
					seen["agent"] = true
				case f.Node == Leader:
					seen["leader"] = true
				case f.Node != "":
					seen[f.Fault] = true
				}
			}
		}
		for _, want := range []string{"leader", histories.Partition, histories.Pause, histories.Kill, histories.RestartBroker} {
			if !seen[want] {
				t.Errorf("%s: 200 plans drew no fault on a node of kind %s (drew %v)", backend, want, seen)
			}
		}
		if seen["agent"] != (backend == Consul) {
			t.Errorf("%s: faults on a client agent drawn: %v", backend, seen["agent"])
		}
		o := c.Judging("").(lease.Options)
		if !slices.Equal(o.Elections, servers(backend)) || o.RestartGrace != clusterGrace {
			t.Errorf("%s: judged with %+v, want elections and the cluster's grace", backend, o)
		}
	}
}

// Plans drawn for the simulated cluster run on it, and the same plan
// gives the same run byte for byte (its trace and its history).
func TestSimClusterSamePlanSameRun(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{Consul, Etcd} {
		c := Config{Backend: backend, SimCluster: true}
		gen := rapid.Custom(func(t *rapid.T) *Plan { return c.Draw(t).(*Plan) })
		struck := 0
		for i := range 40 {
			p := gen.Example(i)
			if len(p.Cluster) == 0 {
				t.Fatalf("%s: a plan for the simulated cluster without one", backend)
			}
			var runs [2]string
			for j := range 2 {
				var trace strings.Builder
				res, err := Simulate(p, &trace)
				if err != nil {
					t.Fatalf("%s plan %d: %v", backend, i, err)
				}
				var h strings.Builder
				histories.Write(&h, res.History)
				runs[j] = trace.String() + h.String()
				if j == 0 && strings.Contains(trace.String(), "cluster: ") {
					struck++
				}
			}
			if runs[0] != runs[1] {
				t.Fatalf("%s plan %d: two runs differ", backend, i)
			}
		}
		if struck == 0 {
			t.Errorf("%s: no plan of 40 struck the cluster", backend)
		}
	}
}
