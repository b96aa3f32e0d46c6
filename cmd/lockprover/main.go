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
	"fmt"
	"os"
	"runtime/pprof"

	_ "github.com/lockprover/lockprover/cmd/lockprover/all" // every lock family
	"github.com/lockprover/lockprover/cmd/lockprover/cli"
	"github.com/lockprover/lockprover/internal/gctune"
)

// gcPercent is the garbage collector's least GOGC unless the environment
// sets one. A search's live heap is small (a few plans' worlds and the
// tallies) while it allocates fast (a plan's world, history and verdicts,
// some 100 kB, thousands of times a second): at Go's default of 100 it
// collected some eighty times a second on the simulator, and its marking,
// assists and write barriers took a fifth of the run's CPU. gctune keeps
// GOGC at 400 or more, and high enough that 64 MiB may be allocated
// between two collections: a proof on the simulator then peaks at some
// 140 MiB (docs/architecture.md, Speed), while an exhaustive search
// holding gigabytes keeps 400. (32 MiB cost 6% more CPU on long runs
// and 3.5% less on short ones, from touching less fresh memory; 16 MiB,
// 4 to 8% more on both.)
const gcPercent = 400

// cpuProfile names the variable that, set to a file's path, makes the
// binary write a CPU profile of its run there (scripts/pgo-profile makes
// cmd/lockprover/default.pgo, the compiler's profile, from such runs).
const cpuProfile = "LOCKPROVER_CPUPROFILE"

func main() { os.Exit(run()) }

// run is the binary: the collector's pace, the profile if asked for, and
// the command line's verb; it returns the exit code.
func run() int {
	if os.Getenv("GOGC") == "" {
		gctune.Start(gcPercent)
	}
	path := os.Getenv(cpuProfile)
	if path == "" {
		return cli.Main()
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lockprover: %s=%s: %v\n", cpuProfile, path, err)
		return 2
	}
	code := cli.Main()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "lockprover: %s=%s: %v\n", cpuProfile, path, err)
		code = max(code, 1)
	}
	return code
}
