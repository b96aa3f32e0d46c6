package leaserun

import (
	"fmt"

	"github.com/lockprover/lockprover/histories"
)

// AnsweredBefore says what is wrong with history h for a plan of real time
// that needs process first's f1 answered (ok, fail or info) before
// process then's f2 was sent, or "" when it was: the order a hand plan is
// about, which a loaded machine can undo (a run that did not show it
// shows nothing, and runs again).
func AnsweredBefore(h []histories.Event, first, f1, then, f2 string) string {
	answered, sent := int64(-1), int64(-1)
	for _, e := range h {
		switch {
		case e.Process == first && e.F == f1 && e.Type != histories.Invoke && answered < 0:
			answered = e.Time
		case e.Process == then && e.F == f2 && e.Type == histories.Invoke && sent < 0:
			sent = e.Time
		}
	}
	if answered < 0 || sent < 0 || answered > sent {
		return fmt.Sprintf("%s's %s was not answered (at %d ns) before %s's %s was sent (at %d ns)", first, f1, answered, then, f2, sent)
	}
	return ""
}
