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
