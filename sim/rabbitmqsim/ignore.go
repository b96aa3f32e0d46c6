package rabbitmqsim

// ignore, RabbitMQ 3.10's default cluster_partition_handling, does
// nothing of its own: what it does is what every node of the Mnesia modes
// does when it declares a peer down (on_node_down deletes the records of
// the peer's queues; the partial-partition check disconnects from a peer
// that still sees it), and after a heal the records stay split.

// sees says z counts y's broker as running where RabbitMQ 3.10's
// partial-partition check asks (rabbit_mnesia:cluster_nodes(running), an
// RPC to each node): z shares its records with y, or y's broker runs
// though they share none (y paused and continued under pause_minority,
// apart from its peers, C.16). The node declaring a peer down asks the
// nodes it sees so, and each answers whether it sees the peer so
// (broker-semantics.md C.18).
func (cl *cluster) sees(z, y *node) bool {
	return z.running[y.i] || y.appRuns() && !y.unlisted && !z.unlisted
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
// (broker-semantics.md C.13). A peer that gave x up
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

// partialPartition is x, running, declaring y, alive, down while a peer
// whose broker x sees running still sees y (a partial partition: a
// bridge): RabbitMQ asks that peer to call y, and a peer cut off from y
// too answers only once it declares y down, and then says nothing. x
// then disconnects from that peer, or, under pause_minority, pauses
// until every node is back, and says so.
func (cl *cluster) partialPartition(x, y *node) (paused bool) {
	for _, z := range cl.nodes {
		if z == x || z == y || !x.conn[z.i] || !cl.sees(x, z) || !z.conn[y.i] || !cl.sees(z, y) || !cl.reach(x, z) || !cl.reach(z, y) {
			continue
		}
		if cl.pauses(x) {
			cl.pauseMinority(x, true)
			return true
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
	return false
}
