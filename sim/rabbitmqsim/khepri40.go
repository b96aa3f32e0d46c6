package rabbitmqsim

// The khepri mode as RabbitMQ 4.0.5 with khepri_db (Debian trixie's,
// Khepri an opt-in there) has it, where it differs from 4.3.6's
// (broker-semantics.md section 6, the 4.0.5 column of K.1 to K.10, and
// the ten runs a fault of measurements/rabbitmq-versions.md):
//
//   - A node that declares a peer down deletes that peer's transient
//     queues' records from the store (rabbit_amqqueue's on_node_down, as
//     under Mnesia), 2 times in 3 a declaring node, by the seed (freeLost:
//     the rows freed a lost holder's queue in every run, the differential
//     saw it kept), a write that commits as any other through that node:
//     about a net_ticktime after a cut or a pause when a node of the
//     majority leads (5.3 to 6.3 s measured), once another is elected when
//     the lost node led (12.5 to 13.6 s), at once after a kill (0.1 to
//     0.8 s, whichever led: a killed leader's followers elect another
//     within a second here). A contender then takes a cut-off holder's
//     lock: a double hold until the heal (K.1, K.2, K.6).
//   - The queue's process lives on at a node cut off or paused, and its
//     owner's connection with it. When that connection goes, the process
//     deletes its record by name, whoever's it is now: after a pause,
//     the contender's queue (K.6, 12 of 12). After a kill it died with
//     the node: the contender's queue stays.
//   - A write through a node that reaches no majority is not lost: it
//     commits once the node can, if that is within Khepri's 30 s (a
//     release 3 s before the heal ended ok at it, 3 runs of 4); by the
//     seed (1 of 4, the fourth run) it is lost and ends in the 541. No
//     queue outlives its connection (K.8: no orphan), the majority having
//     freed it.
//   - A node that reaches the majority again catches up 0.5 to 2 s later
//     (K.7: the cluster agreed 0.6 and 1.2 s after the heal; 0.5 to 1.9 s
//     after a continue), and a new connection to a cut-off node is always
//     accepted (K.5).

import (
	"maps"
	"slices"
	"time"
)

// catchUp40 is the least time a 4.0.5 node takes to catch up with the
// store; catchUpStep40, times a pick of 0 to 5, is added to it.
const (
	catchUp40     = 500 * time.Millisecond
	catchUpStep40 = 300 * time.Millisecond
)

// killedElection40 is, times a pick of 1 to 8, how long 4.0.5's Khepri
// takes to elect a leader when the last one was killed.
const killedElection40 = 100 * time.Millisecond

// catchUpDelay draws how long a node that reaches a majority again takes
// to catch up with the store.
func (cl *cluster) catchUpDelay() time.Duration {
	if cl.khepri40 {
		return catchUp40 + catchUpStep40*time.Duration(cl.w.pick(6))
	}
	return catchUp + catchUpStep*time.Duration(cl.w.pick(6))
}

// electionDelay draws how long after the leader's loss the others elect
// another.
func (cl *cluster) electionDelay() time.Duration {
	if d := cl.deposed; cl.khepri40 && d != nil && !d.alive() {
		return killedElection40 * time.Duration(1+cl.w.pick(8))
	}
	return electionLeast + electionStep*time.Duration(cl.w.pick(8))
}

// freeLost is x, on 4.0.5, declaring y down: it deletes y's transient
// queues' records from the store, now if x commits, else once it does
// (a node cut off from the majority deletes them at the heal: seed
// 2026112901, sequence 41, n3 isolated and n2's exclusive queue gone
// after; in a bridge too: sequence 60, n2's gone after a bridge through
// n1).
//
// Whether x deletes them at all is drawn (2 times in 3): the rows freed
// a lost holder's queue in every run of ten a fault (measurements), but
// the differential saw them kept: after a kill (sequence 39: 405 through
// n2 10 s after n3 was killed, gone once n3 started again) and in a
// bridge (sequence 8: a publish through n1 to n2's exclusive queue after
// n1 declared n2 down was not returned), as a trial reported elsewhere
// saw after cuts and kills; what decides was not found. Two nodes
// declaring y down draw apart, so y's queues are kept 1 time in 9.
func (cl *cluster) freeLost(x, y *node) {
	if !cl.khepri40 || !x.serving() || cl.w.pick(3) == 0 {
		return
	}
	for _, q := range cl.storeOf(y) {
		if q.durable || q.busy {
			// (A queue busy with its own delete, waiting for Khepri through
			// its node, was kept: its passive declare through the majority
			// waited, and it went at the heal: the differential's seed
			// 2026112901, sequence 9.)
			continue
		}
		if cl.commits(x) {
			cl.free(q)
			continue
		}
		x.deletes = append(x.deletes, &ownerDelete{q: q, free: true})
	}
}

// storeOf is the queues of the store that live on y, by name.
func (cl *cluster) storeOf(y *node) []*queue {
	var out []*queue
	for _, name := range slices.Sorted(maps.Keys(cl.store)) {
		if q := cl.store[name]; q.home == y {
			out = append(out, q)
		}
	}
	return out
}

// free deletes q's record, its node declared down: a process that lives
// on there (cut off, paused) keeps it, and its owner connection the
// queue (freed).
func (cl *cluster) free(q *queue) {
	w := cl.w
	if !w.exists(q) || q.busy {
		return
	}
	if w.trace != nil {
		w.tracef("queue %s: its record deleted, its node %s declared down", q.name, q.home.name)
	}
	w.dropRecord(q)
	q.freed = q.home.alive()
}

// byName is the process of q, freed, ending with its owner's connection
// at x: it deletes the store's record of q's name, whoever's it is now
// (4.0.5 checks no owner), now if x commits, else once it does.
func (cl *cluster) byName(x *node, q *queue) {
	t := cl.store[q.name]
	if t == nil || t == q {
		return
	}
	if cl.commits(x) {
		cl.deleteByName(x, t)
		return
	}
	x.deletes = append(x.deletes, &ownerDelete{q: t, byName: true})
}

// deleteByName deletes t, another's queue, for a freed queue's process
// at x.
func (cl *cluster) deleteByName(x *node, t *queue) {
	w := cl.w
	if !w.exists(t) {
		return
	}
	if w.trace != nil {
		w.tracef("node %s: a freed queue's process deletes %s by its name, another's", x.name, t.name)
	}
	w.deleteQueue(t)
}

// lostWrite draws whether a write through x, which reaches no majority,
// is lost: always on 4.3.6 (K.8), on 4.0.5 by the seed, 1 time in 4.
func (cl *cluster) lostWrite(x *node) bool {
	if cl.quorum(x) {
		return false
	}
	return !cl.khepri40 || cl.w.pick(4) == 0
}

// freedDelete is a client's delete of q, freed, held for Khepri and
// committed now: its process ends and answers, whatever the store now
// has of its name.
func (w *World) freedDelete(c *conn, q *queue) reply {
	n := len(q.msgs)
	w.deleteQueue(q)
	c.p.effects = append(c.p.effects, Effect{Time: w.now, Queue: q.name})
	return reply{n: n, cost: latDelete}
}

// routedTo is where s, a publish held for a queue's node out of reach,
// went when it was first routed (targets, then): a queue freed since
// still has its process there, which settles it as K.10 says, not a
// return (the differential, seed 2026112901, sequence 9: a publish
// held when the majority freed its queue timed out, not returned).
func (s *stall) routedTo(w *World, targets []*queue) []*queue {
	if s.routed == nil {
		s.routed = append([]*queue{}, targets...)
		return targets
	}
	var out []*queue
	for _, q := range s.routed {
		if w.exists(q) || q.freed {
			out = append(out, q)
		}
	}
	return out
}
