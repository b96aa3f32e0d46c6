package prover

// An ImplementationError is the implementation under test itself failing,
// as opposed to its backend (a broker or database out of reach) or a fault
// a plan injected: its process did not start, exited or hung before its
// handshake was done, broke the protocol in it, or refused to serve.
// Whatever runs a plan must not retry it (another try meets the same
// implementation), and reports it as the implementation's problem, with
// Msg, which says why.
type ImplementationError struct{ Msg string }

func (e *ImplementationError) Error() string { return e.Msg }
