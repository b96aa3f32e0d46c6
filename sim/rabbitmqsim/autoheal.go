package rabbitmqsim

// autoheal: once the nodes are linked again and their records are split,
// a decision picks the winning side and the other nodes restart their
// application, taking the winner's records.

import (
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
)

// maybeAutoheal runs an autoheal once every node is linked to every other
// again and the records are split: the side with the most client
// connections wins (then the one with more nodes, then the greatest list
// of node names, as Erlang orders them), and every other node restarts
// its application, taking the winner's records.
//
// The first decision after a heal may be taken on a partial view of the
// partitions (the leader's rabbit_autoheal:all_partitions read before
// every node has listed every peer it lost): by the seed, one node set
// against the rest, whichever side of the records it is on; if the
// records are still split after it, a second decision follows on the
// full view, or, by the seed, none until a node is next declared down or
// restarted (broker-semantics.md C.15). After a continue, the first
// decision comes at once and may see every node alone (C.20, C.21), and
// a winner may not see a continued loser stop (autoheal).
func (cl *cluster) maybeAutoheal() {
	if cl.o.PartitionHandling != Autoheal {
		return
	}
	if cl.one() {
		cl.decided, cl.held = false, false
		for _, x := range cl.nodes {
			x.continued = false
		}
	}
	if cl.healing != nil || cl.held || !cl.allRunning() {
		return
	}
	if z := cl.bridgeNode(); z != nil {
		cl.autohealBridge(z)
		return
	}
	cl.bridged = false
	if !cl.allLinked() {
		return
	}
	sides := cl.sides()
	if len(sides) < 2 {
		return
	}
	partial := ""
	if !cl.decided && cl.w.pick(2) == 1 {
		sides, partial = cl.partialView()
	}
	cl.decided = true
	win := cl.autohealWinner(sides)
	var losers []*node
	for i, s := range sides {
		if i != win {
			losers = append(losers, s...)
		}
	}
	cl.autoheal(sides[win], losers, partial)
}

// allRunning says every node is alive, not frozen, and runs its
// application: where an autoheal can begin.
func (cl *cluster) allRunning() bool {
	for _, x := range cl.nodes {
		if !x.alive() || x.frozen || !x.appRuns() {
			return false
		}
	}
	return true
}

// allLinked says every node is linked to every other.
func (cl *cluster) allLinked() bool {
	for _, x := range cl.nodes {
		for j, up := range x.conn {
			if j != x.i && !up {
				return false
			}
		}
	}
	return true
}

// partialView is the sides of a decision on a partial view of the
// partitions, by the seed, and a note that says so: one node alone
// against the rest, or, after a continue, every node alone.
func (cl *cluster) partialView() ([][]*node, string) {
	if slices.ContainsFunc(cl.nodes, func(x *node) bool { return x.continued }) && cl.w.pick(2) == 1 {
		var sides [][]*node
		for _, x := range cl.nodes {
			sides = append(sides, []*node{x})
		}
		return sides, " (on a partial view of the partitions: every node alone)"
	}
	y := cl.nodes[cl.w.pick(len(cl.nodes))]
	rest := slices.DeleteFunc(slices.Clone(cl.nodes), func(x *node) bool { return x == y })
	return [][]*node{rest, {y}}, " (on a partial view of the partitions)"
}

// autohealWinner is the index of the side that wins an autoheal among
// sides: the one with the most client connections, then the one with
// more nodes, then the greatest list of node names.
func (cl *cluster) autohealWinner(sides [][]*node) int {
	win := 0
	for i, s := range sides {
		cw, ci := cl.brokerConns(sides[win]), cl.brokerConns(s)
		if ci > cw || ci == cw && (len(s) > len(sides[win]) || len(s) == len(sides[win]) && greater(s, sides[win])) {
			win = i
		}
	}
	return win
}

// brokerConns counts the client connections open at the broker to the
// nodes of side.
func (cl *cluster) brokerConns(side []*node) int {
	n := 0
	for _, p := range cl.w.procs {
		for _, c := range p.conns {
			if c.brokerOpen && slices.Contains(side, c.node) {
				n++
			}
		}
	}
	return n
}

// autoheal runs the decision that winner wins and losers restart, made
// on a partial view if partial (its note) says so. The first decision
// after a continue comes before the winner watches the continued node's
// broker again: a winner does not see a continued loser stop, and every
// loser waits autohealTimeout for its word (unaware; winnerGone ends the
// wait early); a continued node that wins sees its losers stop
// (broker-semantics.md C.19, C.21).
func (cl *cluster) autoheal(winner, losers []*node, partial string) {
	unaware := slices.ContainsFunc(losers, func(x *node) bool { return x.continued })
	for _, x := range cl.nodes {
		x.continued = false
	}
	h := cl.decide(winner, losers, unaware, partial)
	hold := partial != "" && cl.w.pick(2) == 1
	wait := loserRestart
	if unaware {
		wait += autohealTimeout
		if cl.w.trace != nil {
			cl.w.tracef("autoheal: the winner %s does not see its losers stop; they wait %s", h.winner.name, wait)
		}
	}
	cl.endAfter(h, wait, hold, nil)
}

// endAfter ends h after d (endHealing), then runs then, if any; it
// replaces any end already set.
func (cl *cluster) endAfter(h *healing, d time.Duration, hold bool, then func()) {
	h.done.Cancel()
	h.done = cl.w.sched.After(d, func() {
		h.done = nil
		cl.endHealing(h, hold)
		if then != nil {
			then()
		}
	})
}

// decide stops the losers of an autoheal won by side, each to start
// again when it ends. The winner is the side's node with the greatest
// name: RabbitMQ takes a partition's first node, and lists the nodes of
// each greatest first (in every decision logged, e.g. [[n1], [n3, n2]]).
func (cl *cluster) decide(side, losers []*node, unaware bool, note string) *healing {
	h := &healing{winner: slices.MaxFunc(side, func(a, b *node) int { return strings.Compare(a.name, b.name) }), losers: losers, unaware: unaware}
	cl.healing = h
	if cl.w.trace != nil {
		cl.w.tracef("autoheal: %s win%s", nodeNames(side), note)
	}
	for _, x := range losers {
		cl.stopApp(x, true, 0)
		x.toStarting()
	}
	return h
}

// bridgeNode is the node linked to both others while they are not linked
// to each other (a partial partition: a bridge), or nil.
func (cl *cluster) bridgeNode() *node {
	if len(cl.nodes) != 3 {
		return nil
	}
	for _, z := range cl.nodes {
		var pair []*node
		for _, x := range cl.nodes {
			if x != z && x.conn[z.i] && z.conn[x.i] {
				pair = append(pair, x)
			}
		}
		if len(pair) == 2 && !(pair[0].conn[pair[1].i] && pair[1].conn[pair[0].i]) {
			return z
		}
	}
	return nil
}

// autohealBridge is autoheal deciding during a bridge through z, though
// the two other nodes cannot reach each other, as the real cluster did
// in one bridge of seven (broker-semantics.md C.20, C.22): by the seed,
// drawn once a bridge while the records are split, the bridge restarts
// and then the cut-off node with the lesser name, the one with the
// greater name winning both (C.20's decisions); or autoheal waits for
// the heal (C.22).
func (cl *cluster) autohealBridge(z *node) {
	if cl.bridged {
		return
	}
	cl.bridged = true
	if len(cl.sides()) < 2 || cl.w.pick(2) == 0 {
		return
	}
	var pair []*node
	for _, x := range cl.nodes {
		if x != z {
			pair = append(pair, x)
		}
	}
	w, x := pair[1], pair[0] // by name, as Erlang orders them: the greatest wins
	if w.name < x.name {
		w, x = x, w
	}
	note := " (during a partial partition: " + x.name + " and " + w.name + " cut off from each other)"
	// Each decision stops its loser, which starts 0.4 s later; each comes
	// only while the bridge and every broker still stand.
	var step func(side []*node, loser *node, after time.Duration, next func())
	step = func(side []*node, loser *node, after time.Duration, next func()) {
		cl.w.sched.After(after, func() {
			if cl.healing != nil || !w.appRuns() || !x.appRuns() || !z.appRuns() || cl.bridgeNode() != z {
				return
			}
			cl.endAfter(cl.decide(side, []*node{loser}, false, note), loserRestart, false, next)
		})
	}
	step([]*node{w, x}, z, bridgeDecision, func() { step([]*node{w, z}, x, time.Second, nil) })
}

// bridgeDecision is how long after a bridge's cut-off node links to the
// bridge again autoheal decides (broker-semantics.md C.20: 5 s after
// that node's disconnect from the bridge).
const bridgeDecision = 3600 * time.Millisecond

// loserRestart is how long an autoheal's loser, told to start, takes to
// serve again here: less than the real ones took (broker-semantics.md
// C.15, C.21), as the differential waits for every node to serve before
// it looks again, and a plan's checks see a node that refuses either way.
const loserRestart = 400 * time.Millisecond

// autohealTimeout is RabbitMQ's autoheal_state_transition_timeout: how
// long an autoheal's loser waits for its winner's word before it starts
// on its own (60 s by default; broker-semantics.md C.19, C.21).
const autohealTimeout = time.Minute

// healing is an autoheal under way: its winner, and its losers, stopped
// until they start again (endHealing).
type healing struct {
	winner *node
	losers []*node
	// unaware says the winner does not see the losers stop (a continued
	// node among them): they wait autohealTimeout, or until the winner's
	// broker stops or the winner declares a node down.
	unaware bool
	done    *sched.Timer
}

// endHealing starts the losers of h, an autoheal that ends: its winner
// told them to, or (unaware) they stopped waiting. hold says no node asks
// again if the records are still split.
func (cl *cluster) endHealing(h *healing, hold bool) {
	if cl.healing != h {
		return
	}
	h.done.Cancel()
	cl.healing = nil
	for _, x := range h.losers {
		if x.alive() && !x.appRuns() {
			cl.startApp(x)
		}
	}
	if hold && !cl.one() {
		cl.held = true
		if cl.w.trace != nil {
			cl.w.tracef("autoheal: no node asks again; the records stay split")
		}
	}
	cl.update()
}

// winnerGone ends an unaware autoheal whose winner x stopped its broker or
// declared a node down: its losers start at once (a loser watches the
// winner's node monitor; a winner that sees a node down gives up and
// tells its losers to start).
func (cl *cluster) winnerGone(x *node) {
	if h := cl.healing; h != nil && h.unaware && h.winner == x {
		if cl.w.trace != nil {
			cl.w.tracef("autoheal: the winner %s gives up; its losers start", x.name)
		}
		cl.endAfter(h, loserRestart, false, nil)
		h.unaware = false
	}
}

// winnerDown is x declaring y down: where y is the winner of an unaware
// autoheal and x one of its losers, x, watching the winner's node
// monitor, sees it go and starts.
func (cl *cluster) winnerDown(x, y *node) {
	h := cl.healing
	if h == nil || !h.unaware || h.winner != y || !slices.Contains(h.losers, x) {
		return
	}
	h.losers = slices.DeleteFunc(h.losers, func(z *node) bool { return z == x })
	cl.w.sched.After(loserRestart, func() {
		if x.alive() && !x.appRuns() && x.starting() {
			cl.startApp(x)
			cl.update()
		}
	})
}

// greater says side a comes after side b in Erlang's order of lists of
// node names, each listed greatest first (RabbitMQ's tie-break between
// partitions alike).
func greater(a, b []*node) bool {
	names := func(side []*node) []string {
		var out []string
		for _, x := range side {
			out = append(out, x.name)
		}
		slices.Sort(out)
		slices.Reverse(out)
		return out
	}
	return slices.Compare(names(a), names(b)) > 0
}
