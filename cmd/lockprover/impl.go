package main

import (
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"io"
	"os"
	"strings"

	"github.com/lockprover/lockprover/adapters/process"
)

func runServeReference(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve-reference", "serve-reference [--kind semaphore|db-semaphore] [--options K=V,...] [--mutant NAME]", `Serves the reference implementation (or a mutant of it) over the process
protocol (docs/protocol.md) on stdin and stdout, for --impl.`, stderr)
	mutant := fs.String("mutant", "", "serve this mutant of the reference instead")
	kind := fs.String("kind", "semaphore", "the family: semaphore (amqp-locks: the semaphore and mutex) or db-semaphore")
	opts := fs.String("options", "", "the reference's options as in plans, comma-separated: lazy_connect, channels=per-purpose, reconnect, plain_failure, scan_start=random, ...")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("serve-reference", pos, stderr) {
		return exitUsage
	}
	switch *kind {
	case dbsemaphore.Kind:
		return serveLease(*mutant, *opts, stdout, stderr)
	case "semaphore", "mutex":
	default:
		fmt.Fprintf(stderr, "serve-reference: --kind: want semaphore or %s, got %q\n", dbsemaphore.Kind, *kind)
		return exitUsage
	}
	if *mutant != "" && amqp.MutantNamed(*mutant) == nil {
		fmt.Fprintf(stderr, "serve-reference: --mutant: no mutant named %q (see lockprover mutants)\n", *mutant)
		return exitUsage
	}
	o, err := amqp.ParseOptions(amqp.Options{}, *opts)
	if err != nil {
		fmt.Fprintf(stderr, "serve-reference: --options: %v\n", err)
		return exitUsage
	}
	if err := process.Serve(os.Stdin, stdout, o, *mutant); err != nil {
		fmt.Fprintf(stderr, "serve-reference: %v\n", err)
		return exitViolation
	}
	return exitOK
}

// serveLease serves the database semaphore's reference (or a mutant) over
// the protocol; its design and fencing come from init.
func serveLease(mutant, opts string, stdout, stderr io.Writer) int {
	if opts != "" {
		fmt.Fprintln(stderr, "serve-reference: --options: the database semaphore takes its design and fencing from init")
		return exitUsage
	}
	o := process.LeaseServeOptions{Log: stderr}
	if mutant != "" {
		m := dbsemaphore.MutantNamed(mutant)
		if m == nil {
			fmt.Fprintf(stderr, "serve-reference: --mutant: no mutant named %q (see lockprover mutants --kind db-semaphore)\n", mutant)
			return exitUsage
		}
		o.Defects = m.Defects()
	}
	if err := process.ServeLease(os.Stdin, stdout, o); err != nil {
		fmt.Fprintf(stderr, "serve-reference: %v\n", err)
		return exitViolation
	}
	return exitOK
}

func runValidateImpl(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate-impl", "validate-impl --impl COMMAND [--amqp-url URL]", `Checks an implementation's handling of the process protocol (docs/protocol.md)
against a real broker, and says what to fix. The broker is tried first: one
that cannot be used is named at once (exit 2), not blamed on the
implementation.
Exit status: 0 every check passes, 1 the implementation does not follow the
protocol, 2 usage or a broker that cannot be used, 130 interrupted.`, stderr)
	impl := fs.String("impl", "", "the command that starts one process of the implementation")
	amqpURL := fs.String("amqp-url", "", "the broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("validate-impl", pos, stderr) {
		return exitUsage
	}
	if strings.TrimSpace(*impl) == "" {
		fmt.Fprintln(stderr, "validate-impl: --impl: give the command that starts one process of the implementation")
		return exitUsage
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	if code := preflight(ctx, "validate-impl", brokerURL(*amqpURL), stderr); code >= 0 {
		if code == exitUsage {
			fmt.Fprintln(stderr, "validate-impl: cannot reach the broker, so the implementation was not tried")
		}
		return code
	}
	passed := process.ValidateContext(ctx, *impl, brokerURL(*amqpURL), stdout)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "validate-impl: interrupted")
		return exitInterrupted
	}
	if !passed {
		fmt.Fprintln(stdout, "\nthe implementation does not follow the protocol yet: see docs/protocol.md")
		return exitViolation
	}
	fmt.Fprintln(stdout, "\nthe implementation follows the protocol: prove it with lockprover prove --target rabbitmq --impl ...")
	return exitOK
}
