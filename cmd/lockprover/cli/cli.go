// Package cli is lockprover's command line: it parses each verb's flags
// and loops over the lock families registered in package family (it
// imports none of them). cmd/lockprover runs it with every family linked
// in (cmd/lockprover/all); a test can run it with a family of its own.
package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes shared by every command.
const (
	exitOK           = 0
	exitViolation    = 1
	exitUsage        = 2
	exitInconclusive = 3
	// exitInterrupted (130) is in flags.go.
)

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"prove", "draw plans and prove a target on them (default: the reference on the simulator)", runProve},
		{"check", "judge recorded histories (JSON lines, Jepsen's EDN or JSON) against every property", runCheck},
		{"replay", "run a saved plan again, on any target, and judge its history", runReplay},
		{"merge", "combine prove's shards (--shard i/n --json FILE) into one result, summary and JUnit file", runMerge},
		{"explore", "prove a design's open choices under each group of faults: a Markdown table", runExplore},
		{"mutants", "list a family's mutants, each with the property that must catch it; --detect N proves each", runMutants},
		{"conform", "hold a simulator to its real server: drawn sequences run on both and compared step by step", runConform},
		{"bench", "cost per operation on a real server: latency and what each operation sent, beside the floor", runBench},
		{"validate-impl", "check an implementation's handling of the process protocol before proving it", runValidateImpl},
		{"serve-reference", "serve the reference (or a mutant) over the process protocol, for --impl", runServeReference},
		{"servers", "list the server versions real targets run on (--server-version); --make makes their Debian roots", runServers},
		{"version", "print lockprover's version and the revision it was built from", runVersion},
	}
}

// Main runs the command line os.Args[1:] on the process's stdout and
// stderr (passwords in URLs redacted) and returns its exit status.
func Main() int { return Run(os.Args[1:], os.Stdout, redactingWriter{os.Stderr}) }

// Run runs one command line (args without the program's name) and returns
// its exit status: 0 every property held, 1 a violation, 2 usage or bad
// input, 3 inconclusive, 130 interrupted.
func Run(args []string, stdout, stderr io.Writer) int { return run(args, stdout, stderr) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" && len(args) == 1 {
		if len(args) == 0 {
			usage(stderr)
			return exitUsage
		}
		usage(stdout)
		return exitOK
	}
	if args[0] == "-version" || args[0] == "--version" {
		args = []string{"version"}
	}
	if args[0] == "help" {
		if args[1] == "--markdown" && len(args) == 2 {
			// The whole reference, docs/cli.md.
			if err := CLIDoc(stdout); err != nil {
				fmt.Fprintf(stderr, "lockprover: help --markdown: %v\n", err)
				return exitUsage
			}
			return exitOK
		}
		if len(args) > 2 {
			fmt.Fprintf(stderr, "lockprover: help takes one command, not %q\n", strings.Join(args[1:], " "))
			return exitUsage
		}
		for _, c := range commands() {
			if c.name == args[1] {
				// The verb's usage, on stdout.
				c.run([]string{"-h"}, stdout, stdout)
				return exitOK
			}
		}
		fmt.Fprintf(stderr, "lockprover: help: unknown command %q\n", args[1])
		usage(stderr)
		return exitUsage
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "lockprover: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: lockprover <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		lines := wrap(strings.Fields(c.summary), helpWidth-19)
		fmt.Fprintf(w, "  %-16s %s\n", c.name, strings.Join(lines, "\n"+strings.Repeat(" ", 19)))
	}
	fmt.Fprintln(w, "\nRun \"lockprover help <command>\" for a command's flags (\"lockprover help --markdown\"\nfor every command's, as docs/cli.md). Flags may come before or after a command's\narguments.\n\nExit status: 0 every property held, 1 a violation, 2 usage or bad input\n(including a broker or database that cannot be used), 3 inconclusive, 130\ninterrupted.")
}
