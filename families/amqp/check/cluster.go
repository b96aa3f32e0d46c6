package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
)

// Cluster is what a run on a RabbitMQ cluster adds to its evidence: the
// cluster's partition handling mode and the node each process connected
// to, so that a double hold can be explained by what struck the cluster.
type Cluster struct {
	Mode   string            // ignore, pause_minority or autoheal
	NodeOf map[string]string // process -> node (n1, n2, ...)
}

// explainOnCluster adds to a failure of slot-exclusive the cluster's side
// of it: the nodes of the holder and of the process that took the slot
// from it, the fault on the cluster (a cut between their nodes, or the
// holder's node paused or killed) in force when the slot was taken, and
// whether the holder was ever told. It explains; it excuses nothing: a
// partition is no excuse for a double hold the holder could not see.
func explainOnCluster(v *model.Verdict, events []histories.Event, c *Cluster) {
	if v.Property != SlotExclusive || v.Status != model.Fail || len(v.Ops) < 2 {
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
	fmt.Fprintf(&b, " On the cluster (partition handling %s): %s held it through %s, %s took it through %s", c.Mode, holder, nh, taker, nt)
	if nt == nh {
		b.WriteString(", the same node, so no partition explains it.")
		v.Detail += b.String()
		return
	}
	if f, ok := separating(events, take, nh, nt); ok {
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

// separating is the fault on the cluster in force at events[at] that
// parts node a from node b (a cut between them either way, or a's node
// paused or killed), described with its events' indexes.
func separating(events []histories.Event, at int, a, b string) (string, bool) {
	type struck struct{ index int }
	cuts := map[string]struck{}  // partitions in force, by cut
	nodes := map[string]struck{} // nodes paused or killed, by node
	kinds := map[string]string{}
	invoked := map[string]int{} // the index of each fault's invoke, by fault
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
		e.Index = invoked[e.F] // cited as operations are: by their invoke
		switch {
		case e.F == histories.Partition && f.Cut != "":
			cuts[f.Cut] = struck{e.Index}
		case e.F == histories.Heal && f.Cut != "":
			delete(cuts, f.Cut)
		case (e.F == histories.Kill || e.F == histories.Pause) && f.Process == a:
			nodes[a], kinds[a] = struck{e.Index}, e.F
		case (e.F == histories.Resume || e.F == histories.RestartBroker) && f.Process == a:
			delete(nodes, a)
		}
	}
	var found []string
	for cut, s := range cuts {
		f := histories.Fault{Cut: cut}
		dirs := f.Directions()
		if slices.Contains(dirs, [2]string{a, b}) || slices.Contains(dirs, [2]string{b, a}) {
			found = append(found, fmt.Sprintf("the partition at #%d cut %s (%s) and was not healed", s.index, cut, cutWords(dirs, a, b)))
		}
	}
	if s, ok := nodes[a]; ok {
		verb := "paused"
		if kinds[a] == histories.Kill {
			verb = "killed"
		}
		found = append(found, fmt.Sprintf("%s was %s (#%d)", a, verb, s.index))
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
