package lease

import "context"

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
