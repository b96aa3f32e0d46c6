package run

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// Faults merged into a history go in by time, never inside a nemesis
// operation in flight, and every index is renumbered (moved says where
// each old one went).
func TestWithFaults(t *testing.T) {
	h := []histories.Event{
		{Index: 0, Time: 10, Process: "nemesis", Type: histories.Invoke, F: histories.Kill, Value: &histories.Fault{Process: "c1"}},
		{Index: 1, Time: 30, Process: "nemesis", Type: histories.Info, F: histories.Kill, Value: &histories.Fault{Process: "c1"}},
		{Index: 2, Time: 40, Process: "c2", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
	}
	got, moved := WithFaults(h, FaultPair(histories.ForceClose, "c2", 20, "why"))
	var order []string
	for i, e := range got {
		if e.Index != i {
			t.Errorf("event %d has index %d", i, e.Index)
		}
		order = append(order, e.F+"/"+string(e.Type))
	}
	want := "kill/invoke kill/info force-close/invoke force-close/info acquire/invoke"
	if strings.Join(order, " ") != want {
		t.Errorf("order %v, want %s", order, want)
	}
	if moved[0] != 0 || moved[1] != 1 || moved[2] != 4 {
		t.Errorf("moved %v", moved)
	}
	if got[2].Time < got[1].Time {
		t.Errorf("times go back: %d after %d", got[2].Time, got[1].Time)
	}
}

// TimedOut names the connection of the first read or write that timed
// out, and nothing for another error or another operation.
func TestTimedOut(t *testing.T) {
	for _, tc := range []struct {
		err, op, local, peer string
		ok                   bool
	}{
		{"amqp connection error 501: read tcp 127.0.0.1:36324->127.0.0.1:46051: i/o timeout", "read", "127.0.0.1:36324", "127.0.0.1:46051", true},
		{"redlock: too few servers answered: write tcp 127.0.0.1:55692->127.0.0.1:38919: i/o timeout", "write", "127.0.0.1:55692", "127.0.0.1:38919", true},
		{"a: read tcp 1.1.1.1:1->2.2.2.2:2: connection reset by peer; b: read tcp 3.3.3.3:3->4.4.4.4:4: i/o timeout", "read", "3.3.3.3:3", "4.4.4.4:4", true},
		{"write tcp 127.0.0.1:55692->127.0.0.1:38919: i/o timeout", "read", "", "", false},
		{"read tcp 127.0.0.1:55692->127.0.0.1:38919: broken pipe", "read", "", "", false},
		{"context deadline exceeded", "read", "", "", false},
	} {
		local, peer, ok := TimedOut(tc.err, tc.op)
		if local != tc.local || peer != tc.peer || ok != tc.ok {
			t.Errorf("TimedOut(%q, %q) = %q, %q, %v; want %q, %q, %v", tc.err, tc.op, local, peer, ok, tc.local, tc.peer, tc.ok)
		}
	}
}
