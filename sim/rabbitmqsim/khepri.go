package rabbitmqsim

// Khepri, RabbitMQ 4.3's metadata store: the mode's rules (Khepri's doc
// comment), its leader and elections, a node's catch-up with the store,
// the deletions of exclusive queues that wait for a commit, and a node's
// boot, which waits for Khepri. What waits on a Khepri cluster, and how
// long, is in khepriwrites.go.

import (
	"maps"
	"slices"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/sched"
)

// Khepri is the mode of a RabbitMQ 4.3 cluster, whose metadata store is
// Khepri, a Raft store, and which has no cluster_partition_handling, as
// docs/broker-semantics.md section 6 (K.1 to K.10) measured 4.3.6:
//
//   - The queue records are one replicated store. A write (a declare of a
//     new queue, a delete, the deletion of an exclusive queue when its
//     owner connection closes) commits only through a node that reaches a
//     majority of the nodes, itself counted, each running its broker, and
//     that has caught up with the store. Sent through a node that reaches
//     no majority, it is lost: it waits KhepriTimeout and the node closes
//     the client's connection with 541 INTERNAL_ERROR (K.4); it is not
//     retried when the node reaches a majority again, and a queue whose
//     delete was lost so stays, its process gone, owned by no live
//     connection: every exclusive declare of it gets 405 (K.8).
//   - A read (a passive declare, a redeclare refused on the record) is
//     answered from the node's own copy of the records, however stale
//     (K.3). A method that needs a queue's process (a passive declare,
//     a delete, a consume, a get, a purge) waits while the queue's node is
//     unreachable from the client's, however long (K.4b), but for a
//     delete once the client's node has declared that node down (lostTo). A publish to
//     such a queue (cut off or paused) waits until the client's node
//     declares the queue's node down, and is then nacked; one sent
//     after that is nacked when the client's node's connection attempt
//     under way fails, every NetSetup from the declaring down (K.10,
//     publishWaits). To a queue whose node was killed, a publish is
//     nacked (its process is gone).
//   - A write commits only while a leader of the Raft cluster leads: a
//     member that reaches a majority (K.4c). The first leader is drawn
//     (one that lived through faults may be any node). When the
//     leader loses its majority (cut off, killed, paused) the nodes
//     that keep one elect another, electionLeast to electionLeast +
//     7 electionSteps later, by the seed (K.4c); writes through them
//     wait until then. A deposed leader that reaches a majority again
//     before the election leads on; one that was killed or stopped
//     does not (it starts again as a follower). A node that reaches a
//     majority but not the leader (a bridge) falls behind the store
//     and commits nothing until it reaches the leader again and has
//     caught up (the differential: docs/rabbitmq-cluster.md).
//   - No node deletes the records of a peer it lost, pauses itself or
//     restarts to heal (K.1, K.2, K.6). A node that reaches a majority
//     again (after a cut, a pause, a restart) catches up with the store
//     catchUp to catchUp + 5 catchUpSteps later, by the seed (K.6,
//     K.7); a write through it meanwhile waits until then. A node that
//     starts again after a kill or a restart takes connections only once
//     it has caught up (its boot waits for Khepri), and then deletes the
//     queues of its last run that were not durable, the exclusive queues
//     of the connections that died with it among them (K.6).
const Khepri = "khepri"

// KhepriTimeout is how long a write through a node waits for Khepri to
// commit it before the node gives up and closes the client's connection
// with 541 (RabbitMQ 4.3's metadata store timeout, 30 s: K.4, K.8).
const KhepriTimeout = 30 * time.Second

// catchUp is the least time a node that reaches a majority again takes
// to catch up with the store; catchUpStep, times a pick of 0 to 5, is
// added to it: 5.5 to 10.5 s (broker-semantics.md K.6, K.7). The real
// cluster agreed 5.5 to 10.7 s after a heal: the longest measured is
// 0.2 s past the longest drawn.
const (
	catchUp     = 5500 * time.Millisecond
	catchUpStep = time.Second
)

// electionLeast is the least time from the leader's loss of its
// majority to another's election; electionStep, times a pick of 0 to 7,
// is added to it (K.4c).
const (
	electionLeast = 7 * time.Second
	electionStep  = time.Second
)

// internalError is AMQP's 541 INTERNAL_ERROR, a connection error.
const internalError = 541

// khepri says the cluster runs Khepri.
func (cl *cluster) khepri() bool { return cl.o.PartitionHandling == Khepri }

// member says x's Khepri member runs: its VM runs, not paused, and its
// broker runs or boots.
func (x *node) member() bool {
	return x.alive() && !x.frozen && (x.state == nodeRunning || x.state == nodeBooting)
}

// quorum says x's Khepri member runs and reaches a majority of the
// nodes' members, itself counted: where Khepri commits.
func (cl *cluster) quorum(x *node) bool { return cl.linkedMajority(x, cl.reach) }

// hearsMajority says the packets of a majority of the nodes' members
// reach x, itself counted (x may not be heard: cut one way).
func (cl *cluster) hearsMajority(x *node) bool { return cl.linkedMajority(x, cl.hears) }

// linkedMajority says x's Khepri member runs and is linked to a majority of the
// nodes' members, itself counted.
func (cl *cluster) linkedMajority(x *node, linked func(x, y *node) bool) bool {
	if !x.member() {
		return false
	}
	n := 0
	for _, y := range cl.nodes {
		if y == x || y.member() && linked(x, y) {
			n++
		}
	}
	return 2*n > len(cl.nodes)
}

// commits says a write through x commits now: x has a quorum and has
// caught up with the store, and a leader leads that x reaches (in a
// bridge, a node cut off from the leader alone waits: a differential's
// sequence on 4.3.6).
func (cl *cluster) commits(x *node) bool {
	if !cl.picked {
		cl.lead()
	}
	return !x.behind && cl.quorum(x) && cl.leader != nil && cl.follows(x)
}

// follows says x hears from Khepri's leader, if one leads: the leader
// replicates the store to the nodes it reaches. A node that reaches a
// majority but not the leader (a bridge) falls behind.
func (cl *cluster) follows(x *node) bool {
	l := cl.leader
	return l == nil || l == x || cl.reach(x, l)
}

// lead follows who leads the Raft cluster: the first leader is drawn;
// a leader that lost its majority is deposed, and an election among the
// nodes that keep one is set (or, before it ends, called off if the
// deposed one has a majority again).
func (cl *cluster) lead() {
	w := cl.w
	if !cl.picked {
		cl.picked = true
		cl.leader = cl.nodes[w.pick(len(cl.nodes))]
	}
	if l := cl.leader; l != nil && !cl.quorum(l) {
		cl.leader, cl.deposed = nil, l
		if w.trace != nil {
			w.tracef("node %s: Khepri's leader, has no majority; the others elect another", l.name)
		}
	}
	// A leader that went down (killed, stopped) starts again as a
	// follower: restarted, it does not lead on.
	if d := cl.deposed; cl.leader == nil && d != nil && cl.election != nil && cl.quorum(d) && !d.restarted {
		cl.election.Cancel()
		cl.election, cl.leader, cl.deposed = nil, d, nil
		if w.trace != nil {
			w.tracef("node %s: leads Khepri again, before an election", d.name)
		}
	}
	if cl.leader != nil || cl.election != nil || !slices.ContainsFunc(cl.nodes, cl.quorum) {
		return
	}
	cl.election = w.sched.After(cl.electionDelay(), func() {
		cl.election = nil
		var can []*node
		for _, x := range cl.nodes {
			if cl.quorum(x) {
				can = append(can, x)
			}
		}
		if len(can) > 0 {
			cl.leader, cl.deposed = can[w.pick(len(can))], nil
			if w.trace != nil {
				w.tracef("node %s: elected Khepri's leader", cl.leader.name)
			}
			for _, x := range cl.nodes {
				cl.commitDeletes(x)
			}
		}
		cl.update()
	})
}

// khepriSync marks the nodes that lost their majority behind (their
// copies of the records no longer follow the store) and starts the
// catch-up of those that reach one again.
func (cl *cluster) khepriSync() {
	cl.lead()
	for _, x := range cl.nodes {
		switch {
		case !cl.quorum(x) || !cl.follows(x):
			x.catchup.Cancel()
			x.catchup = nil
			if !x.behind {
				x.behind = true
				if cl.w.trace != nil {
					why := "no majority"
					if cl.quorum(x) {
						why = "the leader out of reach"
					}
					cl.w.tracef("node %s: %s; its copy of the records falls behind Khepri's", x.name, why)
				}
			}
		case x.behind && x.catchup == nil:
			x := x
			x.catchup = cl.w.sched.After(cl.catchUpDelay(), func() {
				x.catchup = nil
				cl.caughtUp(x)
				cl.update()
			})
		}
	}
}

// caughtUp is x, reaching a majority, caught up with the store: the
// queues of its last run that were not durable are deleted if it started
// again since (K.6), it takes the store's records, and the deletions
// that waited for it commit.
func (cl *cluster) caughtUp(x *node) {
	w := cl.w
	if !cl.quorum(x) || !cl.follows(x) {
		return
	}
	if x.restarted {
		x.restarted = false
		for _, name := range slices.Sorted(maps.Keys(cl.store)) {
			if q := cl.store[name]; q.home == x && !q.durable {
				if w.trace != nil {
					w.tracef("node %s: deletes %s, a queue of its last run", x.name, name)
				}
				w.deleteQueue(q)
			}
		}
	}
	x.behind = false
	x.view, x.durable = maps.Clone(cl.store), map[string]*queue{}
	for name, q := range cl.store {
		if q.durable {
			x.durable[name] = q
		}
	}
	if w.trace != nil {
		w.tracef("node %s: caught up with Khepri", x.name)
	}
	if x.state == nodeBooting {
		cl.khepriStarted(x)
	}
	cl.commitDeletes(x)
}

// commitDeletes commits the deletions that waited for x (caught up, or
// a leader elected), if x commits now; those lost wait out their time.
func (cl *cluster) commitDeletes(x *node) {
	w := cl.w
	if !cl.commits(x) {
		return
	}
	var lost []*ownerDelete
	for _, d := range x.deletes {
		switch {
		case d.lost:
			lost = append(lost, d)
			continue
		case d.free:
			cl.free(d.q)
			continue
		case d.byName:
			cl.deleteByName(x, d.q)
			continue
		}
		d.timer.Cancel()
		d.q.busy = false
		if w.exists(d.q) {
			w.deleteQueue(d.q)
		}
	}
	x.deletes = lost
}

// An ownerDelete is the deletion of an exclusive queue whose owner
// connection closed, waiting for its node to commit it (or, lost, for
// KhepriTimeout). On 4.0.5 (khepri40.go) it may instead be a lost node's
// queue freed (free), or another's deleted by a freed queue's name
// (byName): these wait with no timeout.
type ownerDelete struct {
	q            *queue
	lost         bool
	free, byName bool
	timer        *sched.Timer
}

// ownerGone deletes the exclusive queues of c, closed at the broker: at
// once where their node commits; where it has not caught up yet, once it
// has; where it has no majority, never: the queue's process is busy
// KhepriTimeout and then gone, its record kept (K.8). A node that is down
// deletes nothing now: its queues go when it starts again (caughtUp).
func (cl *cluster) ownerGone(c *conn) {
	owned := c.owned
	c.owned = nil
	for _, q := range owned {
		x := q.home
		switch {
		case q.freed && x.serving():
			cl.byName(x, q)
		case q.busy || !cl.w.exists(q) || !x.serving():
		case cl.commits(x):
			cl.w.deleteQueue(q)
		default:
			d := &ownerDelete{q: q, lost: cl.lostWrite(x)}
			q.busy = true
			x.deletes = append(x.deletes, d)
			d.timer = cl.w.sched.After(KhepriTimeout, func() {
				x.deletes = slices.DeleteFunc(x.deletes, func(e *ownerDelete) bool { return e == d })
				cl.wedge(q)
				cl.retry()
			})
		}
	}
}

// wedge leaves q's record in the store with no process behind it: a
// delete of it timed out in Khepri (K.8). Its owner, if any, keeps it:
// every other connection's exclusive declare of it gets 405.
func (cl *cluster) wedge(q *queue) {
	q.busy, q.wedged = false, true
	if o := q.owner; o != nil {
		o.owned = slices.DeleteFunc(o.owned, func(x *queue) bool { return x == q })
	}
	if cl.w.trace != nil {
		cl.w.tracef("queue %s: its delete timed out in Khepri; its record stays, with no process", q.name)
	}
}

// khepriDown is x's queue processes gone with its broker (killed, or
// stopped): their records stay in the store; the durable ones keep their
// persistent messages and come back when x starts (khepriStart), the
// others are deleted once x has started and caught up (caughtUp).
func (cl *cluster) khepriDown(x *node) {
	for _, name := range slices.Sorted(maps.Keys(cl.store)) {
		q := cl.store[name]
		if q.home != x {
			continue
		}
		q.dropConsumers()
		if q.durable {
			q.keepPersistent()
		} else {
			q.msgs = q.msgs[:0]
		}
		q.wedged = true
	}
	x.restarted = true
	x.ghosts = nil
}

// leaveGhost notes a delete of q through x that asks no process (lostTo):
// q's record goes, its process lives on at its node if that is alive (cut
// off, or paused), a ghost. The first declare of the name through that
// node after it creates the queue again and closes its client's
// connection with 541 INTERNAL_ERROR; the declares after it are ok (the
// differential on 4.3.6: docs/rabbitmq-cluster.md).
func (cl *cluster) leaveGhost(x *node, q *queue) {
	if h := q.home; cl.lostTo(x, q) && h.alive() {
		if h.ghosts == nil {
			h.ghosts = map[string]bool{}
		}
		h.ghosts[q.name] = true
	}
}

// ghostDeclare is c's declare of a new queue named name on a Khepri
// cluster: if a ghost of that name lives at c's node, it is laid (the
// declare made the queue) and the node closes c's connection with 541.
func (w *World) ghostDeclare(c *conn, name string) (reply, bool) {
	x := c.node
	if !x.ghosts[name] {
		return reply{}, false
	}
	delete(x.ghosts, name)
	w.cl.forceClose(c, "INTERNAL_ERROR", internalError, "INTERNAL_ERROR")
	return reply{err: &broker.Error{Code: internalError, Reason: "INTERNAL_ERROR", Server: true, Connection: true}, cost: latCreate}, true
}

// khepriStart boots x's broker, which waits for Khepri: it takes
// connections once x has caught up (khepriStarted).
func (cl *cluster) khepriStart(x *node) {
	x.unlisted = false
	x.bootsKhepri()
	if cl.w.trace != nil {
		cl.w.tracef("node %s: boots, waiting for Khepri", x.name)
	}
}

// khepriStarted starts x's broker, booted and caught up: its durable
// queues' processes run again, and it takes connections.
func (cl *cluster) khepriStarted(x *node) {
	w := cl.w
	x.started()
	for _, q := range cl.store {
		if q.home == x && q.durable {
			q.wedged, q.busy = false, false
		}
	}
	if w.trace != nil {
		w.tracef("node %s: rabbit started", x.name)
	}
	for _, p := range w.procs {
		w.endDialWait(p)
	}
}

// dialRefused says a new connection to x, which serves, is refused: on
// a Khepri cluster, where x reaches no majority, by the seed (K.5: dials
// to the cut-off node were refused and accepted by turns, 2.5 to 8 s
// each, for the whole cut).
func (cl *cluster) dialRefused(x *node) bool {
	return cl.khepri() && !cl.khepri40 && !cl.quorum(x) && cl.w.pick(2) == 0
}
