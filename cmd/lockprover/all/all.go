// Package all links every lock family lockprover proves into a program
// that proves them all, such as cmd/lockprover: one blank import a family.
// Each family's descriptor (cmd/lockprover/<f>cli), in its own folder, registers
// it from an init, with its side of the process protocol, its targets'
// flags and the checkers its kinds need.
package all

import (
	_ "github.com/lockprover/lockprover/cmd/lockprover/amqpcli"       // amqp-locks: semaphore, mutex
	_ "github.com/lockprover/lockprover/cmd/lockprover/consulsemcli"  // consul-semaphore
	_ "github.com/lockprover/lockprover/cmd/lockprover/dbsemcli"      // db-semaphore
	_ "github.com/lockprover/lockprover/cmd/lockprover/pgadvisorycli" // pg-advisory
	_ "github.com/lockprover/lockprover/cmd/lockprover/redlockcli"    // redlock, priority-redlock
)
