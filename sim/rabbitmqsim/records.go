package rabbitmqsim

// The records: each node's copy of the queue records (Mnesia's), which
// the nodes it counts as running share; what a split leaves of them (the
// sides, a durable queue whose home node is down); on Khepri, the store.

import (
	"maps"
	"slices"
	"sort"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

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

// sides are the groups of running nodes that share their records, the
// first node's first.
func (cl *cluster) sides() [][]*node {
	var out [][]*node
	seen := make([]bool, len(cl.nodes))
	for _, x := range cl.nodes {
		if seen[x.i] || !x.appRuns() {
			continue
		}
		var side []*node
		for _, z := range cl.group(x) {
			if !seen[z.i] && z.appRuns() {
				seen[z.i] = true
				side = append(side, z)
			}
		}
		out = append(out, side)
	}
	return out
}

// one says the cluster is one again: every node up, linked to and
// sharing its records with every other.
func (cl *cluster) one() bool {
	for _, x := range cl.nodes {
		if !x.alive() || x.frozen || !x.appRuns() || x.starting() || x.behind {
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
