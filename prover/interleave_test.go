package prover

import (
	"sort"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// Interleavings names the orders a history shows, and only those: an
// operation after its process's own last success, and after the successes
// of others that ended since its process's last operation; the nemesis and
// the final probe are no one's.
func TestInterleavings(t *testing.T) {
	var h []histories.Event
	add := func(proc string, typ histories.Type, f string) {
		h = append(h, histories.Event{Index: len(h), Process: proc, Type: typ, F: f, Lock: "sem"})
	}
	add("admin", histories.Invoke, "create")
	add("admin", histories.Ok, "create")
	add("admin2", histories.Invoke, "change") // after admin's create
	add("admin2", histories.Ok, "change")
	add("nemesis", histories.Invoke, "kill")
	add("nemesis", histories.Info, "kill")
	add("admin", histories.Invoke, "count") // after own create, after admin2's change
	add("c1", histories.Invoke, "acquire")  // after admin's create and admin2's change
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
		"acquire after another's change", "acquire after another's create", "acquire after own release",
		"change after another's create", "count after another's change", "count after own create",
		"release after another's count", "release after own acquire",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}
