package amqpprotocol

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// slowToAnswer answers init half a second after it came, and every
// operation at once, unsupported, having sent the broker nothing: at init,
// silent with its request in flight, waiting on nothing the protocol
// shows (no consumer).
const slowToAnswer = `read -r l; sleep 0.5; echo '{"id":1,"type":"init_ok"}'; ` +
	`while read -r l; do id=$(printf '%s' "$l" | sed 's/.*"id": *\([0-9]*\).*/\1/'); ` +
	`echo "{\"id\":$id,\"type\":\"error\",\"code\":\"unsupported\",\"definite\":true}"; done`

// A search meets a process it cannot read as waiting (silent past the
// settle window with a request in flight and no consumer): each such
// schedule is undecided, nothing below it searched, and the search says
// which process and where, never that the scope holds.
func TestSilentProcessIsUndecided(t *testing.T) {
	was := searchSettle
	searchSettle = 200 * time.Millisecond
	defer func() { searchSettle = was }()
	impl := NewProcesses(slowToAnswer)
	defer impl.Stop()
	c := amqprun.Config{Kind: histories.Mutex, Target: amqprun.Simulator{Wire: Wire("", -1)}, Impl: impl}
	o, err := prover.Exhaust{Config: prover.Config{Subject: c, Out: t.TempDir()}, Scope: prover.ExhaustScope{Clients: 1, Ops: 1}, Context: context.Background()}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if o.Found != nil || o.Undecided == 0 || o.Undecided != o.Schedules {
		t.Fatalf("%d of %d schedules undecided, found %v: want every schedule undecided", o.Undecided, o.Schedules, o.Found)
	}
	if want := "sent nothing for 200ms with an operation in flight"; !strings.Contains(o.FirstUndecided, want) {
		t.Errorf("the first undecided: %q, want it to say %q", o.FirstUndecided, want)
	}
}
