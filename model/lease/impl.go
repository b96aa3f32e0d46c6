package lease

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"syscall"
)

// An Impl is a lease family's implementation under test that runs as
// processes of its own, in any language (the family's protocol package
// starts them with the generic launcher, adapters/process, and speaks the
// process protocol, docs/protocol.md): one process per incarnation of a
// client, told session S when it starts, and spoken to as the family's
// client P.
type Impl[S, P any] interface {
	// Connect starts client name's process and sets it up for s. An error
	// is a *prover.ImplementationError when the implementation failed
	// itself (it did not start, or refused s); any other may pass if tried
	// again (the server out of reach during a fault).
	Connect(ctx context.Context, name string, s S) (P, error)
	// Stop kills every process still running.
	Stop()
	// String names the implementation, for reports.
	String() string
}

// A Process is an implementation's process as the nemesis strikes it.
type Process interface {
	// Signal sends sig to the process: SIGKILL for a kill.
	Signal(sig syscall.Signal)
}

// StartProcess starts the process of incarnation name of a client on a
// real backend (impl.Connect, told s), the way every lease family's runner
// does: a kill may strike while the process starts, so once it has
// started StartProcess takes mu, the runner's lock, and asks killed
// whether it did. A process started as its client was killed is killed at
// once (and handed to dropKilled, if set, which closes it where the family
// does) and StartProcess fails; any other is handed to adopt, still under
// mu, which keeps it (and stops it, in a family whose pauses may strike
// meanwhile). On an error the process returned is P's zero value.
func StartProcess[S any, P Process](ctx context.Context, impl Impl[S, P], name string, s S,
	mu sync.Locker, killed func() bool, dropKilled, adopt func(P)) (P, error) {
	var none P
	pc, err := impl.Connect(ctx, name, s)
	if err != nil {
		return none, err
	}
	mu.Lock()
	defer mu.Unlock()
	if killed() {
		pc.Signal(syscall.SIGKILL) // killed while it started
		if dropKilled != nil {
			dropKilled(pc)
		}
		return none, errors.New("killed")
	}
	adopt(pc)
	return pc, nil
}

// Kill kills the process *pc holds, read under mu (StartProcess's adopt
// sets it), and closes it, if it holds one: a run's end, which kills only
// the run's own processes (an Impl's Stop would end those of the other
// plans running beside it too).
func Kill[P interface {
	Process
	Close() error
}](mu sync.Locker, pc *P) {
	mu.Lock()
	p := *pc
	mu.Unlock()
	if any(p) != nil {
		p.Signal(syscall.SIGKILL)
		p.Close()
	}
}

// Ending marks a real backend's run ended (so that no incarnation starts
// after it) and returns the processes it had, for the family to end each
// as its backend wants.
func Ending[K comparable, P any](mu sync.Locker, ended *bool, procs map[K]P) []P {
	mu.Lock()
	defer mu.Unlock()
	*ended = true
	return slices.Collect(maps.Values(procs))
}
