package prover

import "context"

// An ImplementationError is the implementation under test itself failing,
// as opposed to its backend (a broker or database out of reach) or a fault
// a plan injected: its process did not start, exited or hung before its
// handshake was done, broke the protocol in it, or refused to serve.
// Whatever runs a plan must not retry it (another try meets the same
// implementation), and reports it as the implementation's problem, with
// Msg, which says why.
type ImplementationError struct{ Msg string }

func (e *ImplementationError) Error() string { return e.Msg }

// An UndecidedError is a run that says nothing of the implementation
// either way, which an exhaustive search counts as undecided, searching
// nothing below it, and never as a pass: an implementation in processes
// of its own that the simulator serving it could not read as waiting or
// about to send (it may have been computing still, or waiting on a timer
// of its own), so that the order of its steps was the machine's, not the
// schedule's. Why says which process and where.
type UndecidedError struct{ Why string }

func (e *UndecidedError) Error() string { return "undecided: " + e.Why }

// A Warmer is an implementation in processes that can start a run's
// processes ahead of its plan (adapters/process: Launcher.Warm), so that
// their start-up (an interpreter loading its modules) is over before the
// plan's clock starts and its clients begin together, as the plan has
// them. A family's runner on a real backend warms n processes for run (its
// unique name: a lock's, a table prefix) before it takes the time its
// history counts from, and drains what no process took once the run ends.
type Warmer interface {
	Warm(ctx context.Context, run string, n int)
	Drain(run string)
}

// Warm warms n processes of impl for run, if it is a Warmer, and returns
// what drains them.
func Warm(ctx context.Context, impl any, run string, n int) (drain func()) {
	w, ok := impl.(Warmer)
	if !ok {
		return func() {}
	}
	w.Warm(ctx, run, n)
	return func() { w.Drain(run) }
}
