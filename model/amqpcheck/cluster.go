package amqpcheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
)

// Cluster is what a run on a RabbitMQ cluster adds to its evidence: the
// cluster's partition handling mode and the node each process connected
// to, so that a double hold can be explained by what struck the cluster.
type Cluster struct {
	Mode   string            // ignore, pause_minority, autoheal or khepri
	NodeOf map[string]string // process -> node (n1, n2, ...)
}

// mode names the cluster's mode in an explanation.
func (c *Cluster) mode() string {
	if c.Mode == "khepri" {
		return "Khepri, no partition handling"
	}
	return "partition handling " + c.Mode
}

// explainOnCluster adds to a failure the cluster's side of it. For
// slot-exclusive: the nodes of the holder and of the process that took
// the slot from it, the fault on the cluster (a cut between their nodes,
// or the holder's node paused or killed) in force when the slot was
// taken, and whether the holder was ever told. For any other property:
// the node of the process whose operation showed the failure, and the
// faults on the cluster in force then and struck before. It explains; it
// excuses nothing: a partition is no excuse for a double hold the holder
// could not see, nor for a slot the broker lost.
func explainOnCluster(v *verdict.Verdict, events []histories.Event, c *Cluster) {
	if v.Status != verdict.Fail || len(v.Ops) == 0 {
		return
	}
	if v.Property != SlotExclusive {
		explainFailureOnCluster(v, events, c)
		return
	}
	if len(v.Ops) < 2 {
		return
	}
	take, held := at(events, v.Ops[0]), at(events, v.Ops[1])
	if take < 0 || held < 0 {
		return
	}
	taker, holder := events[take].Process, events[held].Process
	nt, nh := c.NodeOf[taker], c.NodeOf[holder]
	if taker == holder || nt == "" || nh == "" {
		return
	}
	var b strings.Builder
	if !strings.HasSuffix(v.Detail, ".") {
		b.WriteString(".")
	}
	fmt.Fprintf(&b, " On the cluster (%s): %s held it through %s, %s took it through %s", c.mode(), holder, nh, taker, nt)
	if nt == nh {
		b.WriteString(", the same node, so no partition explains it.")
		v.Detail += b.String()
		return
	}
	if f, ok := separating(events, take, nh, nt, c); ok {
		fmt.Fprintf(&b, ", while %s: %s had declared %s down and let %s take the slot %s's queue still held there", f, nt, nh, taker, holder)
	} else {
		fmt.Fprintf(&b, ", with no fault on the cluster between %s and %s in force", nh, nt)
	}
	// The holder's first operation to end after the take: a verify that
	// said not held is how it was told.
	told, invoked := false, -1
	for _, e := range events[take+1:] {
		if e.Process != holder {
			continue
		}
		if e.Type == histories.Invoke {
			invoked = e.Index
			continue
		}
		if e.F == histories.Verify && e.Type == histories.Ok {
			if x := ValueOf(&e); x != nil && x.Held != nil && !*x.Held {
				fmt.Fprintf(&b, "; %s was told only by its verify (#%d), which said not held", holder, invoked)
				told = true
			}
		}
		break
	}
	if !told {
		fmt.Fprintf(&b, "; %s was not told it had lost the slot", holder)
	}
	b.WriteString(".")
	v.Detail += b.String()
}

// explainFailureOnCluster says, for a failure other than a double
// hold, through which node the operation that showed it went, and what
// had struck the cluster by then: the faults still in force, and those
// that struck and ended.
func explainFailureOnCluster(v *verdict.Verdict, events []histories.Event, c *Cluster) {
	op := at(events, v.Ops[0])
	if op < 0 {
		return
	}
	var b strings.Builder
	if !strings.HasSuffix(v.Detail, ".") {
		b.WriteString(".")
	}
	e := events[op]
	fmt.Fprintf(&b, " On the cluster (%s): %s %s (#%d)", c.mode(), e.Process, e.F, e.Index)
	if n := c.NodeOf[e.Process]; n != "" {
		fmt.Fprintf(&b, " went through %s", n)
	}
	inForce, ended := clusterFaults(events, op, c)
	var now, before []string
	for _, f := range inForce {
		now = append(now, f.String())
	}
	for _, f := range ended {
		before = append(before, f.String())
	}
	switch {
	case len(now) == 0 && len(before) == 0:
		b.WriteString("; no fault had struck the cluster before it")
	default:
		if len(now) > 0 {
			fmt.Fprintf(&b, " while %s", strings.Join(now, ", and "))
		}
		if len(before) > 0 {
			if len(now) > 0 {
				b.WriteString("; before it")
			} else {
				b.WriteString("; before it, with no fault on the cluster in force")
			}
			fmt.Fprintf(&b, ", %s", strings.Join(before, ", and "))
		}
	}
	b.WriteString(".")
	v.Detail += b.String()
}

// A clusterFault is a fault that struck the cluster, as a history
// records it: a partition (Cut) or a node paused or killed (Node), cited
// by the index of its invoke (From) and of the invoke that ended it (To,
// -1 while in force).
type clusterFault struct {
	Cut, Node, Verb string
	From, To        int
}

func (f clusterFault) String() string {
	if f.Cut != "" {
		if f.To < 0 {
			return fmt.Sprintf("the partition at #%d cut %s and was not healed", f.From, f.Cut)
		}
		return fmt.Sprintf("the partition at #%d cut %s, healed at #%d", f.From, f.Cut, f.To)
	}
	if f.To < 0 {
		return fmt.Sprintf("%s was %s (#%d)", f.Node, f.Verb, f.From)
	}
	again := "started again"
	if f.Verb == "paused" {
		again = "continued"
	}
	return fmt.Sprintf("%s was %s (#%d) and %s (#%d)", f.Node, f.Verb, f.From, again, f.To)
}

// clusterFaults are the faults on the cluster that struck before
// events[at]: those still in force then, and those that had ended, each
// in the order they struck.
func clusterFaults(events []histories.Event, at int, c *Cluster) (inForce, ended []clusterFault) {
	// A node's faults are recorded under its name; a process's (a kill of
	// c1) under the process's, which c knows.
	isNode := func(name string) bool { _, proc := c.NodeOf[name]; return name != "" && !proc }
	invoked := map[string]int{} // the index of each fault's invoke, by fault
	var all []clusterFault
	open := func(match func(clusterFault) bool) int {
		return slices.IndexFunc(all, func(f clusterFault) bool { return f.To < 0 && match(f) })
	}
	for _, e := range events[:at] {
		if e.Process != "nemesis" {
			continue
		}
		if e.Type == histories.Invoke {
			invoked[e.F] = e.Index
			continue
		}
		f := histories.FaultOf(&e)
		if f == nil || e.Type != histories.Info {
			continue
		}
		index := invoked[e.F] // cited as operations are: by their invoke
		switch {
		case e.F == histories.Partition && f.Cut != "":
			all = append(all, clusterFault{Cut: f.Cut, From: index, To: -1})
		case e.F == histories.Heal && f.Cut != "":
			if i := open(func(g clusterFault) bool { return g.Cut == f.Cut }); i >= 0 {
				all[i].To = index
			}
		case (e.F == histories.Kill || e.F == histories.Pause) && f.Cut == "" && isNode(f.Process):
			verb := "paused"
			if e.F == histories.Kill {
				verb = "killed"
			}
			all = append(all, clusterFault{Node: f.Process, Verb: verb, From: index, To: -1})
		case (e.F == histories.Resume || e.F == histories.RestartBroker) && isNode(f.Process):
			if i := open(func(g clusterFault) bool { return g.Node == f.Process }); i >= 0 {
				all[i].To = index
			}
		}
	}
	for _, f := range all {
		if f.To < 0 {
			inForce = append(inForce, f)
		} else {
			ended = append(ended, f)
		}
	}
	return inForce, ended
}

// separating is the fault on the cluster in force at events[at] that
// parts node a from node b (a cut between them either way, or a's node
// paused or killed), described with its events' indexes.
func separating(events []histories.Event, at int, a, b string, c *Cluster) (string, bool) {
	inForce, _ := clusterFaults(events, at, c)
	var found []string
	for _, f := range inForce {
		switch {
		case f.Cut != "":
			cut := histories.Fault{Cut: f.Cut}
			dirs := cut.Directions()
			if slices.Contains(dirs, [2]string{a, b}) || slices.Contains(dirs, [2]string{b, a}) {
				found = append(found, fmt.Sprintf("the partition at #%d cut %s (%s) and was not healed", f.From, f.Cut, cutWords(dirs, a, b)))
			}
		case f.Node == a:
			found = append(found, fmt.Sprintf("%s was %s (#%d)", a, f.Verb, f.From))
		}
	}
	if len(found) == 0 {
		return "", false
	}
	slices.Sort(found)
	return strings.Join(found, ", and "), true
}

// cutWords says how a cut parts a from b: both ways, or one way.
func cutWords(dirs [][2]string, a, b string) string {
	ab, ba := slices.Contains(dirs, [2]string{a, b}), slices.Contains(dirs, [2]string{b, a})
	switch {
	case ab && ba:
		return fmt.Sprintf("%s and %s cut off from each other", a, b)
	case ab:
		return fmt.Sprintf("%s's packets to %s dropped, one way", a, b)
	}
	return fmt.Sprintf("%s's packets to %s dropped, one way", b, a)
}

// at is the position in events of the event of history index i, -1 if
// none.
func at(events []histories.Event, i int) int {
	if i < len(events) && events[i].Index == i {
		return i
	}
	return slices.IndexFunc(events, func(e histories.Event) bool { return e.Index == i })
}
