// Command lockprover proves distributed lock implementations: it draws
// interleavings of clients, admins and faults, runs them against a lock
// family's reference, a mutant of it or an implementation in any
// language, records what every client saw and checks the histories
// against the family's properties.
//
// Usage:
//
//	lockprover <command> [flags]
//
// Run "lockprover help" for the commands.
package main

import (
	"os"

	"github.com/lockprover/lockprover/cmd/lockprover/cli"
	_ "github.com/lockprover/lockprover/families/all" // every lock family
)

func main() { os.Exit(cli.Main()) }
