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
	"runtime/debug"

	"github.com/lockprover/lockprover/cmd/lockprover/cli"
	_ "github.com/lockprover/lockprover/families/all" // every lock family
)

// gcPercent is the garbage collector's GOGC unless the environment sets
// one. A search's live heap is small (a few plans' worlds and the tallies)
// while it allocates fast (a plan's world, history and verdicts, some
// 130 kB, thousands of times a second): at Go's default of 100 it
// collected some eighty times a second on the simulator, and its marking,
// assists and write barriers took a fifth of the run's CPU. At 400 a
// proof on the simulator takes that much less, for a peak of some 65 MiB
// instead of 40 (docs/architecture.md, Speed).
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(cli.Main())
}
