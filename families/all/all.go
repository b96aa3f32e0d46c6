// Package all registers every lock family lockprover proves (package
// family): a program that proves them all, such as cmd/lockprover, links
// them in with a blank import of this package.
//
// Each family's entry here wires its package (families/amqp,
// families/dbsemaphore), with its side of the process protocol (its
// Processes, Serve and Validate, built on the generic launcher,
// adapters/process), to the command line and to its backends'
// command-line defaults; the checkers a family's kinds need are linked in
// with it.
package all

import (
	_ "github.com/lockprover/lockprover/families/lease" // the lease checker, for db-semaphore's histories
)
