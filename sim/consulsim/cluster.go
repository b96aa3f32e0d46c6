package consulsim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
)

// The simulated cluster (Options.Cluster): a Consul datacenter of three
// servers (s1, s2, s3) and two client agents (a1, a2), or an etcd cluster
// of three members (e1, e2, e3), as the real cluster targets run them
// (docs/consul-semaphore.md, "On clusters"). The World's one server is
// the cluster's replicated state, as the majority holds it; the cluster
// adds the nodes, the links between them, the leader, and what each
// client's node can reach, which is all the recipe's calls can observe:
//
//   - the majority's side is the set of live, running nodes joined by
//     links uncut both ways that holds two of the three servers; a call
//     takes effect only through it: an etcd client's member must be on
//     it, a Consul client's agent must have a link to a server on it.
//     A call that cannot is held, with no answer (K.2, K.3), until its
//     node can again (then it takes effect, unless its client has given
//     up meanwhile: then never); a call to a member that is down is
//     refused;
//   - a stale listing (Consul ?stale, etcd serializable) whose node
//     cannot reach the majority but reaches a server cut off from it is
//     answered from that server's state as it was when it was cut off:
//     the old value (K.5). A consistent one gets no answer;
//   - a leader: when it leaves the majority's side (cut off, paused,
//     killed), a new one is elected, ElectionDelay later, among the
//     servers on that side (Options.Decide picks); calls wait meanwhile.
//     A new leader gives every session a fresh TTL (Consul: its timer
//     starts again, K.4; etcd: the lessor's Promote, TTL plus an election
//     timeout, K.1) and, on Consul, forgets the lock-delays (they live in
//     the leader's memory);
//   - Consul: an agent off the majority's side is declared failed by the
//     servers (K.3), which ends no session the recipe makes: consulsem
//     creates them with no node checks (NodeChecks: [], as consul/api's
//     CreateNoChecks), so only their TTL, or a destroy, ends them (seed
//     371152, sequence 111: a session made through a2, a2 split off and
//     marked critical by the leader, held after the heal); K.3's figures
//     are those of a session with the default check, serfHealth;
//   - Consul: a server that leaves the majority's side keeps a state up
//     to the writes of the last 100 ms behind, and an agent split off
//     with it answers stale reads from it at once or 16 to 20 s later
//     (K.7; Options.Decide picks);
//   - faults (Strike): a partition of links between nodes and its heal,
//     a node killed (a server of Consul, a member of etcd: down until a
//     restart-broker starts it), paused and resumed, restarted.
//
// Not modelled: how long a held call waits before an agent gives up (K.3:
// 10 to 15 s, then errors): a held call is answered only when its node
// reaches the majority again or its client gives up (Options.Timeout);
// Raft's log (a server cut off is either on the majority's side, up to
// date, or off it, frozen): a server that comes back is up to date at
// once; the agents' Serf rejoin after a heal (immediate here, up to 30 s
// on the real cluster); client agents killed or paused (the clients'
// own faults cover their processes); etcd's client failover (each client
// has one endpoint, as the cluster targets give it).

// ClusterOptions make a World a cluster: Consul's three servers and two
// client agents, or etcd's three members, by Options.Kind.
type ClusterOptions struct {
	// NodeOf names the node a client process talks to (a Consul client
	// agent, an etcd member); nil, or no node of the cluster, means the
	// first of them (a1, e1).
	NodeOf func(process string) string
	// ElectionDelay is how long after the leader left the majority's
	// side a new one leads: 0 means 2 s on Consul (measured 2.0 to 2.7 s,
	// K.4), 1.1 s on etcd (K.1).
	ElectionDelay time.Duration
}

// ClusterNodes are the nodes of a simulated (and a real) cluster of kind
// k: Consul's servers s1, s2, s3 and client agents a1, a2; etcd's members
// e1, e2, e3.
func ClusterNodes(k Kind) []string {
	if k == Etcd {
		return []string{"e1", "e2", "e3"}
	}
	return []string{"s1", "s2", "s3", "a1", "a2"}
}

// AppNodes are the nodes of a cluster of kind k that clients talk to:
// Consul's client agents, etcd's members.
func AppNodes(k Kind) []string {
	if k == Etcd {
		return ClusterNodes(Etcd)
	}
	return []string{"a1", "a2"}
}

// A cluster is a World's nodes and the links between them.
type cluster struct {
	w       *World
	o       ClusterOptions
	nodes   []*cnode
	cut     map[[2]string]bool // a direction whose packets are dropped
	leader  *cnode             // nil while none leads
	electAt *sched.Timer       // the election under way
	held    []*call            // calls waiting for their node to reach the majority
	replies []func()           // answers waiting for their node to reach it again
	// recent are the states before the last writes, oldest first, at
	// most maxLagged: a stale listing may be answered from one replaced
	// within lagWindow, through a node that has not answered a newer one
	// (shown: the newest state, by its number of writes, each node
	// answered). writes counts the writes.
	recent []lagged
	writes int
	shown  map[*cnode]int
}

// A lagged state is the cluster's state before a write: the write's
// number (writes before it) and when it was made.
type lagged struct {
	state *server
	n     int
	gone  int64
}

// maxLagged is how many writes a stale listing may miss: two were seen
// (a serializable listing through e2, just restarted, missed the last
// two writes; a Consul ?stale listing answered the state between a put
// and a delete, then again on the calls after).
const maxLagged = 3

// lagWindow is how long after a write a stale listing (served by a
// follower, which applies the write once the leader tells it it is
// committed, at its next heartbeat at the latest) may not see it yet: a
// heartbeat, 100 ms (seen on etcd: a serializable listing through e2
// right after a delete through e1 still had the key, and one through e3
// two round trips after it).
const lagWindow = 100 * time.Millisecond

// apply applies call c, which reaches the majority's side: a stale
// listing may be answered from a state a write replaced within
// lagWindow (Options.Decide picks whether, then which), no older than
// the newest its node has answered; any other call changes the state,
// which is kept for the stale listings right after if it was a write.
func (cl *cluster) apply(c *call) {
	s := cl.w.srv
	if c.stale {
		n := cl.nodeOf(c)
		var older []lagged // newest first
		for i := len(cl.recent) - 1; i >= 0; i-- {
			l := cl.recent[i]
			if l.n < cl.shown[n] || cl.w.now-l.gone > int64(lagWindow) {
				break
			}
			older = append(older, l)
		}
		if len(older) > 0 && cl.w.base.Pick(2) == 1 {
			l := older[0]
			if len(older) > 1 {
				l = older[cl.w.base.Pick(len(older))]
			}
			cl.w.tracef("cluster: %s answered by a follower that lags %d writes", c.what, cl.writes-l.n)
			cl.shown[n] = l.n
			c.op(l.state, c)
			return
		}
		cl.shown[n] = cl.writes
		c.op(s, c)
		return
	}
	before, index := s.snapshot(), s.index
	c.op(s, c)
	if s.index != index {
		cl.recent = append(cl.recent, lagged{state: before, n: cl.writes, gone: cl.w.now})
		if len(cl.recent) > maxLagged {
			cl.recent = cl.recent[1:]
		}
		cl.writes++
	}
}

// A cnode is one node of the cluster.
type cnode struct {
	name   string
	server bool
	down   bool // killed, not yet started again
	paused bool
	gen    int  // counts its crashes, so that a restart's timer knows its own
	main   bool // on the majority's side, as of the last update
	// frozen is a server's state as it was when it left the majority's
	// side, which its stale reads answer (nil while on it).
	frozen *server
	// staleFrom is when a Consul agent off the majority's side starts
	// answering stale reads from the server cut off with it: at once if
	// that server is the one it sends to, else once its Serf has declared
	// the majority's servers failed (K.7).
	staleFrom int64
}

func newCluster(w *World, o ClusterOptions) *cluster {
	if o.ElectionDelay == 0 {
		o.ElectionDelay = 2 * time.Second
		if w.o.Kind == Etcd {
			o.ElectionDelay = 1100 * time.Millisecond
		}
	}
	cl := &cluster{w: w, o: o, cut: map[[2]string]bool{}, shown: map[*cnode]int{}}
	for _, name := range ClusterNodes(w.o.Kind) {
		cl.nodes = append(cl.nodes, &cnode{name: name, server: !slices.Contains(AppNodes(w.o.Kind), name) || w.o.Kind == Etcd, main: true})
	}
	cl.leader = cl.nodes[0]
	return cl
}

// node is the node named name, or nil.
func (cl *cluster) node(name string) *cnode {
	for _, n := range cl.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// nodeOf is the node call c goes through: its own, else its process's.
func (cl *cluster) nodeOf(c *call) *cnode {
	name := c.node
	if name == "" && cl.o.NodeOf != nil {
		name = cl.o.NodeOf(c.p.Name())
	}
	if n := cl.node(name); n != nil && slices.Contains(AppNodes(cl.w.o.Kind), n.name) {
		return n
	}
	return cl.node(AppNodes(cl.w.o.Kind)[0])
}

// linked says whether x and y are both running and their link is uncut
// both ways.
func (cl *cluster) linked(x, y *cnode) bool {
	return x.running() && y.running() && !cl.cut[[2]string{x.name, y.name}] && !cl.cut[[2]string{y.name, x.name}]
}

func (n *cnode) running() bool { return !n.down && !n.paused }

// majority is the majority's side: the nodes reached from a running
// server through links uncut both ways, if they hold two servers; nil
// if no side does.
func (cl *cluster) majority() []*cnode {
	for _, start := range cl.nodes {
		if !start.server || !start.running() {
			continue
		}
		side := []*cnode{start}
		for i := 0; i < len(side); i++ {
			for _, n := range cl.nodes {
				if !slices.Contains(side, n) && cl.linked(side[i], n) {
					side = append(side, n)
				}
			}
		}
		servers := 0
		for _, n := range side {
			if n.server {
				servers++
			}
		}
		if 2*servers > cl.servers() {
			return side
		}
	}
	return nil
}

func (cl *cluster) servers() int {
	k := 0
	for _, n := range cl.nodes {
		if n.server {
			k++
		}
	}
	return k
}

// reaches says whether a call through node n reaches the majority's
// side: an etcd member on it; a Consul agent with a link to a server on
// it.
func (cl *cluster) reaches(n *cnode) bool {
	if n.server {
		return n.running() && n.main
	}
	for _, s := range cl.nodes {
		if s.server && s.main && cl.linked(n, s) {
			return true
		}
	}
	return false
}

// staleServer is the server off the majority's side that answers a stale
// read through node n (n itself on etcd; a server linked to the agent on
// Consul), or nil.
func (cl *cluster) staleServer(n *cnode) *cnode {
	for _, s := range cl.nodes {
		if s.server && !s.main && s.frozen != nil && s.running() && (s == n || !n.server && cl.linked(n, s)) {
			return s
		}
	}
	return nil
}

// update follows a change of the nodes or links: who is on the
// majority's side (a server leaving it keeps the state it had), the
// leader (an election if it left), the Consul agents off it (detected
// failed after a while), and the calls and answers that can now go
// through.
func (cl *cluster) update() {
	side := cl.majority()
	for _, n := range cl.nodes {
		on := slices.Contains(side, n)
		switch {
		case n.server && n.main && !on:
			n.frozen = cl.frozen()
		case on:
			n.frozen = nil
		}
		left := n.main && !on
		n.main = on
		if !n.server {
			if left && cl.w.o.Kind == Consul && cl.staleServer(n) != nil {
				d := staleSwitch[cl.w.base.Pick(len(staleSwitch))]
				n.staleFrom = cl.w.now + int64(d)
				cl.w.tracef("cluster: %s answers stale reads from the server cut off with it %v from now", n.name, d)
			}
		}
	}
	if cl.leader != nil && !cl.leader.main {
		cl.w.tracef("cluster: leader %s is off the majority's side", cl.leader.name)
		cl.leader = nil
	}
	if cl.leader == nil && cl.electAt == nil && side != nil {
		cl.electAt = cl.w.sched.After(cl.o.ElectionDelay, cl.elect)
	}
	cl.retry()
}

// elect makes a server of the majority's side leader (Options.Decide
// picks which), which gives every session a fresh TTL.
func (cl *cluster) elect() {
	cl.electAt = nil
	var cands []*cnode
	for _, n := range cl.nodes {
		if n.server && n.main {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 || cl.leader != nil {
		return
	}
	cl.leader = cands[cl.w.base.Pick(len(cands))]
	s := cl.w.srv
	ids := slices.Sorted(maps.Keys(s.sessions))
	for _, id := range ids {
		if ses := s.sessions[id]; s.kind == Consul {
			s.armConsul(ses)
		} else {
			for _, c := range ses.renews {
				s.w.reply(c, result{err: errReset}) // the old leader's lessor is demoted
			}
			ses.renews = nil
			s.armEtcd(ses, s.w.now+int64(s.w.o.ElectionTimeout+ses.ttl))
		}
	}
	if s.kind == Consul {
		s.forgetDelays()
		s.index++ // the new leader's barrier
	}
	cl.w.tracef("cluster: %s leads; %d sessions with a fresh TTL", cl.leader.name, len(ids))
	cl.retry()
}

// route sends c as its node allows, saying whether it took it: the
// cluster's state takes it (false) if the node reaches the majority's
// side and a leader; else a frozen server answers a stale listing, a
// member that is down refuses it, or it is held.
func (cl *cluster) route(c *call) (taken bool) {
	n := cl.nodeOf(c)
	switch {
	case n.down:
		cl.w.tracef("%s -> %s: %s: connection refused (down)", c.p.Name(), n.name, c.what)
		cl.w.sched.After(refusedTime, func() { cl.w.deliver(c, result{err: errRefused}) })
		return true
	case cl.reaches(n) && cl.leader != nil:
		return false
	case c.stale && !cl.reaches(n):
		if s := cl.staleServer(n); s != nil && cl.w.now >= n.staleFrom {
			cl.w.tracef("%s -> %s: %s, answered by %s off the majority's side", c.p.Name(), n.name, c.what, s.name)
			c.op(s.frozen, c)
			return true
		}
	}
	cl.w.tracef("%s -> %s: %s waits for the majority's side", c.p.Name(), n.name, c.what)
	cl.held = append(cl.held, c)
	return true
}

// retry sends again the held calls whose node now reaches the majority
// (those whose client gave up are dropped), and hands over the answers
// that waited.
func (cl *cluster) retry() {
	held := cl.held
	cl.held = nil
	for _, c := range held {
		if c.done {
			cl.w.tracef("%s: %s is dropped: its client gave up", c.p.Name(), c.what)
			continue
		}
		cl.w.send(c)
	}
	replies := cl.replies
	cl.replies = nil
	for _, f := range replies {
		f()
	}
}

// answerHeld says whether the answer to c must wait for c's node to
// reach the majority's side again (then f hands it over).
func (cl *cluster) answerHeld(c *call, f func()) bool {
	n := cl.nodeOf(c)
	if c.stale || cl.reaches(n) || n.down {
		return false
	}
	cl.replies = append(cl.replies, func() {
		if !cl.answerHeld(c, f) {
			f()
		}
	})
	return true
}

// staleSwitch are the delays, one picked by Options.Decide, after which
// a Consul agent split off from the majority's side together with a
// server answers stale reads from that server: at once if it is the
// server the agent sends to (a client agent sends every call to the first
// server of its list, rotated on an error, reshuffled every 2 to 3
// minutes), else once the agent's Serf has declared the servers it can no
// longer reach failed and its router has dropped them; until then a stale
// read through it gets no answer (K.7: from 16.2 to 16.7 s after the
// split, and from 17.1 to 19.1 s; or at once).
var staleSwitch = []time.Duration{0, 16 * time.Second, 18 * time.Second, 20 * time.Second}

// frozen is the state a Consul server that leaves the majority's side
// keeps: the cluster's, or (Options.Decide picks whether, then which) one
// that a write replaced within lagWindow, which the server had not applied
// yet (seen: a ?stale listing through an agent split off with a server
// right after the setup's delete answered the state before it, 19 s
// later, K.7). An etcd member keeps the cluster's.
func (cl *cluster) frozen() *server {
	var older []lagged // newest first
	for i := len(cl.recent) - 1; i >= 0 && cl.w.o.Kind == Consul; i-- {
		if l := cl.recent[i]; cl.w.now-l.gone <= int64(lagWindow) {
			older = append(older, l)
		}
	}
	if len(older) > 0 {
		if i := cl.w.base.Pick(len(older) + 1); i > 0 {
			cl.w.tracef("cluster: a server leaves the majority's side %d writes behind", cl.writes-older[i-1].n)
			return older[i-1].state.snapshot()
		}
	}
	return cl.w.srv.snapshot()
}

// snapshot is a copy of the server's state, for its stale reads.
func (s *server) snapshot() *server {
	return &server{w: s.w, kind: s.kind, index: s.index, kvIndex: s.kvIndex,
		keys: maps.Clone(s.keys), changed: maps.Clone(s.changed), sessions: map[string]*session{}}
}

// Strike strikes a fault on the cluster: "partition" or "heal" of a cut
// (directions "s1>s2 s2>s1 ..."), "pause" or "resume" of a node (a paused
// Consul agent's clients get no answer, as a cut-off one's), "kill" or "restart-broker" of a server
// (restart-broker starts a killed one, and brings a running one down and
// up again at once). Called from
// a process it is a step of that process; from a timer or outside Run it
// applies at once.
func (w *World) Strike(fault, target string) error {
	cl := w.cl
	if cl == nil {
		return fmt.Errorf("consulsim: %s of %s: the World is no cluster", fault, target)
	}
	var dirs [][2]string
	var n *cnode
	if fault == "partition" || fault == "heal" {
		for _, d := range strings.Fields(target) {
			from, to, ok := strings.Cut(d, ">")
			if !ok || cl.node(from) == nil || cl.node(to) == nil || from == to {
				return fmt.Errorf("consulsim: %s: %q is no direction between two nodes of %s", fault, d, strings.Join(ClusterNodes(w.o.Kind), ", "))
			}
			dirs = append(dirs, [2]string{from, to})
		}
	} else {
		if !slices.Contains([]string{"kill", "pause", "resume", "restart-broker"}, fault) {
			return fmt.Errorf("consulsim: no fault %q on a cluster", fault)
		}
		if n = cl.node(target); n == nil || !n.server && (fault == "kill" || fault == "restart-broker") {
			return fmt.Errorf("consulsim: %s: %q is no server of the cluster (a node is paused, a server killed or restarted)", fault, target)
		}
	}
	w.fault(func() {
		switch fault {
		case "partition", "heal":
			for _, d := range dirs {
				if fault == "partition" {
					cl.cut[d] = true
				} else {
					delete(cl.cut, d)
				}
			}
		case "kill":
			cl.kill(n)
		case "pause":
			n.paused = true
		case "resume":
			n.paused = false
		case "restart-broker":
			if !n.down {
				cl.kill(n)
			}
			n.down = false
		}
		w.tracef("cluster: %s %s", fault, target)
		cl.update()
	})
	return nil
}

// kill brings node n down: the calls of the clients that talk to it fail
// (their connection resets).
func (cl *cluster) kill(n *cnode) {
	n.down = true
	n.gen++
	for _, c := range slices.Clone(cl.w.srv.inflight) {
		if cl.nodeOf(c) == n {
			cl.w.srv.cut(c.p)
			cl.w.deliver(c, result{err: errReset})
		}
	}
	cl.held = slices.DeleteFunc(cl.held, func(c *call) bool {
		if cl.nodeOf(c) == n {
			cl.w.deliver(c, result{err: errReset})
			return true
		}
		return false
	})
}

// Cut is the cut between side and the rest of nodes, both ways, as
// Strike takes it ("a1>s1 s1>a1 ...").
func Cut(side, nodes []string) string {
	var d []string
	for _, a := range side {
		for _, b := range nodes {
			if !slices.Contains(side, b) {
				d = append(d, a+">"+b, b+">"+a)
			}
		}
	}
	return strings.Join(d, " ")
}

// Leader is the node that leads the cluster ("" while none does, or the
// World is no cluster).
func (w *World) Leader() string {
	if w.cl == nil || w.cl.leader == nil {
		return ""
	}
	return w.cl.leader.name
}
