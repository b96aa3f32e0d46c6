package rabbitmqsim

// A node's lifecycle: its rabbit application's stop and start (what
// each does to its connections and records), and whether a node is being
// started.

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// serving says the node takes connections.
func (n *node) serving() bool { return n.alive && n.app && !n.frozen }

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

// booting says a node is being started or restarted.
func (cl *cluster) booting() bool {
	for _, x := range cl.nodes {
		if x.booting {
			return true
		}
	}
	return false
}

// whenBooted runs f once x is no longer booting.
func (cl *cluster) whenBooted(x *node, f func()) {
	if !x.booting {
		f()
		return
	}
	cl.w.sched.After(10*time.Millisecond, func() { cl.whenBooted(x, f) })
}
