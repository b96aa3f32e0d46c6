package rabbitmqsim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A node's lifecycle: where a node is in its life (nodeState) and the
// moves between, its rabbit application's stop and start (what each does
// to its connections and records), and whether a node is being started.

// A nodeState is where a node is in its life: its VM killed or running,
// its rabbit application running, stopped, starting again, or stopped by
// pause_minority until it sees its peers. A SIGSTOP is not a state
// (node.frozen): it freezes a node wherever it is, a restart's downtime
// or a minority's wait going on underneath, and the node continues from
// there.
//
// The moves, each made by one method of the cluster:
//
//	running -> stopped           its application stops (stopApp)
//	stopped -> starting          to start again: a restart, an autoheal's loser (restart, decide)
//	stopped -> waits-majority,   pause_minority stops it until it sees a majority, or every
//	           waits-all         node after a partial partition (pauseMinority)
//	waits-* -> stopped           it sees them again (recoverMinority); a restart (restart)
//	starting -> booting          on Khepri, its broker waits for Khepri (khepriStart)
//	stopped, starting -> running its application starts (startApp)
//	booting -> running           caught up with Khepri (khepriStarted)
//	any alive -> killed          its VM killed (kill); killed-starting if it was starting
//	killed -> killed-starting    a restart (restart)
//	killed-* -> stopped,         its VM starts again at a restart's end (restart)
//	            starting
type nodeState int

const (
	// nodeRunning: its VM and its rabbit application run.
	nodeRunning nodeState = iota
	// nodeStopped: its VM runs, its application is stopped; a node
	// stays so only while the stop's next move is made.
	nodeStopped
	// nodeStarting: its application stopped, to start again: a
	// restart's downtime, an autoheal's loser until told to start.
	nodeStarting
	// nodeBooting: Khepri mode, its broker boots, waiting for Khepri
	// (khepriStart); still starting.
	nodeBooting
	// nodeWaitsMajority: pause_minority stopped its application until
	// it is linked to a majority of the nodes again.
	nodeWaitsMajority
	// nodeWaitsAll: the same after a partial partition, until it is
	// linked to every node again.
	nodeWaitsAll
	// nodeKilled: its VM is killed.
	nodeKilled
	// nodeKilledStarting: its VM is killed, and a restart under way
	// starts it when its downtime ends.
	nodeKilledStarting
)

var nodeStates = [...]string{
	nodeRunning:        "running",
	nodeStopped:        "stopped",
	nodeStarting:       "starting",
	nodeBooting:        "booting",
	nodeWaitsMajority:  "waits-majority",
	nodeWaitsAll:       "waits-all",
	nodeKilled:         "killed",
	nodeKilledStarting: "killed-starting",
}

func (s nodeState) String() string {
	if s < 0 || int(s) >= len(nodeStates) {
		return fmt.Sprintf("nodeState(%d)", int(s))
	}
	return nodeStates[s]
}

// alive says x's VM runs (it was not killed, or has started again).
func (x *node) alive() bool { return x.state != nodeKilled && x.state != nodeKilledStarting }

// appRuns says x's rabbit application runs.
func (x *node) appRuns() bool { return x.state == nodeRunning }

// starting says x is being started or restarted.
func (x *node) starting() bool {
	return x.state == nodeStarting || x.state == nodeBooting || x.state == nodeKilledStarting
}

// minority says x stopped its application under pause_minority until it
// sees its peers again.
func (x *node) minority() bool { return x.state == nodeWaitsMajority || x.state == nodeWaitsAll }

// stopped moves x, running or waiting for its peers, to stopped.
func (x *node) stopped() { x.state = nodeStopped }

// started moves x, stopped, starting or booting, to running.
func (x *node) started() { x.state = nodeRunning }

// waitsForPeers moves x, stopped, to waiting for a majority, or (all)
// for every node.
func (x *node) waitsForPeers(all bool) {
	x.state = nodeWaitsMajority
	if all {
		x.state = nodeWaitsAll
	}
}

// bootsKhepri moves x, starting, to booting: its broker waits for Khepri.
func (x *node) bootsKhepri() { x.state = nodeBooting }

// killed moves x, alive, to killed, or to killed-starting if a restart
// of it is under way.
func (x *node) killed() {
	if x.starting() {
		x.state = nodeKilledStarting
	} else {
		x.state = nodeKilled
	}
}

// revived moves x, killed, to where its VM starting again puts it:
// starting if a restart is under way, else stopped.
func (x *node) revived() {
	if x.state == nodeKilledStarting {
		x.state = nodeStarting
	} else {
		x.state = nodeStopped
	}
}

// toStarting moves x, stopped or waiting for its peers, to starting (a
// restart, an autoheal's loser); killed, to killed-starting.
func (x *node) toStarting() {
	if x.alive() {
		x.state = nodeStarting
	} else {
		x.state = nodeKilledStarting
	}
}

// serving says the node takes connections.
func (x *node) serving() bool { return x.state == nodeRunning && !x.frozen }

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
	if !x.appRuns() {
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
	x.stopped()
	cl.winnerGone(x)
	for _, z := range cl.nodes {
		cl.rabbitDown(x, z)
		if peersLater == 0 || z == x || !z.running[x.i] {
			cl.rabbitDown(z, x)
			continue
		}
		z, x := z, x
		cl.w.sched.After(peersLater, func() {
			if !x.appRuns() {
				cl.rabbitDown(z, x)
				cl.update()
			}
		})
	}
	if loser {
		for _, name := range names {
			for _, z := range cl.nodes {
				if q := z.view[name]; z != x && z.appRuns() && q != nil && q.home != x {
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
		q.dropConsumers()
		q.keepPersistent()
	}
}

// startApp starts x's rabbit application: it takes the records of a
// running peer it is linked to (recordsFrom), or keeps its own, alone,
// and its durable queues come back in every copy of its group.
func (cl *cluster) startApp(x *node) {
	if cl.khepri() {
		cl.khepriStart(x)
		return
	}
	w := cl.w
	x.started()
	x.unlisted = false
	var own []*queue
	for _, name := range slices.Sorted(maps.Keys(x.durable)) {
		if q := x.durable[name]; q.home == x {
			own = append(own, q)
		}
	}
	from := cl.recordsFrom(x)
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

// recordsFrom is the running node whose records x, starting, takes: one
// of those it is linked to, drawn by the seed, or nil if none. Their
// copies may differ, within a side (an on_node_down that deleted records
// in one peer's copy only, C.13) or between sides that do not share
// their records (a cluster left split: ignore, or pause_minority after
// C.16), and the real node took either (C.17). Where it is linked to
// sides apart, they share their writes again from then on, each keeping
// the records it had (C.17); but under autoheal, whose next decision
// restarts the side left apart (C.15).
func (cl *cluster) recordsFrom(x *node) *node {
	w := cl.w
	var sides, linked []*node // the first node of each side it could take from; every node
	for _, z := range cl.nodes {
		if z != x && x.conn[z.i] && z.appRuns() {
			linked = append(linked, z)
			if !slices.ContainsFunc(sides, func(y *node) bool { return y.running[z.i] }) {
				sides = append(sides, z)
			}
		}
	}
	if len(sides) == 0 {
		return nil
	}
	from := linked[w.pick(len(linked))]
	if len(sides) > 1 && cl.o.PartitionHandling != Autoheal {
		if w.trace != nil {
			w.tracef("node %s: takes node %s's records, of %d sides, which share their writes again", x.name, from.name, len(sides))
		}
		for _, y := range cl.nodes {
			for _, z := range cl.nodes {
				if y != z && y != x && z != x && x.conn[y.i] && x.conn[z.i] && y.appRuns() && z.appRuns() && y.conn[z.i] {
					y.running[z.i] = true
				}
			}
		}
	}
	return from
}

// booting says a node is being started or restarted.
func (cl *cluster) booting() bool {
	for _, x := range cl.nodes {
		if x.starting() {
			return true
		}
	}
	return false
}

// whenBooted runs f once x is no longer booting.
func (cl *cluster) whenBooted(x *node, f func()) {
	if !x.starting() {
		f()
		return
	}
	cl.w.sched.After(10*time.Millisecond, func() { cl.whenBooted(x, f) })
}
