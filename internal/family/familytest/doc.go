// Package familytest holds, in its tests, a lock family that lives
// nowhere else: a try-lock with a deterministic simulated backend, a
// mutant, a checker and an explore matrix, registered with package family
// and proven through the whole command line (cmd/lockprover/cli) with no other
// family linked in. Its side of the process protocol (process_test.go) is
// built on the generic launcher (adapters/process) alone: its reference
// served over the protocol, validate-impl, and prove --impl against
// processes of the test binary itself. It is the proof that the family
// seam holds: a new family plugs into every verb it supports through its
// descriptor alone.
package familytest
