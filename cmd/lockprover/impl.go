package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/prover"
)

func runServeReference(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-reference", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: lockprover serve-reference [flags]\n\nServes the reference implementation (or a mutant of it) over the process\nprotocol (docs/protocol.md) on stdin and stdout, for --impl.\n\nFlags:")
		fs.PrintDefaults()
	}
	mutant := fs.String("mutant", "", "serve this mutant of the reference instead")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *mutant != "" && prover.MutantNamed(*mutant) == nil {
		fmt.Fprintf(stderr, "serve-reference: --mutant: no mutant named %q\n", *mutant)
		return exitUsage
	}
	if err := process.Serve(os.Stdin, stdout, prover.Options{}, *mutant); err != nil {
		fmt.Fprintf(stderr, "serve-reference: %v\n", err)
		return exitViolation
	}
	return exitOK
}

func runValidateImpl(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate-impl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: lockprover validate-impl --impl COMMAND [flags]\n\nChecks an implementation's handling of the process protocol (docs/protocol.md)\nagainst a real broker, and says what to fix. Exit status 0 when every check\npasses, 1 otherwise.\n\nFlags:")
		fs.PrintDefaults()
	}
	impl := fs.String("impl", "", "the command that starts one process of the implementation")
	amqpURL := fs.String("amqp-url", "", "the broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *impl == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "validate-impl: give the implementation's command with --impl, and nothing else")
		return exitUsage
	}
	if !process.Validate(*impl, brokerURL(*amqpURL), stdout) {
		fmt.Fprintln(stdout, "\nthe implementation does not follow the protocol yet: see docs/protocol.md")
		return exitViolation
	}
	fmt.Fprintln(stdout, "\nthe implementation follows the protocol: prove it with lockprover prove --target rabbitmq --impl ...")
	return exitOK
}
