package rabbitmqsim

import "testing"

// TestNodeStates holds each state of a node's life to what it says of the
// node (its VM alive, its application running, being started, paused by
// pause_minority) and to where the moves made from it lead.
func TestNodeStates(t *testing.T) {
	type says struct{ alive, app, starting, minority bool }
	cases := []struct {
		s                   nodeState
		name                string
		says                says
		killed, revived, to nodeState // after killed, revived, toStarting
	}{
		{nodeRunning, "running", says{true, true, false, false}, nodeKilled, -1, nodeStarting},
		{nodeStopped, "stopped", says{true, false, false, false}, nodeKilled, -1, nodeStarting},
		{nodeStarting, "starting", says{true, false, true, false}, nodeKilledStarting, -1, nodeStarting},
		{nodeBooting, "booting", says{true, false, true, false}, nodeKilledStarting, -1, nodeStarting},
		{nodeWaitsMajority, "waits-majority", says{true, false, false, true}, nodeKilled, -1, nodeStarting},
		{nodeWaitsAll, "waits-all", says{true, false, false, true}, nodeKilled, -1, nodeStarting},
		{nodeKilled, "killed", says{false, false, false, false}, -1, nodeStopped, nodeKilledStarting},
		{nodeKilledStarting, "killed-starting", says{false, false, true, false}, -1, nodeStarting, nodeKilledStarting},
	}
	if len(cases) != len(nodeStates) {
		t.Fatalf("%d states tested, %d declared", len(cases), len(nodeStates))
	}
	for _, c := range cases {
		x := &node{state: c.s}
		if got := c.s.String(); got != c.name {
			t.Errorf("%d: String %q, want %q", int(c.s), got, c.name)
		}
		if got := (says{x.alive(), x.appRuns(), x.starting(), x.minority()}); got != c.says {
			t.Errorf("%s says %+v, want %+v", c.s, got, c.says)
		}
		for _, m := range []struct {
			name string
			move func(*node)
			want nodeState
		}{{"killed", (*node).killed, c.killed}, {"revived", (*node).revived, c.revived}, {"toStarting", (*node).toStarting, c.to}} {
			if m.want < 0 {
				continue // not a move made from this state
			}
			y := &node{state: c.s}
			m.move(y)
			if y.state != m.want {
				t.Errorf("%s, %s: %s, want %s", c.s, m.name, y.state, m.want)
			}
		}
	}
	if got := nodeState(99).String(); got != "nodeState(99)" {
		t.Errorf("an unknown state prints %q", got)
	}
}
