package rabbitmqsim

// Links and failure detection: which nodes reach and hear each other,
// how long a node takes to declare a silent peer down (net_ticktime), what
// it does then, and how two nodes that reach each other again link up.

import "time"

// reach says x and y exchange packets both ways, both running.
func (cl *cluster) reach(x, y *node) bool {
	return x.alive() && y.alive() && !x.frozen && !y.frozen && !cl.cut[x.i][y.i] && !cl.cut[y.i][x.i]
}

// hears says y's packets reach x.
func (cl *cluster) hears(x, y *node) bool { return y.alive() && !y.frozen && !cl.cut[y.i][x.i] }

// cutFrom says x counts y as running but cannot reach it: what x asks of y
// waits until x declares y down, or reaches it again.
func (cl *cluster) cutFrom(x, y *node) bool {
	return y != x && x.running[y.i] && !cl.reach(x, y)
}

// detection draws how long a node that stops hearing a peer takes to
// declare it down: 0.75 to 1.25 net_ticktimes in the Mnesia modes (what
// their differential was measured with: broker-semantics.md C.3), 1 to
// 1.25 on Khepri (OTP's net_ticktime with its default tick intensity of
// 4: K.10).
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
				case !x.alive() || x.frozen || !x.conn[y.i]:
					x.detect[y.i].Cancel()
					x.detect[y.i] = nil
				case !y.alive(), !y.conn[x.i] && cl.hears(x, y):
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
		if n.minority() && n.check == nil {
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
		// It pauses not, heals not; on 4.3.6 it deletes no record (K.1,
		// K.2), on 4.0.5 the lost node's transient queues'.
		cl.freeLost(x, y)
		return
	}
	cl.winnerGone(x)
	cl.winnerDown(x, y)
	cl.onNodeDown(x, y)
	if !x.appRuns() {
		return
	}
	if y.alive() && cl.partialPartition(x, y) {
		return
	}
	if cl.pauses(x) && !cl.majority(x) {
		cl.pauseMinority(x, false)
	}
}
