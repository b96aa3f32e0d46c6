package leaserun

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// AnsweredBefore holds when first's operation was answered, however, before
// then's was sent, and says what is wrong otherwise: answered after, or
// never answered or sent.
func TestAnsweredBefore(t *testing.T) {
	ev := func(time int64, p, f string, typ histories.Type) histories.Event {
		return histories.Event{Time: time, Process: p, F: f, Type: typ}
	}
	rel, acq := histories.Release, histories.Acquire
	for _, c := range []struct {
		h    []histories.Event
		want string // "" or in the error
	}{
		{[]histories.Event{ev(1, "c1", rel, histories.Invoke), ev(2, "c1", rel, histories.Fail), ev(3, "c2", acq, histories.Invoke)}, ""},
		{[]histories.Event{ev(1, "c1", rel, histories.Invoke), ev(3, "c2", acq, histories.Invoke), ev(4, "c1", rel, histories.Ok)}, "c1's release was not answered (at 4 ns) before c2's acquire was sent (at 3 ns)"},
		{[]histories.Event{ev(1, "c1", rel, histories.Invoke), ev(3, "c2", acq, histories.Invoke)}, "(at -1 ns)"},
		{[]histories.Event{ev(1, "c1", rel, histories.Ok)}, "sent (at -1 ns)"},
	} {
		got := AnsweredBefore(c.h, "c1", rel, "c2", acq)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%v: %q, want %q", c.h, got, c.want)
		}
	}
}
