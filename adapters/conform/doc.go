// Package conform answers "is the simulator telling the truth?": it runs
// the same operations on package sim and on a real RabbitMQ broker and
// compares what a client observes, step by step. It backs
// `lockprover conform`.
//
// A Server (Open) is the real broker: its AMQP URL, rabbitmqctl for its
// node, and a random name prefix (lpconf-<hex>-) that every queue and
// connection it creates starts with; Close deletes every such queue. Each
// run gets a fresh Env (Server.NewEnv), the semantics.Env of the real
// broker, with a sub-prefix of its own, cleaned up after the run.
//
// Part 1 (Server.RunTable, Server.RunCase) runs the semantics table of
// package sim/rabbitmqsim/semantics (broker-semantics.md as data) on both sides; see
// Divergent for the rule that compares a step. Part 2
// (Server.Differential) draws sequences of low-level operations (Op) with
// rapid, runs each on both sides, and shrinks the first divergence to a
// minimal sequence; see diff.go for what it compares and what it leaves
// out, and why.
//
// rabbitmqctl: queries go through one long-lived `rabbitmqctl eval` query
// loop (about a millisecond each) rather than one CLI run each (about a
// second); see rabbitmq.Ctl. The timed table cases and part 2 need it.
package conform
