package prover

import (
	"sort"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// Interleavings names the meetings a history shows, and only those, with
// whose operations met: an operation after its process's own last
// success, after the successes of others that ended since its process's
// last operation, during others' pending operations, and a fault during
// its target's pending operation (an untargeted one, during everyone's;
// a cut of a cluster's links told apart from a client's partition); the
// final probe is no one's.
func TestInterleavings(t *testing.T) {
	var h []histories.Event
	add := func(proc string, typ histories.Type, f string) {
		h = append(h, histories.Event{Index: len(h), Process: proc, Type: typ, F: f, Lock: "sem"})
	}
	fault := func(f, target string) {
		h = append(h, histories.Event{Index: len(h), Process: "nemesis", Type: histories.Invoke, F: f, Value: &histories.Fault{Process: target}})
	}
	add("admin", histories.Invoke, "create")
	add("admin", histories.Ok, "create")
	add("admin2", histories.Invoke, "change") // after admin's create
	add("admin2", histories.Ok, "change")
	add("nemesis", histories.Invoke, "kill")
	add("nemesis", histories.Info, "kill")
	add("admin", histories.Invoke, "count") // after own create, after admin2's change
	add("c1", histories.Invoke, "acquire")  // after admin's create and admin2's change, during admin's count
	fault("pause", "c1")                    // during c1's acquire, not admin's count
	fault("restart-broker", "")             // during both
	fault("resume", "c1")                   // no fault: the end of one
	h = append(h, histories.Event{Index: len(h), Process: "nemesis", Type: histories.Invoke, F: "partition",
		Value: &histories.Fault{Cut: "n1>n2 n2>n1"}}) // of a cluster's links, during both
	add("c1", histories.Ok, "acquire")
	add("admin", histories.Ok, "count")
	add("c1", histories.Invoke, "release") // after own acquire, after admin's count
	add("c1", histories.Ok, "release")
	add("c1", histories.Invoke, "acquire") // after own release only
	add("c1", histories.Fail, "acquire")
	add("c1", histories.Invoke, "acquire") // after nothing: its last failed
	add("c1", histories.Info, "acquire")
	add("probe", histories.Invoke, "count")
	add("probe", histories.Ok, "count")
	var got []string
	for _, i := range Interleavings(h) {
		got = append(got, i.String())
	}
	sort.Strings(got)
	want := []string{
		"acquire after another's change (client/admin)", "acquire after another's create (client/admin)",
		"acquire after own release (client/client)", "acquire during another's count (client/admin)",
		"change after another's create (admin/admin)", "count after another's change (admin/admin)",
		"count after own create (admin/admin)", "partition of nodes during acquire (client)",
		"partition of nodes during count (admin)", "pause during acquire (client)",
		"release after another's count (client/admin)", "release after own acquire (client/client)",
		"restart-broker during acquire (client)", "restart-broker during count (admin)",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}
