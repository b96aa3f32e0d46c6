package rabbitmqsim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
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
}

// A node is one RabbitMQ node: its VM, its rabbit application and its
// copy of the records.
type node struct {
	name   string
	i      int
	alive  bool // the VM runs (not killed)
	frozen bool // the VM is stopped (SIGSTOP)
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
	app      bool // the rabbit application runs: it takes connections
	booting  bool // being started or restarted
	// minority is a node that paused itself (pause_minority); all, that
	// it waits for every node, not a majority (a partial partition).
	minority, all bool
	view          map[string]*queue // the queue records it sees (rabbit_queue)
	durable       map[string]*queue // its durable queue records (rabbit_durable_queue)
	conn          []bool            // its distribution link to each node is up
	running       []bool            // the nodes it shares its records with
	detect        []*sched.Timer    // a silent peer, until declared down
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
	// the deletions of its exclusive queues that wait for it; boot, that
	// its broker boots, waiting for Khepri (khepriStart).
	behind, restarted, boot bool
	catchup                 *sched.Timer
	deletes                 []*ownerDelete
	// ghosts are the names of queues whose process lives on here though
	// their record is gone: deleted through a node that had declared this
	// one down (cluster.leaveGhost).
	ghosts map[string]bool
}

// serving says the node takes connections.
func (n *node) serving() bool { return n.alive && n.app && !n.frozen }

// stall is a method held at its connection's node until a node it needs
// (a queue's home, a peer that must take a record's write) is declared
// down or reachable again.
type stall struct {
	p   *process // nil once its process gave up on it
	c   *conn
	r   request
	pre *reply  // a publish routed when sent, confirmed when released
	on  []*node // a publish's queues' homes
	// Khepri mode, a write sent to Khepri: the node it commits through,
	// the queue it deletes (busy meanwhile), whether it is lost, and its
	// KhepriTimeout (cluster.gate).
	by    *node
	kq    *queue
	lost  bool
	timer *sched.Timer
	// Khepri mode, a publish to a queue of a live node out of reach
	// (cluster.publishWaits): waited, that it waited for the node's
	// declaring down; attempt, the end of the connection attempt to
	// that node it waits for since, and failed, that the attempt ended;
	// nack, that it is nacked (pre).
	waited, failed, nack bool
	attempt              *sched.Timer
	// kept is a Khepri write its client gave up on that still commits
	// when its node can (cluster.keepWrite).
	kept bool
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
		x := &node{name: name, i: i, alive: true, app: true,
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

// nodeOf is the node p's connection named conn connects to; nil on one
// broker.
func (w *World) nodeOf(p *process, conn string) *node {
	if w.cl == nil {
		return nil
	}
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

// view is the queue records c's broker sees.
func (w *World) view(c *conn) map[string]*queue {
	if w.cl == nil {
		return w.queues
	}
	return c.node.view
}

// exists says q is still a queue of the broker (on a cluster: of its
// home node).
func (w *World) exists(q *queue) bool {
	if w.cl == nil {
		return w.queues[q.name] == q
	}
	if w.cl.khepri() {
		return w.cl.store[q.name] == q
	}
	return q.home.view[q.name] == q
}

// addQueue records a queue c declared: on a cluster, on c's node, in the
// records of that node and of the nodes it shares them with.
func (w *World) addQueue(c *conn, q *queue) {
	if w.cl == nil {
		w.queues[q.name] = q
		return
	}
	q.home = c.node
	if w.cl.khepri() {
		w.cl.store[q.name] = q
		for _, x := range w.cl.nodes {
			if !x.behind {
				x.view[q.name] = q
				if q.durable {
					x.durable[q.name] = q
				}
			}
		}
		return
	}
	for _, x := range w.cl.group(c.node) {
		x.view[q.name] = q
		if q.durable {
			x.durable[q.name] = q
		}
	}
}

// dropRecord removes q's records: on a cluster, from its home node and
// the nodes that share its records.
func (w *World) dropRecord(q *queue) {
	if w.cl == nil {
		delete(w.queues, q.name)
		return
	}
	if w.cl.khepri() {
		if w.cl.store[q.name] == q {
			delete(w.cl.store, q.name)
		}
		for _, x := range w.cl.nodes {
			if !x.behind && x.view[q.name] == q {
				delete(x.view, q.name)
			}
			if !x.behind && x.durable[q.name] == q {
				delete(x.durable, q.name)
			}
		}
		return
	}
	for _, x := range w.cl.group(q.home) {
		if x.view[q.name] == q {
			delete(x.view, q.name)
		}
		if x.durable[q.name] == q {
			delete(x.durable, q.name)
		}
	}
}

// group is x and the nodes it shares its records with, in order.
func (cl *cluster) group(x *node) []*node {
	out := []*node{x}
	for j, r := range x.running {
		if r {
			out = append(out, cl.nodes[j])
		}
	}
	return out
}

// homeDown is RabbitMQ 3.10's answer for a durable queue whose home node
// c's node has declared down: its record is kept, the queue cannot be
// used nor declared again (broker-semantics.md C.6).
func (w *World) homeDown(c *conn, name string) (reply, bool) {
	d := c.node.durable[name]
	if d == nil || c.node.view[name] == d {
		return reply{}, false
	}
	return chanErr(broker.NotFound, "NOT_FOUND - home node 'rabbit@%s' of durable queue '%s' in vhost '/' is down or inaccessible", d.home.name, name), true
}

// absent is the answer for a queue c's node has no live record of.
func (w *World) absent(c *conn, name string) reply {
	if r, gone := w.homeDown(c, name); gone {
		return r
	}
	return notFound(name)
}

// reach says x and y exchange packets both ways, both running.
func (cl *cluster) reach(x, y *node) bool {
	return x.alive && y.alive && !x.frozen && !y.frozen && !cl.cut[x.i][y.i] && !cl.cut[y.i][x.i]
}

// hears says y's packets reach x.
func (cl *cluster) hears(x, y *node) bool { return y.alive && !y.frozen && !cl.cut[y.i][x.i] }

// cutFrom says x counts y as running but cannot reach it: what x asks of y
// waits until x declares y down, or reaches it again.
func (cl *cluster) cutFrom(x, y *node) bool {
	return y != x && x.running[y.i] && !cl.reach(x, y)
}

// stallIfCut holds p's method r on c while the node it needs is cut off
// from c's node and not yet declared down (a call to a queue's process
// on that node, a record write that node must take), and says whether it
// did: classic queue calls wait with no timeout, and Mnesia transactions
// wait for every node they count as running.
func (w *World) stallIfCut(p *process, c *conn, r *request, deadline int64) bool {
	if w.cl.khepri() {
		return w.khepriHold(p, c, r, deadline)
	}
	s := &stall{p: p, c: c, r: *r}
	if r.m == mBasicPublish {
		targets, _, bad := w.targets(c, r.pub)
		if bad || r.pub.Immediate {
			return false
		}
		var reached []*queue
		for _, q := range targets {
			if w.cl.cutFrom(c.node, q.home) {
				s.on = append(s.on, q.home)
			} else {
				reached = append(reached, q)
			}
		}
		if len(s.on) == 0 {
			return false
		}
		// Routed now (to a queue whose process does not answer), nacked
		// once the node is declared down: the channel's monitor of the
		// queue's process fires (noconnection) and rejects what it had
		// sent there unconfirmed (K.10 on 3.10.8 under ignore: a publish
		// sent at the cut, nacked 5.7 s after it).
		rep := w.deliver(r.pub, reached, true)
		rep.conf.Returned, rep.conf.Acked = false, false
		s.pre = &rep
	} else if !w.cl.waits(c, r) {
		return false
	}
	if w.trace != nil {
		w.tracef("%s %s ch%d %s %s held: a node it needs is cut off from %s", p.name, c.name, chanID(r.ch), r.m, r.queue, c.node.name)
	}
	w.cl.stalls = append(w.cl.stalls, s)
	p.proc.Block()
	if deadline != noDeadline {
		p.deadline = w.sched.At(deadline, func() { w.abandonStall(s) })
	}
	return true
}

// waits says r on c needs a node cut off from c's node.
func (cl *cluster) waits(c *conn, r *request) bool {
	x := c.node
	switch r.m {
	case mQueueDeclare, mQueueDelete, mBasicConsume, mBasicGet, mQueuePurge, mQueueBind:
	default:
		return false
	}
	q := x.view[r.queue]
	if q != nil {
		locked := heldByOther(q, c) || r.m == mQueueDeclare && !r.declare.Passive && r.declare.Exclusive != (q.owner != nil)
		if locked {
			return false // refused on the record alone
		}
		if cl.cutFrom(x, q.home) {
			return true
		}
	}
	write := r.m == mQueueDeclare && !r.declare.Passive && q == nil || r.m == mQueueDelete && q != nil
	if write {
		for j, run := range x.running {
			if run && cl.cutFrom(x, cl.nodes[j]) {
				return true
			}
		}
	}
	return false
}

// abandonStall ends a held method's wait when its context's deadline
// passes, as abandon does for one held by a partition.
func (w *World) abandonStall(s *stall) {
	p, c := s.p, s.c
	if p == nil {
		return
	}
	p.deadline = nil
	s.p = nil
	if w.cl.khepri() {
		w.cl.keepWrite(s)
	}
	err := &broker.Error{Code: broker.FrameError, Reason: "context deadline exceeded; connection torn down", Connection: true}
	w.clientClose(c, err)
	w.fin(c)
	p.proc.Deliver(reply{err: deadlineErr{err}})
}

// failStalls fails the held methods of c, which closed for its client.
func (cl *cluster) failStalls(c *conn, err error) {
	for _, s := range cl.stalls {
		if s.c == c && s.p != nil {
			s.p.deadline.Cancel()
			s.p.proc.Deliver(reply{err: err})
			s.p = nil
		}
	}
}

// retry releases the held methods whose nodes are now declared down or
// reachable, in the order they were sent.
func (cl *cluster) retry() {
	w := cl.w
	held := cl.stalls
	cl.stalls = nil
	for _, s := range held {
		if s.p == nil {
			if s.kept && !cl.commits(s.by) {
				cl.stalls = append(cl.stalls, s)
			} else if s.kept {
				cl.commitKept(s)
			}
			continue
		}
		if s.c.clientErr != nil {
			s.p.deadline.Cancel()
			s.p.proc.Deliver(reply{err: s.c.clientErr})
			continue
		}
		still := false
		switch {
		case cl.khepri():
			still = cl.gate(s)
		case s.pre != nil:
			for _, h := range s.on {
				still = still || cl.cutFrom(s.c.node, h)
			}
		default:
			still = cl.waits(s.c, &s.r)
		}
		if still || s.c.held() {
			cl.stalls = append(cl.stalls, s)
			continue
		}
		p := s.p
		s.p = nil
		if s.timer != nil {
			// A write Khepri commits now.
			s.timer.Cancel()
			s.timer = nil
			if s.kq != nil {
				s.kq.busy = false
			}
		}
		var rep reply
		if s.pre != nil {
			rep = w.answered(s.c, s.r, *s.pre)
		} else {
			rep = w.arrive(s.c, &s.r)
		}
		p.deadline.Cancel()
		p.deadline = nil
		p.proc.Deliver(rep)
		if hook := p.dueHook(); hook != nil {
			hook()
		}
	}
}

// queues lists every queue some node has a record of; on Khepri, every
// queue of the store.
func (cl *cluster) queues() []QueueInfo {
	var qs []*queue
	if cl.khepri() {
		for _, name := range slices.Sorted(maps.Keys(cl.store)) {
			qs = append(qs, cl.store[name])
		}
	} else {
		for _, x := range cl.nodes {
			for _, q := range x.view {
				if !slices.Contains(qs, q) {
					qs = append(qs, q)
				}
			}
		}
	}
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].name != qs[j].name {
			return qs[i].name < qs[j].name
		}
		return qs[i].home.i < qs[j].home.i
	})
	out := make([]QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = q.info()
	}
	return out
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

// detection draws how long a node that stops hearing a peer takes to
// declare it down: 0.75 to 1.25 net_ticktimes in the Mnesia modes (what
// their differential was measured with), 1 to 1.25 on Khepri (OTP's
// net_ticktime with its default tick intensity of 4; K.10 on 4.3.6 and
// 4.0.5: a publish pending on a lost node nacked 5.0 to 6.1 s after the
// cut or the pause, net_ticktime 5 s).
func (cl *cluster) detection() time.Duration {
	if cl.khepri() {
		return cl.tick + cl.tick/16*time.Duration(cl.w.pick(5))
	}
	return cl.tick*3/4 + cl.tick/8*time.Duration(cl.w.pick(5))
}

// update brings the nodes' links up to date with the cuts and the nodes'
// states: a node that stops hearing a peer starts its tick timer, one
// whose peer died or closed their link declares it down at once, two
// nodes that reach each other again link up after a while; then held
// methods are looked at again.
func (cl *cluster) update() {
	for changed := true; changed; {
		changed = false
		for _, x := range cl.nodes {
			for _, y := range cl.nodes {
				switch {
				case x == y:
				case !x.alive || x.frozen || !x.conn[y.i]:
					x.detect[y.i].Cancel()
					x.detect[y.i] = nil
				case !y.alive, !y.conn[x.i] && cl.hears(x, y):
					// y died, or closed the link and x hears it.
					cl.nodedown(x, y)
					changed = true
				case !cl.hears(x, y):
					if x.detect[y.i] == nil {
						x, y := x, y
						d := cl.detection()
						x.detect[y.i] = cl.w.sched.After(d, func() {
							x.detect[y.i] = nil
							if cl.w.trace != nil {
								cl.w.tracef("node %s: no tick from %s for the net_ticktime", x.name, y.name)
							}
							cl.nodedown(x, y)
							cl.update()
						})
					}
				default:
					x.detect[y.i].Cancel()
					x.detect[y.i] = nil
				}
			}
		}
		for _, x := range cl.nodes {
			for _, y := range cl.nodes[x.i+1:] {
				if x.conn[y.i] || y.conn[x.i] || !cl.reach(x, y) {
					x.reconnect[y.i].Cancel()
					x.reconnect[y.i] = nil
					continue
				}
				if x.reconnect[y.i] == nil {
					x, y := x, y
					d := time.Second + 200*time.Millisecond*time.Duration(cl.w.pick(3))
					x.reconnect[y.i] = cl.w.sched.After(d, func() {
						x.reconnect[y.i] = nil
						cl.link(x, y)
						cl.update()
					})
				}
			}
		}
	}
	cl.maybeAutoheal()
	if cl.khepri() {
		cl.khepriSync()
	}
	cl.retry()
}

// link joins x and y's distribution link again; a node paused in a
// minority looks whether it may run again.
func (cl *cluster) link(x, y *node) {
	if !cl.reach(x, y) {
		return
	}
	x.conn[y.i], y.conn[x.i] = true, true
	if cl.w.trace != nil {
		cl.w.tracef("node %s and node %s linked again", x.name, y.name)
	}
	for _, n := range []*node{x, y} {
		if n.minority && n.check == nil {
			n := n
			n.check = cl.w.sched.After(500*time.Millisecond, func() {
				n.check = nil
				cl.recoverMinority(n)
			})
		}
	}
}

// nodedown is x declaring y down: their link is gone, the records of
// y's queues go from x's copy, and x acts on it as its mode says.
func (cl *cluster) nodedown(x, y *node) {
	if !x.conn[y.i] {
		return
	}
	x.conn[y.i] = false
	x.downAt[y.i], x.attempts[y.i] = cl.w.now, 0
	x.detect[y.i].Cancel()
	x.detect[y.i] = nil
	cl.held = false
	if cl.w.trace != nil {
		cl.w.tracef("node %s declares node %s down", x.name, y.name)
	}
	if cl.khepri() {
		return // it deletes no record, pauses not, heals not (K.1, K.2)
	}
	cl.winnerGone(x)
	if h := cl.healing; h != nil && h.unaware && h.winner == y && slices.Contains(h.losers, x) {
		// A loser watching the winner's node monitor sees it go: it starts.
		h.losers = slices.DeleteFunc(h.losers, func(z *node) bool { return z == x })
		cl.w.sched.After(loserRestart, func() {
			if x.alive && !x.app && x.booting {
				cl.startApp(x)
				cl.update()
			}
		})
	}
	cl.onNodeDown(x, y)
	if !x.app {
		return
	}
	if y.alive {
		// A partial partition: a peer whose broker x sees running still
		// sees y (RabbitMQ asks it to call y; a peer cut off from y too
		// answers only once it declares y down, and then says nothing).
		for _, z := range cl.nodes {
			if z == x || z == y || !x.conn[z.i] || !cl.sees(x, z) || !z.conn[y.i] || !cl.sees(z, y) || !cl.reach(x, z) || !cl.reach(z, y) {
				continue
			}
			if cl.pauses(x) {
				cl.pauseMinority(x, true)
				return
			}
			if x.waking && cl.o.PartitionHandling == PauseMinority {
				continue // (it links to them again at once: resume)
			}
			if cl.w.trace != nil {
				cl.w.tracef("node %s: partial partition (%s still sees %s): disconnects from %s", x.name, z.name, y.name, z.name)
			}
			x.conn[z.i], z.conn[x.i] = false, false
			cl.onNodeDown(x, z)
			cl.onNodeDown(z, x)
		}
	}
	if cl.pauses(x) && !cl.majority(x) {
		cl.pauseMinority(x, false)
	}
}

// sees says z counts y's broker as running where RabbitMQ 3.10's
// partial-partition check asks (rabbit_mnesia:cluster_nodes(running), an
// RPC to each node): z shares its records with y, or y's broker runs
// though they share none (y paused and continued under pause_minority,
// apart from its peers, C.16). The node declaring a peer down asks the
// nodes it sees so, and each answers whether it sees the peer so
// (broker-semantics.md C.18; pause_minority 20261127's sequences 87 and
// 289).
func (cl *cluster) sees(z, y *node) bool {
	return z.running[y.i] || y.app && !y.unlisted && !z.unlisted
}

// pauses says whether x, declaring peers down, may pause under
// pause_minority: not while it wakes from a pause (resume), when its
// peers link to it again before it counts them.
func (cl *cluster) pauses(x *node) bool {
	return cl.o.PartitionHandling == PauseMinority && !x.waking
}

// rabbitDown is x no longer counting y as running: RabbitMQ 3.10's
// on_node_down deletes the records of every queue of y, durable ones
// too (their durable records stay).
func (cl *cluster) rabbitDown(x, y *node) {
	if !x.running[y.i] || cl.khepri() {
		return
	}
	x.running[y.i] = false
	for name, q := range x.view {
		if q.home == y {
			delete(x.view, name)
		}
	}
}

// onNodeDown is x declaring y down while x runs: RabbitMQ 3.10's
// on_node_down deletes the records of y's queues in a Mnesia
// transaction, so in every copy shared both ways with x (each counting
// the other as running, linked), and a peer that still reaches y, and
// still counts it as running, loses them too: after a bridge its clients
// get "home node down" for y's durable queues while y serves them
// (conform --cluster, broker-semantics.md C.13). A peer that gave x up
// (x paused, and continued) takes none of it.
func (cl *cluster) onNodeDown(x, y *node) {
	if !x.running[y.i] {
		return
	}
	cl.rabbitDown(x, y)
	for _, z := range cl.group(x)[1:] {
		if !z.running[x.i] || !z.conn[x.i] || !x.conn[z.i] {
			continue
		}
		for name, q := range z.view {
			if q.home == y {
				delete(z.view, name)
			}
		}
	}
}

// majority says x is linked to more than half of the nodes, itself
// counted.
func (cl *cluster) majority(x *node) bool {
	n := 1
	for j, up := range x.conn {
		if up && cl.nodes[j].alive {
			n++
		}
	}
	return 2*n > len(cl.nodes)
}

// pauseMinority stops x's application until it sees a majority again
// (all: every node, after a partial partition).
//
// What waited for the peers x just declared down is answered first: on
// RabbitMQ 3.10 a Mnesia write held by a silent peer commits on x's side
// once x declares it down, and the client is told ok before x's broker
// has stopped (an amqp-locks create through n1, cut off from n2 and n3,
// answered 5.2 s after the cut, n1 closing its connection 55 ms later,
// broker-semantics.md C.14). That record is only in x's copy, which x gives up when it
// starts again (startApp): the write is lost, though its client was told
// ok.
func (cl *cluster) pauseMinority(x *node, all bool) {
	cl.retry()
	if cl.w.trace != nil {
		cl.w.tracef("node %s pauses: pause_minority", x.name)
	}
	x.minority, x.all = true, all
	cl.stopApp(x, false, stopping)
}

// stopping is how long a node pausing itself (pause_minority) takes to
// stop its broker, as its peers see it: until then they count it as
// running, and a peer that asks them of a partial partition meanwhile is
// told of one. Not measured: after a bridge the real cluster paused one
// of the two nodes cut off from each other in two runs, both in a third
// (conform --cluster); with half a second, both happen here, by the
// seed.
const stopping = 500 * time.Millisecond

// recoverMinority starts a paused minority's application again once it
// sees what it waits for.
func (cl *cluster) recoverMinority(x *node) {
	if !x.minority || !x.alive || x.frozen {
		return
	}
	if x.all {
		for j, up := range x.conn {
			if j != x.i && (!up || !cl.nodes[j].alive) {
				return
			}
		}
	} else if !cl.majority(x) {
		return
	}
	x.minority, x.all = false, false
	cl.startApp(x)
	cl.update()
}

// shutdown is the close a node's clients get when its application stops.
const shutdown = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"

// stopApp stops x's rabbit application: its connections are closed
// (320), its transient queues deleted, its peers stop counting it as
// running (peersLater after, for a stop they see take that long). loser is an autoheal's loser, whose exclusive queues are then
// deleted by name in the winner's records too: RabbitMQ 3.10 deletes the
// record of that name, which by then may be another connection's queue
// (broker-semantics.md C.9).
func (cl *cluster) stopApp(x *node, loser bool, peersLater time.Duration) {
	w := cl.w
	if !x.app {
		return
	}
	var names []string
	for name, q := range x.view {
		if q.home == x && q.owner != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	cl.closeConns(x, 320, shutdown)
	cl.dropTransient(x)
	x.app = false
	cl.winnerGone(x)
	for _, z := range cl.nodes {
		cl.rabbitDown(x, z)
		if peersLater == 0 || z == x || !z.running[x.i] {
			cl.rabbitDown(z, x)
			continue
		}
		z, x := z, x
		cl.w.sched.After(peersLater, func() {
			if !x.app {
				cl.rabbitDown(z, x)
				cl.update()
			}
		})
	}
	if loser {
		for _, name := range names {
			for _, z := range cl.nodes {
				if q := z.view[name]; z != x && z.app && q != nil && q.home != x {
					if w.trace != nil {
						w.tracef("node %s restarting deletes the record of %s, %s's queue on %s", x.name, name, q.owner, q.home.name)
					}
					w.deleteQueue(q)
				}
			}
		}
	}
	if w.trace != nil {
		w.tracef("node %s: rabbit stopped", x.name)
	}
}

// closeConns closes every connection to x from the broker's side, the
// client told with code and text (none, code 0: its socket reset).
func (cl *cluster) closeConns(x *node, code int, text string) {
	w := cl.w
	for _, p := range w.procs {
		for _, c := range p.conns {
			if c.node != x || !c.brokerOpen {
				continue
			}
			why := "node " + x.name + " stopped"
			if code == 0 {
				why = "node " + x.name + " killed"
			}
			cl.forceClose(c, why, code, text)
			if code == 0 {
				w.notifyClose(c, errReset)
			} else {
				w.notifyClose(c, &broker.Error{Code: broker.ConnectionForced, Reason: text, Server: true, Connection: true})
			}
		}
	}
}

// dropTransient deletes x's transient queues; its durable ones keep
// their persistent messages only, as after any restart.
func (cl *cluster) dropTransient(x *node) {
	if cl.khepri() {
		cl.khepriDown(x)
		return
	}
	var names []string
	for name, q := range x.view {
		if q.home == x {
			names = append(names, name)
		}
	}
	for name, q := range x.durable {
		if q.home == x && x.view[name] != q {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		q := x.view[name]
		if q == nil || q.home != x {
			q = x.durable[name]
		}
		if q == nil {
			continue
		}
		if !q.durable {
			cl.w.deleteQueue(q)
			continue
		}
		for _, cs := range q.consumers {
			cs.ch.consumers = removeConsumer(cs.ch.consumers, cs)
		}
		q.consumers = nil
		kept := q.msgs[:0]
		for _, persistent := range q.msgs {
			if persistent {
				kept = append(kept, true)
			}
		}
		q.msgs = kept
	}
}

// startApp starts x's rabbit application: it takes the records of the
// first running peer it is linked to (or keeps its own, alone), and its
// durable queues come back in every copy of its group.
func (cl *cluster) startApp(x *node) {
	if cl.khepri() {
		cl.khepriStart(x)
		return
	}
	w := cl.w
	x.app, x.booting = true, false
	x.unlisted = false
	var own []*queue
	for _, name := range slices.Sorted(maps.Keys(x.durable)) {
		if q := x.durable[name]; q.home == x {
			own = append(own, q)
		}
	}
	// It takes its records from a running node it links to. Where those
	// do not share their records (a cluster left split: ignore, or
	// pause_minority after C.16), which side's it takes is the seed's
	// pick, and (but under autoheal, whose next decision restarts the
	// side left apart: C.15) the sides share their writes again from
	// then on, each keeping the records it had: on the real cluster, n3
	// restarted while n2 was split from n1 saw a queue only n2 had
	// recorded (conform seed 20261126, sequence 76), and after such a
	// restart n1 saw a queue declared through n2 (sequence 89); C.17.
	var sides, linked []*node // the first node of each side it could take from; every node
	for _, z := range cl.nodes {
		if z != x && x.conn[z.i] && z.app {
			linked = append(linked, z)
			if !slices.ContainsFunc(sides, func(y *node) bool { return y.running[z.i] }) {
				sides = append(sides, z)
			}
		}
	}
	var from *node
	if len(sides) > 0 {
		// Which node's copy, where copies of one side differ (a node's
		// on_node_down deleted records in a peer's copy but not in a
		// third's, C.13): the seed's pick too (conform seed 20261127,
		// sequence 200: n2, back from a pause, took n3's copy, without
		// n1's queue, where n1 kept it).
		from = linked[cl.w.pick(len(linked))]
		if len(sides) > 1 && cl.o.PartitionHandling != Autoheal {
			if w.trace != nil {
				w.tracef("node %s: takes node %s's records, of %d sides, which share their writes again", x.name, from.name, len(sides))
			}
			for _, y := range cl.nodes {
				for _, z := range cl.nodes {
					if y != z && y != x && z != x && x.conn[y.i] && x.conn[z.i] && y.app && z.app && y.conn[z.i] {
						y.running[z.i] = true
					}
				}
			}
		}
	}
	if from != nil {
		x.view, x.durable = maps.Clone(from.view), maps.Clone(from.durable)
		for j := range x.running {
			x.running[j] = j != x.i && (j == from.i || from.running[j])
		}
		for _, z := range cl.group(x)[1:] {
			z.running[x.i] = true
		}
	} else {
		for name, q := range x.view {
			if q.home == x && !q.durable || q.home != x {
				delete(x.view, name)
			}
		}
	}
	for _, q := range own {
		if from != nil && from.durable[q.name] != q {
			continue // deleted meanwhile
		}
		for _, z := range cl.group(x) {
			z.view[q.name], z.durable[q.name] = q, q
		}
	}
	if w.trace != nil {
		w.tracef("node %s: rabbit started", x.name)
	}
	for _, p := range w.procs {
		w.endDialWait(p)
	}
}

// maybeAutoheal runs an autoheal once every node is linked to every other
// again and the records are split: the side with the most client
// connections wins (then the one with more nodes, then the greatest list
// of node names, as Erlang orders them), and every other node restarts
// its application, taking the winner's records.
//
// The sides are what the leader (the first node) makes of each node's
// list of the nodes it was partitioned from, and the first decision after
// a heal may come before every node has listed every such peer
// (broker-semantics.md C.15): one pair's entry alone splits off one node,
// whichever side of the records it is on (rabbit_autoheal's
// all_partitions). So, by the seed, that decision may set one node
// against the rest; if the records are still split after it, a second
// decision follows on the full view, or (by the seed) none until a node
// is next declared down or restarted: no node asks again. Measured: n3
// cut off one way and healed, n2 (which shared n1's records) restarted
// first in 1 of 3 runs, n3 by a second decision 4.4 s later.
//
// After a node continued from a pause its peers declared it down in, the
// first decision comes at once (0.1 to 1 s after the continue, 5 runs
// with the nodes' logs kept) and may see every node alone (2 of those 5:
// [[n2], [n1], [n3]], C.20), by the seed. Where the continued node loses
// it, the winner, which stopped watching that node's broker when it
// declared it down, never sees it stop and tells no loser to start (it
// waits for all): each loser waits RabbitMQ's
// autoheal_state_transition_timeout, a minute, and starts on its own
// (C.19: 3 of 3 such decisions, serving again 64 to 69 s after the
// continue), unless the winner's broker stops first or the winner
// declares a node down (winnerGone). Where the continued node wins, its
// losers start again at once (2 of 2).
func (cl *cluster) maybeAutoheal() {
	if cl.o.PartitionHandling != Autoheal {
		return
	}
	if cl.one() {
		cl.decided, cl.held = false, false
		for _, x := range cl.nodes {
			x.continued = false
		}
	}
	if cl.healing != nil || cl.held || !cl.allRunning() {
		return
	}
	if z := cl.bridgeNode(); z != nil {
		cl.autohealBridge(z)
		return
	}
	cl.bridged = false
	if !cl.allLinked() {
		return
	}
	sides := cl.sides()
	if len(sides) < 2 {
		return
	}
	partial := ""
	if !cl.decided && cl.w.pick(2) == 1 {
		sides, partial = cl.partialView()
	}
	cl.decided = true
	win := cl.autohealWinner(sides)
	var losers []*node
	for i, s := range sides {
		if i != win {
			losers = append(losers, s...)
		}
	}
	cl.autoheal(sides[win], losers, partial)
}

// allRunning says every node is alive, not frozen, and runs its
// application: where an autoheal can begin.
func (cl *cluster) allRunning() bool {
	for _, x := range cl.nodes {
		if !x.alive || x.frozen || !x.app {
			return false
		}
	}
	return true
}

// allLinked says every node is linked to every other.
func (cl *cluster) allLinked() bool {
	for _, x := range cl.nodes {
		for j, up := range x.conn {
			if j != x.i && !up {
				return false
			}
		}
	}
	return true
}

// partialView is the sides of a decision on a partial view of the
// partitions, by the seed, and a note that says so: one node alone
// against the rest, or, after a continue, every node alone.
func (cl *cluster) partialView() ([][]*node, string) {
	if slices.ContainsFunc(cl.nodes, func(x *node) bool { return x.continued }) && cl.w.pick(2) == 1 {
		var sides [][]*node
		for _, x := range cl.nodes {
			sides = append(sides, []*node{x})
		}
		return sides, " (on a partial view of the partitions: every node alone)"
	}
	y := cl.nodes[cl.w.pick(len(cl.nodes))]
	rest := slices.DeleteFunc(slices.Clone(cl.nodes), func(x *node) bool { return x == y })
	return [][]*node{rest, {y}}, " (on a partial view of the partitions)"
}

// autohealWinner is the index of the side that wins an autoheal among
// sides: the one with the most client connections, then the one with
// more nodes, then the greatest list of node names.
func (cl *cluster) autohealWinner(sides [][]*node) int {
	win := 0
	for i, s := range sides {
		cw, ci := cl.brokerConns(sides[win]), cl.brokerConns(s)
		if ci > cw || ci == cw && (len(s) > len(sides[win]) || len(s) == len(sides[win]) && greater(s, sides[win])) {
			win = i
		}
	}
	return win
}

// brokerConns counts the client connections open at the broker to the
// nodes of side.
func (cl *cluster) brokerConns(side []*node) int {
	n := 0
	for _, p := range cl.w.procs {
		for _, c := range p.conns {
			if c.brokerOpen && slices.Contains(side, c.node) {
				n++
			}
		}
	}
	return n
}

// autoheal runs the decision that winner wins and losers restart, made
// on a partial view if partial (its note) says so. The first decision
// after a continue comes at once (0.1 to 1 s after it), before the
// winner watches the continued node's broker again: a winner does not
// see a continued loser stop (C.19: 3 of 3 such decisions); a continued
// node that wins sees its losers stop (2 of 2).
func (cl *cluster) autoheal(winner, losers []*node, partial string) {
	unaware := slices.ContainsFunc(losers, func(x *node) bool { return x.continued })
	for _, x := range cl.nodes {
		x.continued = false
	}
	h := cl.decide(winner, losers, unaware, partial)
	hold := partial != "" && cl.w.pick(2) == 1
	wait := loserRestart
	if unaware {
		wait += autohealTimeout
		if cl.w.trace != nil {
			cl.w.tracef("autoheal: the winner %s does not see its losers stop; they wait %s", h.winner.name, wait)
		}
	}
	cl.endAfter(h, wait, hold, nil)
}

// endAfter ends h after d (endHealing), then runs then, if any; it
// replaces any end already set.
func (cl *cluster) endAfter(h *healing, d time.Duration, hold bool, then func()) {
	h.done.Cancel()
	h.done = cl.w.sched.After(d, func() {
		h.done = nil
		cl.endHealing(h, hold)
		if then != nil {
			then()
		}
	})
}

// decide stops the losers of an autoheal won by side, each to start
// again when it ends. The winner is the side's node with the greatest
// name: RabbitMQ takes a partition's first node, and lists the nodes of
// each greatest first (in every decision logged, e.g. [[n1], [n3, n2]]).
func (cl *cluster) decide(side, losers []*node, unaware bool, note string) *healing {
	h := &healing{winner: slices.MaxFunc(side, func(a, b *node) int { return strings.Compare(a.name, b.name) }), losers: losers, unaware: unaware}
	cl.healing = h
	if cl.w.trace != nil {
		cl.w.tracef("autoheal: %s win%s", nodeNames(side), note)
	}
	for _, x := range losers {
		cl.stopApp(x, true, 0)
		x.booting = true
	}
	return h
}

// bridgeNode is the node linked to both others while they are not linked
// to each other (a partial partition: a bridge), or nil.
func (cl *cluster) bridgeNode() *node {
	if len(cl.nodes) != 3 {
		return nil
	}
	for _, z := range cl.nodes {
		var pair []*node
		for _, x := range cl.nodes {
			if x != z && x.conn[z.i] && z.conn[x.i] {
				pair = append(pair, x)
			}
		}
		if len(pair) == 2 && !(pair[0].conn[pair[1].i] && pair[1].conn[pair[0].i]) {
			return z
		}
	}
	return nil
}

// autohealBridge is autoheal deciding during a bridge through z, though
// the two other nodes cannot reach each other. Seen once in seven bridges
// (broker-semantics.md C.20; conform seed 20261128, sequence 144, run
// again with the nodes' logs kept): n1 and n3 cut off from each other,
// n1 declared n3 down and, told by the bridge n2 of a partial partition,
// disconnected from n2 and linked to it again; 5 s after that disconnect
// the decision [[n3, n1], [n2]] restarted the bridge, and 1.4 s later
// [[n1], [n3, n2]] restarted n1. In the six others (2026-11-26) the
// leader's request during the bridge was denied (a node down, or a peer
// reporting one) and autoheal decided after the heal. So, by the seed
// (drawn once a bridge, while the records are split), the bridge
// restarts and then the cut-off node with the lesser name, the one with
// the greater name winning both; or autoheal waits for the heal.
func (cl *cluster) autohealBridge(z *node) {
	if cl.bridged {
		return
	}
	cl.bridged = true
	if len(cl.sides()) < 2 || cl.w.pick(2) == 0 {
		return
	}
	var pair []*node
	for _, x := range cl.nodes {
		if x != z {
			pair = append(pair, x)
		}
	}
	w, x := pair[1], pair[0] // by name, as Erlang orders them: the greatest wins
	if w.name < x.name {
		w, x = x, w
	}
	note := " (during a partial partition: " + x.name + " and " + w.name + " cut off from each other)"
	// Each decision stops its loser, which starts 0.4 s later; each comes
	// only while the bridge and every broker still stand.
	var step func(side []*node, loser *node, after time.Duration, next func())
	step = func(side []*node, loser *node, after time.Duration, next func()) {
		cl.w.sched.After(after, func() {
			if cl.healing != nil || !w.app || !x.app || !z.app || cl.bridgeNode() != z {
				return
			}
			cl.endAfter(cl.decide(side, []*node{loser}, false, note), loserRestart, false, next)
		})
	}
	step([]*node{w, x}, z, bridgeDecision, func() { step([]*node{w, z}, x, time.Second, nil) })
}

// bridgeDecision is how long after a bridge's cut-off node links to the
// bridge again autoheal decides: measured once, 5 s after that node's
// disconnect (C.20), which links again 1 to 1.4 s after it.
const bridgeDecision = 3600 * time.Millisecond

// loserRestart is how long an autoheal's loser, told to start, takes to
// serve again here. The real ones took 4.1 s on a quiet machine (C.15)
// and 6.6 to 11.7 s at a load average of 27 (C.19); the differential
// waits for every node to serve before it looks again, and a plan's
// checks see a node that refuses either way.
const loserRestart = 400 * time.Millisecond

// autohealTimeout is RabbitMQ's autoheal_state_transition_timeout: how
// long an autoheal's loser waits for its winner's word before it starts
// on its own (60 s by default; broker-semantics.md C.19: serving again
// 64 to 69 s after the continue).
const autohealTimeout = time.Minute

// healing is an autoheal under way: its winner, and its losers, stopped
// until they start again (endHealing).
type healing struct {
	winner *node
	losers []*node
	// unaware says the winner does not see the losers stop (a continued
	// node among them): they wait autohealTimeout, or until the winner's
	// broker stops or the winner declares a node down.
	unaware bool
	done    *sched.Timer
}

// endHealing starts the losers of h, an autoheal that ends: its winner
// told them to, or (unaware) they stopped waiting. hold says no node asks
// again if the records are still split.
func (cl *cluster) endHealing(h *healing, hold bool) {
	if cl.healing != h {
		return
	}
	h.done.Cancel()
	cl.healing = nil
	for _, x := range h.losers {
		if x.alive && !x.app {
			cl.startApp(x)
		}
	}
	if hold && !cl.one() {
		cl.held = true
		if cl.w.trace != nil {
			cl.w.tracef("autoheal: no node asks again; the records stay split")
		}
	}
	cl.update()
}

// winnerGone ends an unaware autoheal whose winner x stopped its broker or
// declared a node down: its losers start at once (a loser watches the
// winner's node monitor; a winner that sees a node down gives up and
// tells its losers to start).
func (cl *cluster) winnerGone(x *node) {
	if h := cl.healing; h != nil && h.unaware && h.winner == x {
		if cl.w.trace != nil {
			cl.w.tracef("autoheal: the winner %s gives up; its losers start", x.name)
		}
		cl.endAfter(h, loserRestart, false, nil)
		h.unaware = false
	}
}

// greater says side a comes after side b in Erlang's order of lists of
// node names, each listed greatest first (RabbitMQ's tie-break between
// partitions alike).
func greater(a, b []*node) bool {
	names := func(side []*node) []string {
		var out []string
		for _, x := range side {
			out = append(out, x.name)
		}
		slices.Sort(out)
		slices.Reverse(out)
		return out
	}
	return slices.Compare(names(a), names(b)) > 0
}

// sides are the groups of running nodes that share their records, the
// first node's first.
func (cl *cluster) sides() [][]*node {
	var out [][]*node
	seen := make([]bool, len(cl.nodes))
	for _, x := range cl.nodes {
		if seen[x.i] || !x.app {
			continue
		}
		var side []*node
		for _, z := range cl.group(x) {
			if !seen[z.i] && z.app {
				seen[z.i] = true
				side = append(side, z)
			}
		}
		out = append(out, side)
	}
	return out
}

func nodeNames(ns []*node) string {
	var s []string
	for _, x := range ns {
		s = append(s, x.name)
	}
	return strings.Join(s, ", ")
}

// one says the cluster is one again: every node up, linked to and
// sharing its records with every other.
func (cl *cluster) one() bool {
	for _, x := range cl.nodes {
		if !x.alive || x.frozen || !x.app || x.booting || x.behind {
			return false
		}
		for j := range cl.nodes {
			if j != x.i && (!x.conn[j] || !x.running[j]) {
				return false
			}
		}
	}
	return true
}

// booting says a node is being started or restarted.
func (cl *cluster) booting() bool {
	for _, x := range cl.nodes {
		if x.booting {
			return true
		}
	}
	return false
}

// strikeCluster applies a fault aimed at a node or at links between
// nodes; handled says whether target was one.
func (w *World) strikeCluster(fault, target string) (handled bool, err error) {
	cl := w.cl
	x := cl.node(target)
	cut := strings.Contains(target, ">")
	switch {
	case target == "" && (fault == "restart-broker" || fault == "stop-broker" || fault == "start-broker"):
		return true, errNoBroker
	case x == nil && !cut:
		return false, nil
	}
	var dirs [][2]int
	if cut {
		if dirs, err = cl.directions(target); err != nil {
			return true, err
		}
	}
	apply := func() (reply, bool) {
		switch {
		case cut && fault == "partition":
			cl.partition(target, dirs)
		case cut && fault == "heal":
			cl.heal(target)
		case cut:
			return reply{err: fmt.Errorf("sim: %s cannot strike the links %s", fault, target)}, false
		case fault == "kill":
			cl.kill(x)
		case fault == "pause":
			cl.pause(x)
		case fault == "resume":
			cl.resume(x)
		case fault == "restart-broker":
			return reply{}, cl.restart(x)
		default:
			return reply{err: fmt.Errorf("sim: %s cannot strike node %s", fault, target)}, false
		}
		return reply{}, false
	}
	if caller := w.sched.Running(); caller != nil {
		return true, caller.call(&request{kind: reqFault, deadline: noDeadline, fault: func() (reply, bool) {
			rep, block := apply()
			if block && !x.booting {
				return rep, false
			}
			if block {
				cl.whenBooted(x, func() { caller.proc.Deliver(reply{}) })
			}
			return rep, block
		}}).err
	}
	rep, _ := apply()
	return true, rep.err
}

// directions parses a cut ("n1>n2 n2>n1").
func (cl *cluster) directions(cut string) ([][2]int, error) {
	var out [][2]int
	for _, d := range strings.Fields(cut) {
		from, to, ok := strings.Cut(d, ">")
		a, b := cl.node(from), cl.node(to)
		if !ok || a == nil || b == nil || a == b {
			return nil, fmt.Errorf("sim: %q is not a direction between two nodes of the cluster", d)
		}
		out = append(out, [2]int{a.i, b.i})
	}
	return out, nil
}

// cutBy says a partition in force has cut direction d.
func (cl *cluster) cutBy(d [2]int) bool {
	for _, made := range cl.cuts {
		if slices.Contains(made, d) {
			return true
		}
	}
	return false
}

// partition drops the packets of each direction of the cut, silently;
// like the cluster target, it records only the directions it cut itself,
// and its heal restores only those.
func (cl *cluster) partition(cut string, dirs [][2]int) {
	var made [][2]int
	for _, d := range dirs {
		if cl.cutBy(d) {
			continue
		}
		cl.cut[d[0]][d[1]] = true
		made = append(made, d)
	}
	cl.cuts[cut] = append(cl.cuts[cut], made...)
	if cl.w.trace != nil {
		cl.w.tracef("cut %s", cut)
	}
	cl.update()
}

func (cl *cluster) heal(cut string) {
	made := cl.cuts[cut]
	delete(cl.cuts, cut)
	for _, d := range made {
		if !cl.cutBy(d) {
			cl.cut[d[0]][d[1]] = false
		}
	}
	if cl.w.trace != nil {
		cl.w.tracef("healed %s", cut)
	}
	cl.update()
}

// kill kills x's VM: its clients' sockets reset, its peers notice at
// once, its transient queues are gone.
func (cl *cluster) kill(x *node) {
	if !x.alive {
		return
	}
	if cl.w.trace != nil {
		cl.w.tracef("node %s killed", x.name)
	}
	if cl.khepri() {
		x.alive = false // (its exclusive queues die with it: ownerGone)
	}
	cl.closeConns(x, 0, "")
	cl.dropTransient(x)
	cl.winnerGone(x)
	x.alive, x.app, x.frozen, x.minority, x.all = false, false, false, false, false
	x.check.Cancel()
	x.check = nil
	for _, z := range cl.nodes {
		cl.rabbitDown(x, z)
		x.conn[z.i] = false
	}
	for _, p := range cl.w.procs {
		cl.w.endDialWait(p)
	}
	cl.update()
}

// pause stops x's VM (SIGSTOP): it answers no one, client or peer, and
// its own timers stand still.
func (cl *cluster) pause(x *node) {
	if !x.alive || x.frozen {
		return
	}
	if cl.w.trace != nil {
		cl.w.tracef("node %s paused", x.name)
	}
	x.frozen = true
	x.check.Cancel()
	x.check = nil
	for _, p := range cl.w.procs {
		for _, c := range p.conns {
			if c.node == x {
				cl.w.sense(c)
			}
		}
	}
	cl.update()
}

// resume continues x's VM: what its clients sent meanwhile arrives, and
// it hears at once of the peers that gave it up.
func (cl *cluster) resume(x *node) {
	if !x.frozen {
		return
	}
	if cl.w.trace != nil {
		cl.w.tracef("node %s resumed", x.name)
	}
	x.frozen = false
	for _, y := range cl.nodes {
		if y != x && y.alive && !y.conn[x.i] {
			x.continued = true
		}
	}
	for _, p := range cl.w.procs {
		for _, c := range p.conns {
			if c.node == x && !c.down {
				cl.w.heal(c)
			}
		}
		cl.w.endDialWait(p)
	}
	if x.minority {
		cl.recoverMinority(x)
	}
	// Under pause_minority a node continued after its peers declared it
	// down hears their links closed, and either they link to it again
	// before it counts them, or it counts them gone first (C.23), by the
	// seed. Linked again, it does not pause, and its records stay apart
	// from theirs (a partition listed, which pause_minority never
	// merges): on the real cluster (conform seed 20261127, sequence 38)
	// n1, continued after 10 s, logged its peers down and Mnesia's
	// partitioned network within 0.05 s, and no pause; a delete through
	// n2 of n1's durable queue got 404 "home node down" 10 s later
	// (C.16). And then the partial-partition check may still count it as
	// running, through their RPCs to its broker (C.18), or not at all
	// (unlisted: C.23). Counting them gone, it pauses itself (its
	// minority) and, linked again at once, starts again 0.5 s later with
	// their records (C.23: serving 1.2 s after the continue, seeing a
	// queue declared through n3 while it was paused).
	x.waking = true
	if cl.o.PartitionHandling == PauseMinority && x.continued {
		switch cl.w.pick(3) {
		case 1:
			x.unlisted = true
		case 2:
			x.waking = false
			if cl.w.trace != nil {
				cl.w.tracef("node %s counts its peers gone before they link to it again", x.name)
			}
		}
		x.continued = false // (read by autoheal only: done with here)
	}
	cl.update()
	x.waking = false
	if cl.o.PartitionHandling == PauseMinority {
		for _, y := range cl.nodes {
			if y != x && !x.conn[y.i] && y.alive && !y.frozen && cl.reach(x, y) {
				cl.link(x, y)
			}
		}
		cl.update()
	}
}

// restart restarts x (stopped cleanly, started again after the World's
// restart downtime), or starts it if it was killed; it says the restart
// is under way.
func (cl *cluster) restart(x *node) bool {
	if x.booting {
		return true
	}
	if x.frozen {
		cl.resume(x)
	}
	if cl.w.trace != nil {
		cl.w.tracef("node %s restarting", x.name)
	}
	if x.alive {
		cl.stopApp(x, false, 0)
	}
	x.minority, x.all = false, false
	x.booting = true
	cl.held = false
	cl.update()
	cl.w.sched.After(cl.w.downtime, func() {
		if !x.alive {
			x.alive = true
			for _, z := range cl.nodes {
				if z != x && cl.reach(x, z) {
					x.conn[z.i], z.conn[x.i] = true, true
				}
			}
		}
		cl.startApp(x)
		cl.update()
	})
	return true
}

// whenBooted runs f once x is no longer booting.
func (cl *cluster) whenBooted(x *node, f func()) {
	if !x.booting {
		f()
		return
	}
	cl.w.sched.After(10*time.Millisecond, func() { cl.whenBooted(x, f) })
}

// answered is what the client of c gets for r, a method the broker
// answered with rep (a publish confirmed late), as arrive would.
func (w *World) answered(c *conn, r request, rep reply) reply {
	w.now += int64(rep.cost)
	c.lastRecv = w.now
	if w.trace != nil {
		w.tracef("%s %s ch%d %s %s -> %s", c.p.name, c.name, chanID(r.ch), r.m, r.queue, describe(r.m, rep))
	}
	return rep
}

// BrokerCloses lists the connections the cluster's nodes closed on their
// own (BrokerClose), in order; none on one broker.
func (w *World) BrokerCloses() []BrokerClose {
	if w.cl == nil {
		return nil
	}
	return slices.Clone(w.cl.closes)
}

// Settle brings a cluster back to one, as the cluster target does after a
// plan's faults: every cut healed, every node continued and started;
// then, if two net_ticktimes and 10 s later the nodes still do not share
// their records (ignore never merges them), the side given up (every
// node outside the largest side, the first node's on a tie) is
// restarted, as RabbitMQ's docs tell an operator to. From a process it
// returns once the cluster is one again; it fails if restarting every
// node did not make it one.
func (w *World) Settle() error {
	cl := w.cl
	if cl == nil {
		return nil
	}
	caller := w.sched.Running()
	if caller == nil {
		return fmt.Errorf("sim: Settle runs in a process")
	}
	return caller.call(&request{kind: reqFault, deadline: noDeadline, fault: func() (reply, bool) {
		if w.trace != nil {
			w.tracef("settling the cluster")
		}
		for _, cut := range slices.Sorted(maps.Keys(cl.cuts)) {
			cl.heal(cut)
		}
		for _, x := range cl.nodes {
			switch {
			case x.frozen:
				cl.resume(x)
			case !x.alive:
				cl.restart(x)
			}
		}
		if cl.one() {
			return reply{}, false
		}
		stage := 0
		var poll func(until int64)
		poll = func(until int64) {
			switch {
			case cl.one():
				caller.proc.Deliver(reply{})
				return
			case w.now < until:
				w.sched.After(100*time.Millisecond, func() { poll(until) })
				return
			}
			stage++
			var given []*node
			switch stage {
			case 1:
				given = cl.givenUp()
			case 2:
				given = cl.nodes
			default:
				caller.proc.Deliver(reply{err: fmt.Errorf("sim: the cluster is still split after restarting every node")})
				return
			}
			for _, x := range given {
				if w.trace != nil {
					w.tracef("settle: the operator restarts node %s", x.name)
				}
				cl.restart(x)
			}
			poll(w.now + int64(time.Minute))
		}
		w.sched.After(100*time.Millisecond, func() { poll(w.now + int64(2*cl.tick+10*time.Second)) })
		return reply{}, true
	}}).err
}

// givenUp are the nodes outside the largest side (the first node's on a
// tie); the nodes but the first if none.
func (cl *cluster) givenUp() []*node {
	var kept []*node
	for _, s := range cl.sides() {
		if len(s) > len(kept) {
			kept = s
		}
	}
	var out []*node
	for _, x := range cl.nodes {
		if !slices.Contains(kept, x) {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		out = cl.nodes[1:]
	}
	return out
}
