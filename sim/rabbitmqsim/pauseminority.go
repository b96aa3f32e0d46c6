package rabbitmqsim

// pause_minority: a node that declares peers down and is left without a
// majority (or told of a partial partition) stops its application until
// it sees a majority (or every node) again.

import (
	"time"
)

// pauses says whether x, declaring peers down, may pause under
// pause_minority: not while it wakes from a pause (resume), when its
// peers link to it again before it counts them.
func (cl *cluster) pauses(x *node) bool {
	return cl.o.PartitionHandling == PauseMinority && !x.waking
}

// majority says x is linked to more than half of the nodes, itself
// counted.
func (cl *cluster) majority(x *node) bool {
	n := 1
	for j, up := range x.conn {
		if up && cl.nodes[j].alive() {
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
// once x declares it down, and its client is told ok before x's broker
// has stopped (broker-semantics.md C.14). That record is only in x's
// copy, which x gives up when it starts again (startApp): the write is
// lost, though its client was told ok.
func (cl *cluster) pauseMinority(x *node, all bool) {
	cl.retry()
	if cl.w.trace != nil {
		cl.w.tracef("node %s pauses: pause_minority", x.name)
	}
	cl.stopApp(x, false, stopping)
	x.waitsForPeers(all)
}

// stopping is how long a node pausing itself (pause_minority) takes to
// stop its broker, as its peers see it: until then they count it as
// running, and a peer that asks them of a partial partition meanwhile is
// told of one. Not measured: with half a second, a bridge pauses one of
// its two cut-off nodes, or both, by the seed, as the real cluster did
// (broker-semantics.md C.13).
const stopping = 500 * time.Millisecond

// recoverMinority starts a paused minority's application again once it
// sees what it waits for.
func (cl *cluster) recoverMinority(x *node) {
	if !x.minority() || !x.alive() || x.frozen {
		return
	}
	if x.state == nodeWaitsAll {
		for j, up := range x.conn {
			if j != x.i && (!up || !cl.nodes[j].alive()) {
				return
			}
		}
	} else if !cl.majority(x) {
		return
	}
	x.stopped()
	cl.startApp(x)
	cl.update()
}
