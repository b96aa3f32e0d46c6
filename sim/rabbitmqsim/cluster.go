package rabbitmqsim

// The cluster: its options and modes, its nodes and the links between
// them, and the closes its nodes make on their own. Each mechanism has a
// file of its own: links.go (links and failure detection), ignore.go,
// pauseminority.go, autoheal.go and khepri.go (the partition-handling
// modes), lifecycle.go (a node's life), clusterfaults.go (the faults a
// plan strikes the cluster with), records.go (Mnesia's copies of the
// records) and stalls.go (methods held while a node they need is cut off).

import (
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/sched"
)

// ClusterOptions make a World a cluster of RabbitMQ 3.10 nodes (Mnesia
// as the metadata store), as docs/broker-semantics.md section 5 measured
// one: each node has its own copy of the queue records, which the nodes
// it counts as running share; a queue lives on one node (an exclusive
// queue on its owner connection's, any other on the node that declared
// it); a node declares a silent peer down 0.75 to 1.25 NetTicktimes after
// it last heard from it, deletes the records of the queues that lived
// there, and then does what PartitionHandling says. PartitionHandling
// Khepri makes it a cluster of RabbitMQ 4.3 nodes instead, whose records
// are one Raft store (section 6; Khepri).
type ClusterOptions struct {
	// Nodes names the nodes (n1, n2, n3).
	Nodes []string
	// PartitionHandling is the cluster's cluster_partition_handling:
	// Ignore (the default), PauseMinority or Autoheal; or Khepri.
	PartitionHandling string
	// NetTicktime is the nodes' net_ticktime; 0 means 5 s (the cluster
	// target's default, rabbitmq.DefaultNetTicktime).
	NetTicktime time.Duration
	// NodeOf names the node a process connects to; nil, or a name of no
	// node, means the first.
	NodeOf func(process string) string
	// NodeOfConn, if set, names the node a connection dialled with that
	// name (broker.Config.Name) connects to, before NodeOf: one process
	// with connections to several nodes (the differential's driver).
	NodeOfConn func(conn string) string
}

// The partition handling modes (RabbitMQ's cluster_partition_handling).
const (
	Ignore        = "ignore"
	PauseMinority = "pause_minority"
	Autoheal      = "autoheal"
)

// Modes are the modes the simulated cluster has: Mnesia's, then RabbitMQ
// 4.3's Khepri.
var Modes = []string{Ignore, PauseMinority, Autoheal, Khepri}

// A BrokerClose is a connection a node closed on its own (a node pausing
// itself under pause_minority, the loser of an autoheal restarting) or
// lost with its node (killed): what a fault proxy in front of the process
// would have seen.
type BrokerClose struct {
	Process string
	At      int64 // virtual time
	// Code and Text are the connection.close the client got; Code 0
	// means its socket closed with none (a killed node).
	Code int
	Text string
}

// cluster is a World's nodes and the links between them.
type cluster struct {
	w       *World
	o       ClusterOptions
	tick    time.Duration
	nodes   []*node
	cut     [][]bool            // cut[i][j]: node i's packets to node j are dropped
	cuts    map[string][][2]int // each partition in force, by its cut: the directions it cut itself
	stalls  []*stall
	healing *healing // an autoheal under way
	// decided says an autoheal decided since the cluster was last one:
	// only the first decision after a heal may be taken on a partial view
	// (maybeAutoheal).
	decided bool
	// held says no further autoheal decision comes until a node is next
	// declared down or restarted: a decision on a partial view may leave
	// the records split with no node asking again (maybeAutoheal).
	held bool
	// bridged says autoheal drew whether to decide during the bridge in
	// force (autohealBridge), until no bridge is.
	bridged bool
	closes  []BrokerClose
	// store is Khepri's records (Khepri mode only): what a node that
	// has caught up sees.
	store map[string]*queue
	// Khepri mode: the leader of its Raft cluster, nil while none leads
	// (the last one lost its majority and no other is elected yet);
	// deposed, the last one, while an election is under way; election,
	// that election; picked, that the first leader was drawn.
	leader, deposed *node
	election        *sched.Timer
	picked          bool
	// khepri40 is the khepri mode as RabbitMQ 4.0.5 with khepri_db has
	// it (World Options.Version "4.0.5"; khepri40.go).
	khepri40 bool
}

// A node is one RabbitMQ node: its VM, its rabbit application and its
// copy of the records.
type node struct {
	name string
	i    int
	// state is where it is in its life (lifecycle.go); frozen, that its
	// VM is stopped (SIGSTOP), wherever it is in its life.
	state  nodeState
	frozen bool
	// waking is set while a node continued after a pause handles the
	// links its peers closed meanwhile (resume).
	waking bool
	// continued is a node continued after a pause that a peer declared it
	// down in, until the cluster is one again: autoheal's first decision
	// after it may come before its peers list it (maybeAutoheal).
	continued bool
	// unlisted is a node continued under pause_minority, apart from its
	// peers, that neither they nor it count as running for the
	// partial-partition check (sees), until its application starts
	// again (resume; C.23).
	unlisted bool
	view     map[string]*queue // the queue records it sees (rabbit_queue)
	durable  map[string]*queue // its durable queue records (rabbit_durable_queue)
	conn     []bool            // its distribution link to each node is up
	running  []bool            // the nodes it shares its records with
	detect   []*sched.Timer    // a silent peer, until declared down
	// downAt is when it last declared each peer down; attempts, how
	// long after that its attempts to connect to it again began (Khepri
	// mode; 0 until a publish needs it: cluster.publishWaits).
	downAt, attempts []int64
	reconnect        []*sched.Timer // a peer reachable again, until linked
	check            *sched.Timer   // a paused minority looking for a majority
	// Khepri mode: behind says its view no longer follows the store (it
	// lost its majority and has not caught up since); catchup is its
	// catch-up under way; restarted, that it started again since its
	// last catch-up, the queues of its last run not yet deleted; deletes,
	// the deletions of its exclusive queues that wait for it.
	behind, restarted bool
	catchup           *sched.Timer
	deletes           []*ownerDelete
	// ghosts are the names of queues whose process lives on here though
	// their record is gone: deleted through a node that had declared this
	// one down (cluster.leaveGhost).
	ghosts map[string]bool
}

func newCluster(w *World, o ClusterOptions) *cluster {
	cl := &cluster{w: w, o: o, tick: o.NetTicktime, cuts: map[string][][2]int{}}
	if cl.tick <= 0 {
		cl.tick = 5 * time.Second
	}
	if cl.o.PartitionHandling == "" {
		cl.o.PartitionHandling = Ignore
	}
	if cl.khepri() {
		cl.store = map[string]*queue{}
	}
	n := len(o.Nodes)
	for i, name := range o.Nodes {
		x := &node{name: name, i: i, state: nodeRunning,
			view: map[string]*queue{}, durable: map[string]*queue{},
			conn: make([]bool, n), running: make([]bool, n),
			detect: make([]*sched.Timer, n), reconnect: make([]*sched.Timer, n), downAt: make([]int64, n), attempts: make([]int64, n)}
		for j := range n {
			x.conn[j], x.running[j] = j != i, j != i
		}
		cl.nodes = append(cl.nodes, x)
		cl.cut = append(cl.cut, make([]bool, n))
	}
	return cl
}

// node returns the node named name, or nil.
func (cl *cluster) node(name string) *node {
	for _, x := range cl.nodes {
		if x.name == name {
			return x
		}
	}
	return nil
}

// NodeOf names the node process's connections go to when they name none
// (broker.Config.Node): ClusterOptions.NodeOf's, or the first; "" on one
// broker.
func (w *World) NodeOf(name string) string {
	if w.cl == nil {
		return ""
	}
	return w.nodeOf(&process{name: name}, broker.Config{}).name
}

// Nodes names the cluster's nodes, in order; nil on one broker.
func (w *World) Nodes() []string {
	if w.cl == nil {
		return nil
	}
	return slices.Clone(w.cl.o.Nodes)
}

// nodeOf is the node p's connection dialled with cfg connects to: the
// node it names, or by its name (NodeOfConn), or p's (NodeOf), or the
// first; nil on one broker.
func (w *World) nodeOf(p *process, cfg broker.Config) *node {
	if w.cl == nil {
		return nil
	}
	if x := w.cl.node(cfg.Node); x != nil {
		return x
	}
	conn := cfg.Name
	if f := w.cl.o.NodeOfConn; f != nil && conn != "" {
		if x := w.cl.node(f(conn)); x != nil {
			return x
		}
	}
	if w.cl.o.NodeOf != nil {
		if x := w.cl.node(w.cl.o.NodeOf(p.name)); x != nil {
			return x
		}
	}
	return w.cl.nodes[0]
}

// forceClose is c's node closing c on its own (a stop, a kill, a 541):
// the connection is closed for the broker, and the close is kept for the
// history (closes) with its code and text. A connection the broker has
// closed already is left alone: nothing is recorded that did not strike.
func (cl *cluster) forceClose(c *conn, why string, code int, text string) {
	if !c.brokerOpen {
		return
	}
	cl.w.brokerClose(c, why)
	cl.closes = append(cl.closes, BrokerClose{Process: c.p.name, At: cl.w.now, Code: code, Text: text})
}

func nodeNames(ns []*node) string {
	var s []string
	for _, x := range ns {
		s = append(s, x.name)
	}
	return strings.Join(s, ", ")
}

// BrokerCloses lists the connections the cluster's nodes closed on their
// own (BrokerClose), in order; none on one broker.
func (w *World) BrokerCloses() []BrokerClose {
	if w.cl == nil {
		return nil
	}
	return slices.Clone(w.cl.closes)
}

// Listens says whether node's AMQP port takes connections now: a node
// whose broker is stopped, killed, or starting refuses them at once
// (ECONNREFUSED, from a real node), where a paused node's kernel still
// takes them and nothing answers. On one broker, node is "" and the
// broker's own port is meant (down during restart-broker).
func (w *World) Listens(node string) bool {
	if !w.up {
		return false
	}
	if w.cl == nil {
		return true
	}
	x := w.cl.node(node)
	return x == nil || x.frozen || x.appRuns()
}
