package consulsemrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/internal/realtime"
	"github.com/lockprover/lockprover/sim/consulsim"
	"pgregory.net/rapid"
)

// The targets of plans on a cluster: a private Consul datacenter (three
// servers and a client agent per application node) or a private etcd
// cluster of three members, each process in a network namespace of its
// own (adapters/host/netns), reused by every plan of a run.
const (
	ConsulCluster = "consul-cluster"
	EtcdCluster   = "etcd-cluster"
)

// ClusterBackend is the backend of a cluster target ("" if target is
// none).
func ClusterBackend(target string) string {
	switch target {
	case ConsulCluster:
		return Consul
	case EtcdCluster:
		return Etcd
	}
	return ""
}

// ClusterNodes are the nodes of a cluster of backend, as plans name them:
// Consul's three servers (s1, s2, s3) and two client agents (a1, a2), one
// per application node; etcd's three members (e1, e2, e3)
// (consulsim.ClusterNodes: the simulated cluster's are the same).
func ClusterNodes(backend string) []string { return consulsim.ClusterNodes(kindOf(backend)) }

// appNodes are the nodes of a cluster a client talks to: on Consul its
// node's client agent, as Consul's guide and real deployments have it; on
// etcd one member (its only endpoint, so that a member cut off keeps its
// clients: a client given every endpoint would fail over).
func appNodes(backend string) []string { return consulsim.AppNodes(kindOf(backend)) }

// kindOf is the simulator's kind of backend.
func kindOf(backend string) consulsim.Kind {
	if backend == Etcd {
		return consulsim.Etcd
	}
	return consulsim.Consul
}

// servers are the nodes of a cluster that hold its state (Consul's
// servers, etcd's members).
func servers(backend string) []string {
	if backend == Etcd {
		return ClusterNodes(Etcd)
	}
	return []string{"s1", "s2", "s3"}
}

// Leader is the name a partition's node takes for the cluster's leader
// when it strikes (Consul's leading server, etcd's leading member): the
// history records the links it really cut.
const Leader = "leader"

// The faults a plan on a cluster may hold beside those aimed at one
// client, as --faults names them: a client agent cut off from every other
// node while its application still reaches it (isolate-agent, Consul
// only); a server (member) cut off both ways (isolate-server: on etcd the
// minority, its clients with it); the leader cut off (isolate-leader: an
// election); a server and a client agent cut off together from the
// majority (split, Consul only: the agent's clients with a minority); a
// server killed (SIGKILL) and started again after a while (kill-node),
// paused (SIGSTOP) and continued (pause-node), restarted cleanly
// (restart-node). A plan records each as the fault a history names: a
// partition of a node ("node", or the links "cut"), a pause of the node,
// a restart-broker of the node.
var ClusterFaultNames = run.Listed(run.IsolateAgent, run.IsolateServer, run.IsolateLeader, run.Split, run.KillNode, run.PauseNode, run.RestartNode)

// clusterFaults are ClusterFaultNames that backend's cluster offers.
func clusterFaults(backend string) []string {
	if backend == Etcd {
		return slices.DeleteFunc(slices.Clone(ClusterFaultNames), func(f string) bool { return f == run.IsolateAgent || f == run.Split })
	}
	return slices.Clone(ClusterFaultNames)
}

// ClusterFaults are the cluster faults a target offers (nil for a target
// that is no cluster).
func ClusterFaults(target string) []string {
	if b := ClusterBackend(target); b != "" {
		return clusterFaults(b)
	}
	return nil
}

// onCluster says whether f is aimed at the cluster (a node, or links
// between nodes), not at a client.
func (f Fault) onCluster() bool { return f.Node != "" || f.Cut != "" }

// validateCluster says what is wrong with the plan's cluster and the
// nodes its processes talk to.
func (p *Plan) validateCluster() error {
	if len(p.Cluster) == 0 {
		if len(p.Nodes) > 0 {
			return leaserun.Bad("nodes", "only a plan with a cluster says which node each client talks to")
		}
		return nil
	}
	if want := ClusterNodes(p.Backend); !slices.Equal(p.Cluster, want) {
		return leaserun.Bad("cluster", "a %s cluster's nodes are %s, got %s", p.Backend, strings.Join(want, ", "), strings.Join(p.Cluster, ", "))
	}
	apps := appNodes(p.Backend)
	for _, name := range slices.Sorted(maps.Keys(p.Nodes)) {
		if !slices.Contains(p.processes(), name) {
			return leaserun.Bad("nodes."+name, "want a client of the plan (%s)", strings.Join(p.processes(), ", "))
		}
		if n := p.Nodes[name]; !slices.Contains(apps, n) {
			return leaserun.Bad("nodes."+name, "a client talks to one of %s, not %q", strings.Join(apps, ", "), n)
		}
	}
	return nil
}

// validateClusterFault says what is wrong with a fault aimed at the
// cluster (Node or Cut set).
func (p *Plan) validateClusterFault(f Fault) error {
	switch {
	case len(p.Cluster) == 0:
		return leaserun.Bad(".node", "the plan has no cluster: a fault on a node needs one (cluster)")
	case f.Target != "":
		return leaserun.Bad(".target", "a fault on the cluster (node or cut) names no client")
	case f.Node != "" && f.Cut != "":
		return leaserun.Bad("", "a fault names a node or a cut, not both")
	case f.Cut != "" && f.Fault != histories.Partition:
		return leaserun.Bad(".cut", "only a partition cuts links, not a %s", f.Fault)
	case f.Node == Leader && f.Fault != histories.Partition:
		return leaserun.Bad(".node", "only a partition strikes the leader (whichever it is then), not a %s", f.Fault)
	case f.Node != "" && f.Node != Leader && !slices.Contains(p.Cluster, f.Node):
		return leaserun.Bad(".node", "want a node of the cluster (%s) or %q, got %q", strings.Join(p.Cluster, ", "), Leader, f.Node)
	case f.Node != "" && f.Fault != histories.Partition && f.Fault != histories.Pause && f.Fault != histories.Kill && f.Fault != histories.RestartBroker:
		return leaserun.Bad(".fault", "a node is partitioned, paused, killed or restarted, not struck by a %s", f.Fault)
	case (f.Fault == histories.Kill || f.Fault == histories.RestartBroker) && f.Node != "" && !slices.Contains(servers(p.Backend), f.Node):
		return leaserun.Bad(".node", "a %s strikes a server (%s); a client agent's processes are the clients' own faults", f.Fault, strings.Join(servers(p.Backend), ", "))
	}
	if f.Cut != "" {
		v := histories.Fault{Cut: f.Cut}
		if msg := v.CheckCut(); msg != "" {
			return leaserun.Bad(".cut", "%s", msg)
		}
		for _, d := range v.Directions() {
			for _, n := range d {
				if !slices.Contains(p.Cluster, n) {
					return leaserun.Bad(".cut", "%q is no node of the cluster (%s)", n, strings.Join(p.Cluster, ", "))
				}
			}
		}
	}
	return nil
}

// isolating is the cut that isolates node from every other node of
// cluster, both ways.
func isolating(node string, cluster []string) string { return consulsim.Cut([]string{node}, cluster) }

// splitting is the cut between side and the rest of cluster, both ways.
func splitting(side, cluster []string) string { return consulsim.Cut(side, cluster) }

// nodeOf is the node process name (c1, c1#2, probe1) talks to: its
// client's, as the plan says (the first of the nodes clients may talk to
// when it does not, and for the probe).
func (p *Plan) nodeOf(name string) string {
	client, _, _ := strings.Cut(name, "#")
	if n := p.Nodes[client]; n != "" {
		return n
	}
	return appNodes(p.Backend)[0]
}

// A Cluster is a private cluster of a backend, started for a run
// (StartCluster) and reused by each of its plans, which it leaves whole
// again after each (ready); Stop removes it, its network lab and its
// files.
type Cluster struct {
	Backend string
	// Version is its nodes' version, the zero value for StartCluster's.
	Version versions.Version
	// Took is how long it took to start.
	Took time.Duration
	lab  *netns.Lab
	dir  string
	con  *consul.Cluster
	etc  *etcd.Cluster

	mu    sync.Mutex
	dirty bool // a plan struck it: ready makes it whole before the next
}

// ClusterPreflight says what this machine lacks to start a cluster of
// backend: network namespaces (root, ip) and the server's binary.
func ClusterPreflight(backend string) error {
	if err := netns.Preflight(); err != nil {
		return err
	}
	return Preflight(backend)
}

// StartCluster starts a cluster of backend in a network lab of its own,
// files under a temporary directory, returning once every node answers:
// Consul's servers with raft_multiplier 1 and session_ttl_min 1 s
// (adapters/servers/consul.StartCluster), etcd's members with their default
// 100 ms heartbeat and 1 s election timeout (adapters/servers/etcd.StartCluster).
// made, if set, hears the lab's id and the directory once they exist,
// before any node starts. On a failure, what it started is gone.
func StartCluster(ctx context.Context, backend string, made func(lab, dir string)) (_ *Cluster, err error) {
	return StartClusterVersion(ctx, backend, versions.Version{}, made)
}

// StartClusterVersion is StartCluster of nodes of version v (the zero
// value: StartCluster's): Consul's binary lockprover builds into its
// cache, or etcd from a Debian release's root, each member in its
// node's network namespace.
func StartClusterVersion(ctx context.Context, backend string, v versions.Version, made func(lab, dir string)) (_ *Cluster, err error) {
	if err := ClusterPreflight(backend); err != nil {
		return nil, err
	}
	if err := PreflightVersion(backend, v); err != nil {
		return nil, err
	}
	t0 := time.Now()
	c := &Cluster{Backend: backend, Version: v}
	c.dir, err = os.MkdirTemp("", "lockprover-"+backend+"-cluster-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	c.lab, err = netns.New(ctx, ClusterNodes(backend)...)
	if err != nil {
		return nil, err
	}
	if made != nil {
		made(c.lab.ID, c.dir)
	}
	if backend == Etcd {
		c.etc, err = etcd.StartCluster(ctx, c.lab, c.dir, etcd.Options{Version: v}, ClusterNodes(Etcd)...)
	} else {
		c.con, err = consul.StartCluster(ctx, c.lab, c.dir, consul.Options{SessionTTLMin: time.Second, Version: v}, servers(Consul), appNodes(Consul))
	}
	if err != nil {
		return nil, err
	}
	c.Took = time.Since(t0)
	return c, nil
}

// Lab is the cluster's network lab's id (its namespaces' prefix).
func (c *Cluster) Lab() string { return c.lab.ID }

// Dir is the directory of the nodes' data and logs.
func (c *Cluster) Dir() string { return c.dir }

// ErrLeft marks an error of Stop that left something behind: the lab's
// namespaces or the nodes' files. Stop's other errors say how a node
// stopped (killed after its grace): it is gone all the same.
var ErrLeft = errors.New("left behind")

// Stop heals the lab (a cut-off Consul agent that leaves on SIGTERM
// would wait for its servers), stops every node, closes the lab and
// removes the files.
func (c *Cluster) Stop() error {
	var errs []error
	if c.lab != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.lab.Heal(ctx)
		cancel()
	}
	if c.con != nil {
		errs = append(errs, c.con.Stop())
	}
	if c.etc != nil {
		errs = append(errs, c.etc.Stop())
	}
	if c.lab != nil {
		if err := c.lab.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrLeft, err))
		}
	}
	if c.dir != "" {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrLeft, err))
		}
	}
	return errors.Join(errs...)
}

// addr is the host:port a client on node talks to.
func (c *Cluster) addr(node string) string {
	if c.etc != nil {
		return c.etc.Member(node).Addr
	}
	return c.con.Member(node).Addr
}

// serverAddrs are the servers' (members') addresses, for the run's own
// reads and clean-up: every member of etcd; Consul's first client agent.
func (c *Cluster) serverAddrs() []string {
	if c.etc != nil {
		var out []string
		for _, m := range c.etc.Members {
			out = append(out, m.Addr)
		}
		return out
	}
	return []string{c.con.Clients[0].Addr}
}

// leader is the leading server's node name.
func (c *Cluster) leader(ctx context.Context) (string, error) {
	if c.etc != nil {
		m, err := c.etc.Leader(ctx)
		if err != nil {
			return "", err
		}
		return m.Name, nil
	}
	m, err := c.con.Leader(ctx)
	if err != nil {
		return "", err
	}
	return m.Name, nil
}

// member is node's process, as the backends control it.
type member interface {
	Restart(ctx context.Context, down time.Duration) error
	Crash(ctx context.Context, down time.Duration) error
	Pause() error
	Resume() error
}

func (c *Cluster) member(node string) member {
	if c.etc != nil {
		return c.etc.Member(node)
	}
	return c.con.Member(node)
}

// cut cuts the directions of cut (restore: restores them), silently: the
// lab's router drops the packets.
func (c *Cluster) cut(ctx context.Context, cut string, restore bool) error {
	c.touch()
	v := histories.Fault{Cut: cut}
	for _, d := range v.Directions() {
		var err error
		if restore {
			err = c.lab.Restore(ctx, d[0], d[1])
		} else {
			err = c.lab.Cut(ctx, d[0], d[1])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) touch() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

// ready makes the cluster whole for the next plan, if a plan struck it:
// every link restored, every node continued, and every node agreeing
// (backends' Agreed) within a minute; a node that does not is
// restarted, then every node; an error if the cluster is not whole even
// then.
func (c *Cluster) ready(ctx context.Context) error {
	c.mu.Lock()
	dirty := c.dirty
	c.mu.Unlock()
	if !dirty {
		return nil
	}
	if err := c.lab.Heal(ctx); err != nil {
		return err
	}
	nodes := ClusterNodes(c.Backend)
	for _, n := range nodes {
		c.member(n).Resume()
	}
	agreed := func(limit time.Duration) error { return c.whole(ctx, limit) }
	err := agreed(time.Minute)
	if err != nil {
		// Every node again, each in the background: a Consul agent
		// answers only once a quorum of servers is back.
		errs := make(chan error, len(nodes))
		for _, n := range nodes {
			go func() {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				if rerr := c.member(n).Restart(rctx, 0); rerr != nil {
					errs <- fmt.Errorf("%s would not restart: %w", n, rerr)
					return
				}
				errs <- nil
			}()
		}
		var rerrs []error
		for range nodes {
			rerrs = append(rerrs, <-errs)
		}
		if rerr := errors.Join(rerrs...); rerr != nil {
			return fmt.Errorf("the cluster is not whole (%v), and restarting its nodes: %w", err, rerr)
		}
		if err = agreed(time.Minute); err != nil {
			return fmt.Errorf("the cluster is not whole a minute after every node restarted: %w", err)
		}
	}
	c.mu.Lock()
	c.dirty = false
	c.mu.Unlock()
	return nil
}

func (c *Cluster) agreed(ctx context.Context) error {
	if c.etc != nil {
		return c.etc.Agreed(ctx)
	}
	return c.con.Agreed(ctx)
}

// whole waits until the cluster is whole again (agreed), for limit at
// most, and says why not if it is not by then. On Consul, every 5 s it is
// not, every agent is asked to join the servers again (consul's Rejoin: a
// server cut off alone may otherwise stay out of Serf for minutes), and
// it is whole only once every agent has used each server once, each
// call answered (consul's Flush: a connection to a server restarted
// meanwhile would fail the agent's next write to it, one that stalled
// while the agent was cut off would hold its next calls, K.8).
func (c *Cluster) whole(ctx context.Context, limit time.Duration) error {
	var err error
	nudged := time.Now()
	for end := time.Now().Add(limit); ; realtime.Sleep(ctx, 250*time.Millisecond) {
		if err = c.agreed(ctx); err == nil && c.con != nil {
			err = c.con.Flush(ctx)
		}
		if err == nil || time.Now().After(end) || ctx.Err() != nil {
			return err
		}
		if c.con != nil && time.Since(nudged) > 5*time.Second {
			c.con.Rejoin(ctx)
			nudged = time.Now()
		}
	}
}

// clusterGrace is how long after a fault on a cluster's nodes is over
// its leases may still be renewed by an election (lease.Options
// RestartGrace, with Elections): a new leader gives every session (lease)
// a fresh TTL. Measured here (docs/consul-semaphore.md, K.1 and K.4): a
// new Consul leader 2.0 to 2.7 s after the old one was cut off, a new
// etcd leader 1.1 to 1.2 s after; a healed etcd member, which does not
// pre-vote, may start one more election when it is back. Five seconds
// bounds both with room for a loaded machine; it only lengthens what a
// server may keep (excusing a slow recovery), never a holder's certain
// validity.
const clusterGrace = 5 * time.Second

// nodeBack is how long a node started again may take to answer before the
// nemesis goes on without it (a Consul agent answers once it has joined
// and its servers have a leader, which a node still cut off does not).
const nodeBack = 30 * time.Second

// nodes is where a plan's faults on the cluster's nodes strike: the real
// cluster (*Cluster) or the simulated one (simNodes).
type nodes interface {
	// leader is the leading server's node name, an error while none
	// leads.
	leader(ctx context.Context) (string, error)
	// cut cuts the directions of cut (restore: restores them).
	cut(ctx context.Context, cut string, restore bool) error
	pause(node string) error
	resume(node string) error
	// bounce takes node down (kill: SIGKILL, else SIGTERM) for down and
	// starts it again, returning once it answers.
	bounce(ctx context.Context, node string, kill bool, down time.Duration) error
	// await waits until the cluster agrees again (a leader, every node
	// alive), for a minute at most.
	await(ctx context.Context) error
}

func (c *Cluster) pause(node string) error  { c.touch(); return c.member(node).Pause() }
func (c *Cluster) resume(node string) error { return c.member(node).Resume() }

// bounce waits nodeBack at most for the node to answer: a server started
// again while cut off (another fault) cannot answer until it is healed,
// which the nemesis does; it rejoins when it can (the cluster is made
// whole before the next plan either way).
func (c *Cluster) bounce(ctx context.Context, node string, kill bool, down time.Duration) error {
	c.touch()
	bctx, cancel := context.WithTimeout(ctx, down+nodeBack)
	defer cancel()
	if kill {
		return c.member(node).Crash(bctx, down)
	}
	return c.member(node).Restart(bctx, down)
}

func (c *Cluster) await(ctx context.Context) error { return c.whole(ctx, time.Minute) }

// simNodes is the simulated cluster (consulsim's Options.Cluster) as the
// nemesis strikes it, from its process (sleep is its Sleep, set when it
// starts).
type simNodes struct {
	w     *consulsim.World
	sleep func(time.Duration)
}

func (s *simNodes) leader(context.Context) (string, error) {
	if l := s.w.Leader(); l != "" {
		return l, nil
	}
	return "", errors.New("no leader: an election is under way")
}

func (s *simNodes) cut(_ context.Context, cut string, restore bool) error {
	if restore {
		return s.w.Strike("heal", cut)
	}
	return s.w.Strike("partition", cut)
}

func (s *simNodes) pause(node string) error  { return s.w.Strike("pause", node) }
func (s *simNodes) resume(node string) error { return s.w.Strike("resume", node) }

// bounce: a clean stop takes a simulated node down as a kill does.
func (s *simNodes) bounce(_ context.Context, node string, _ bool, down time.Duration) error {
	if err := s.w.Strike("kill", node); err != nil {
		return err
	}
	s.sleep(down)
	return s.w.Strike("restart-broker", node)
}

// await waits out an election (the simulated cluster's take 2 s at
// most after the fault's end).
func (s *simNodes) await(context.Context) error {
	s.sleep(3 * time.Second)
	if s.w.Leader() == "" {
		return errors.New("no leader 3 s after the faults' end")
	}
	return nil
}

// strikeNode strikes the plan's i-th fault, one on the cluster's nodes,
// as the nemesis (without the runner's lock), or ends it (end: a heal, a
// resume): a partition cuts the links its node (the leader, resolved
// now) or its cut names; a pause stops the node's process; a kill or a
// restart-broker takes the node down for the fault's time and starts it
// again, recorded as a restart-broker of the node in force from before it
// goes down until it answers. Each is recorded with what it really did
// (the links cut), in force from its invoke; a fault that cannot strike
// (no leader to cut off) is neither applied nor recorded; one the lab or
// a node refused ends the run with an error.
func (r *runner) strikeNode(i int, end bool) {
	f, cl, ctx := r.p.Nemesis[i], r.nodes, r.ctx
	if end {
		r.endNode(i)
		return
	}
	var err error
	switch f.Fault {
	case histories.Partition:
		cut := f.Cut
		if f.Node != "" {
			node := f.Node
			if node == Leader {
				if node, err = cl.leader(ctx); err != nil {
					return // an election under way: nothing to cut off
				}
			}
			cut = isolating(node, r.p.Cluster)
		}
		v := &histories.Fault{Cut: cut}
		r.Began(histories.Partition, v)
		err = cl.cut(ctx, cut, false)
		r.Ended(histories.Partition, v, err)
		r.held(i, histories.Fault{Cut: cut})
	case histories.Pause:
		v := &histories.Fault{Process: f.Node}
		r.Began(histories.Pause, v)
		err = cl.pause(f.Node)
		r.Ended(histories.Pause, v, err)
		r.held(i, histories.Fault{Process: f.Node})
	case histories.Kill, histories.RestartBroker:
		down := time.Duration(f.For) * time.Millisecond
		v := &histories.Fault{Process: f.Node}
		r.Began(histories.RestartBroker, v)
		err = cl.bounce(ctx, f.Node, f.Fault == histories.Kill, down)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("not answering %v after it was started again: %w", nodeBack, err)
			r.Ended(histories.RestartBroker, v, err)
			return
		}
		r.Ended(histories.RestartBroker, v, err)
	}
	if err != nil {
		r.failedWith(fmt.Errorf("nemesis[%d]: %s of %s: %w", i, f.Fault, cmp.Or(f.Node, f.Cut), err))
	}
}

// held notes the plan's i-th fault as in force, as v says it.
func (r *runner) held(i int, v histories.Fault) {
	r.w.Lock()
	defer r.w.Unlock()
	if r.struck == nil {
		r.struck = map[int]histories.Fault{}
	}
	r.struck[i] = v
}

// endNode ends the plan's i-th fault if it is in force: a partition's
// links restored (heal), a paused node continued (resume).
func (r *runner) endNode(i int) {
	r.w.Lock()
	v, ok := r.struck[i]
	delete(r.struck, i)
	r.w.Unlock()
	if !ok {
		return
	}
	var err error
	if v.Cut != "" {
		r.Began(histories.Heal, &v)
		err = r.nodes.cut(r.ctx, v.Cut, true)
		r.Ended(histories.Heal, &v, err)
	} else {
		r.Began(histories.Resume, &v)
		err = r.nodes.resume(v.Process)
		r.Ended(histories.Resume, &v, err)
	}
	if err != nil {
		r.failedWith(fmt.Errorf("nemesis[%d]: ending it: %w", i, err))
	}
}

// endNodeFaults ends every fault on the cluster's nodes still in force,
// in the plan's order.
func (r *runner) endNodeFaults() {
	if r.nodes == nil {
		return
	}
	r.w.Lock()
	idx := slices.Sorted(maps.Keys(r.struck))
	r.w.Unlock()
	for _, i := range idx {
		r.endNode(i)
	}
}

// awaitCluster waits, once the plan's faults are over, until the cluster
// agrees again (a leader every server names, every node alive), for at
// most a minute: a cluster that does not is a problem of the run's
// evidence (and is made whole before the next plan).
func (r *runner) awaitCluster() {
	if r.nodes == nil {
		return
	}
	if err := r.nodes.await(r.ctx); err != nil {
		r.failedWith(fmt.Errorf("the cluster did not agree again within a minute of its faults' end: %w", err))
	}
}

// failedWith ends the run with err, no history.
func (r *runner) failedWith(err error) {
	r.w.Lock()
	r.failed = append(r.failed, err)
	r.w.Unlock()
}

// drawNodes draws the node each client of p talks to, on the cluster of
// p's backend.
func drawNodes(t *rapid.T, p *Plan) {
	p.Cluster = ClusterNodes(p.Backend)
	p.Nodes = map[string]string{}
	for _, name := range p.processes() {
		p.Nodes[name] = rapid.SampledFrom(appNodes(p.Backend)).Draw(t, "node_of_"+name)
	}
}

// drawNodeFault draws a fault of the ClusterFaultNames kind on p's
// cluster (a session living up to k TTLs): at a time in the first
// sessions' lives, lasting from a moment to several TTLs and more than
// the failure detectors take (Consul's Serf about 5 s, etcd's election
// 1 s), or until the clients are done.
func drawNodeFault(t *rapid.T, p *Plan, kind string, k int) Fault {
	ttl := p.TTLMs
	f := Fault{At: drawAt(t, k, ttl)}
	lasts := rapid.OneOf(rapid.IntRange(0, 2*ttl), rapid.IntRange(2*ttl, max(12000, 4*k*ttl))).Draw(t, "for_ms")
	srv := rapid.SampledFrom(servers(p.Backend)).Draw(t, "server")
	switch kind {
	case run.IsolateAgent:
		f.Fault, f.Node, f.For = histories.Partition, rapid.SampledFrom(appNodes(p.Backend)).Draw(t, "agent"), lasts
	case run.IsolateServer:
		f.Fault, f.Node, f.For = histories.Partition, srv, lasts
	case run.IsolateLeader:
		f.Fault, f.Node, f.For = histories.Partition, Leader, lasts
	case run.Split:
		agent := rapid.SampledFrom(appNodes(p.Backend)).Draw(t, "agent")
		f.Fault, f.Cut, f.For = histories.Partition, splitting([]string{srv, agent}, p.Cluster), lasts
	case run.KillNode:
		f.Fault, f.Node, f.For = histories.Kill, srv, rapid.IntRange(0, 2*ttl).Draw(t, "down_ms")
	case run.PauseNode:
		f.Fault, f.Node, f.For = histories.Pause, srv, lasts
	case run.RestartNode:
		f.Fault, f.Node, f.For = histories.RestartBroker, srv, rapid.IntRange(0, 2*ttl).Draw(t, "down_ms")
	}
	return f
}

// AppAddr is the address of the first node a client talks to (Consul's
// first client agent; etcd's first member).
func (c *Cluster) AppAddr() string { return c.addr(appNodes(c.Backend)[0]) }
