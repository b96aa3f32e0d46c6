// Package postgresconform answers "is the simulator telling the truth
// about PostgreSQL?": it runs drawn sequences of the statements the
// pg-advisory family sends on sim/postgressim and on a real PostgreSQL,
// and compares the answers step by step (differential.go says what is
// compared, and when a run cannot be judged). It backs
// `lockprover conform --kind pg-advisory` (Conform).
//
// It lives beside the other differentials (adapters/conform), not in the
// simulator, so that sim/postgressim imports no server's client: the
// differential speaks to PostgreSQL through pgx.
package postgresconform
