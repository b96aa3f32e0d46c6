// Package lockprover proves distributed lock implementations from go
// test: it draws plans of clients, admins, faults and schedules, runs each
// on a target (a deterministic simulator, a real server, or an
// implementation in any language over the process protocol), judges the
// history every plan gives against what the lock's design promises, and
// shrinks a plan that breaks a property to a minimal counterexample.
//
// What is proven is a Subject, which each lock family's runner gives as
// its Config: amqprun.Config for amqp-locks (adapters/runners/amqprun),
// dbsemrun.Config for the database semaphore, redlockrun.Config for
// Redlock and priority Redlock, consulsemrun.Config for Consul's semaphore
// recipe, pgadvisoryrun.Config for PostgreSQL's advisory lock. Its zero
// value proves the family's reference on its simulator with every fault:
//
//	func TestMyLocks(t *testing.T) {
//		lockprover.Check(t, lockprover.Config{Subject: amqprun.Config{}})
//	}
//
// An amqp-locks implementation written in Go is proven the same way, in
// the test's process, on the simulated broker served on loopback:
// amqpgo.Impl (adapters/runners/amqprun/amqpgo) says how a client's
// handle is made from an AMQP URL, and its Config is the Subject.
//
// CheckExhaust searches a scope whole instead of drawing plans: every plan
// of its clients, operations and faults, under every schedule the
// simulator can produce (docs/exhaustive.md), a Go lock's too.
//
// -rapid.checks, -rapid.seed, fail files and shrinking work as rapid users
// expect; a counterexample goes to the test's artifact directory. The
// lockprover command (cmd/lockprover) does the rest: proofs bounded by
// time, shards, reports, replays, histories recorded elsewhere.
package lockprover

import (
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
)

// A Subject is what a proof is about: a lock design's plans, drawn and
// run on one target against one implementation (its reference, a mutant,
// or yours). A family's Config is one.
type Subject = prover.Subject

// Config says what to prove (Subject, required) and how to judge it: the
// properties whose violation fails a plan (nil: all), the family's judging
// model ("" for its standard one), the time budget of each
// linearizability check (0: 10 s), and where a counterexample goes (""
// for the test's artifact directory).
type Config = prover.Config

// Scope bounds a family's plans: a mutant to prove instead of the
// reference, how many clients, steps and faults a plan may draw, and which
// faults. Every family's Config embeds one; its zero value gives each
// field its default.
type Scope = prover.Scope

// Check proves c.Subject in t: it draws plans with rapid (as many as
// -rapid.checks says), runs and judges each, and fails t with the minimal
// counterexample of the first plan that breaks a property, written out with
// the command that replays it.
func Check(t *testing.T, c Config) {
	t.Helper()
	prover.Check(t, c)
}

// ExhaustScope bounds an exhaustive search (CheckExhaust): how many
// clients, operations per client, admins and faults its plans hold, and
// a bound on each schedule's preemptions or delays.
type ExhaustScope = prover.ExhaustScope

// CheckExhaust proves c.Subject in t under every plan of scope and every
// schedule of each, as `lockprover prove --exhaustive` does, and fails t
// with the shortest counterexample; or if the scope is refused (too
// large), or some schedules were undecided (the scope then not searched
// whole). What it covered is logged.
func CheckExhaust(t *testing.T, c Config, scope ExhaustScope) {
	t.Helper()
	prover.CheckExhaust(t, c, scope)
}
