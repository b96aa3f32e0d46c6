package rabbitmqsim

// The faults a plan strikes the cluster with: a partition and its heal,
// a node killed, paused (SIGSTOP), continued or restarted; and Settle,
// which brings the cluster back to one after a plan.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

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
			if block && !x.starting() {
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
	if !x.alive() {
		return
	}
	if cl.w.trace != nil {
		cl.w.tracef("node %s killed", x.name)
	}
	if cl.khepri() {
		x.killed() // (its exclusive queues die with it: ownerGone)
	}
	cl.closeConns(x, 0, "")
	cl.dropTransient(x)
	cl.winnerGone(x)
	if x.alive() {
		x.killed()
	}
	x.frozen = false
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
	if !x.alive() || x.frozen {
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
		if y != x && y.alive() && !y.conn[x.i] {
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
	if x.minority() {
		cl.recoverMinority(x)
	}
	// Under pause_minority a node continued after its peers declared it
	// down hears their links closed, and, by the seed, either they link
	// to it again before it counts them, or it counts them gone first
	// (broker-semantics.md C.23). Linked again, it does not pause, and
	// its records stay apart from theirs, a partition pause_minority
	// never merges (C.16); the partial-partition check then counts it as
	// running (C.18), or not at all (unlisted: C.23). Counting them gone,
	// it pauses itself and, linked again at once, starts again with their
	// records (C.23).
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
			if y != x && !x.conn[y.i] && y.alive() && !y.frozen && cl.reach(x, y) {
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
	if x.starting() {
		return true
	}
	if x.frozen {
		cl.resume(x)
	}
	if cl.w.trace != nil {
		cl.w.tracef("node %s restarting", x.name)
	}
	if x.alive() {
		cl.stopApp(x, false, 0)
	}
	x.toStarting()
	cl.held = false
	cl.update()
	cl.w.sched.After(cl.w.downtime, func() {
		if !x.alive() {
			x.revived()
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
			case !x.alive():
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
