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
	"github.com/lockprover/lockprover/internal/gctune"
)

// gcPercent is the garbage collector's least GOGC unless the environment
// sets one. A search's live heap is small (a few plans' worlds and the
// tallies) while it allocates fast (a plan's world, history and verdicts,
// some 100 kB, thousands of times a second): at Go's default of 100 it
// collected some eighty times a second on the simulator, and its marking,
// assists and write barriers took a fifth of the run's CPU. gctune keeps
// GOGC at 400 or more, and high enough that 64 MiB may be allocated
// between two collections: a proof on the simulator then collects a few
// times a second, for a peak of some 130 MiB (docs/architecture.md,
// Speed), while an exhaustive search holding gigabytes keeps 400.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		gctune.Start(gcPercent)
	}
	os.Exit(cli.Main())
}
