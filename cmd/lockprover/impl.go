package main

import (
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"io"
	"os"
	"strings"

	"github.com/lockprover/lockprover/adapters/mysql"
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
	fs := newFlags("validate-impl", "validate-impl --impl COMMAND [--amqp-url URL]\n       lockprover validate-impl --kind db-semaphore --impl COMMAND [--dsn DSN] [--options design=...,fencing]", `Checks an implementation's handling of the process protocol (docs/protocol.md)
and says what to fix, before a long prove: an amqp-locks implementation (the
semaphore and the mutex) against a real broker, or with --kind db-semaphore a
database semaphore (lease lock) against a real MariaDB or MySQL, with the
session's design and fencing from --options (as prove's). The broker or
database is tried first: one that cannot be used is named at once (exit 2),
not blamed on the implementation. Queues and tables are made under names of
the check's own and removed at the end.
Exit status: 0 every check passes, 1 the implementation does not follow the
protocol, 2 usage or a broker or database that cannot be used, 130
interrupted.`, stderr)
	impl := fs.String("impl", "", "the command that starts one process of the implementation")
	kind := fs.String("kind", "semaphore", "the family: semaphore (amqp-locks: the semaphore and mutex) or "+dbsemaphore.Kind)
	amqpURL := fs.String("amqp-url", "", "the broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	dsn := fs.String("dsn", "", "--kind "+dbsemaphore.Kind+": the database, as a go-sql-driver/mysql DSN over TCP; default $LOCKPROVER_MYSQL_DSN, else "+mysql.DefaultDSN)
	opts := fs.String("options", "", "--kind "+dbsemaphore.Kind+": the session's design and fencing, comma-separated: design=master-row|row-per-slot, fencing")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("validate-impl", pos, stderr) {
		return exitUsage
	}
	var bad checks
	bad.add(strings.TrimSpace(*impl) == "", "--impl: give the command that starts one process of the implementation")
	bad.oneOf("kind", *kind, "semaphore", "mutex", dbsemaphore.Kind)
	var o dbsemaphore.Options
	if *kind == dbsemaphore.Kind {
		bad.add(given(fs, "amqp-url"), "--amqp-url is for amqp-locks; --kind %s takes --dsn", dbsemaphore.Kind)
		if *opts != "" {
			var err error
			o, err = dbsemaphore.ParseOptions(*opts)
			bad.add(err != nil, "--options: %v", err)
		}
	} else {
		for _, name := range []string{"dsn", "options"} {
			bad.add(given(fs, name), "--%s is for --kind %s", name, dbsemaphore.Kind)
		}
	}
	if !bad.report("validate-impl", stderr) {
		return exitUsage
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	var passed bool
	prove := "lockprover prove --target rabbitmq --impl ..."
	if *kind == dbsemaphore.Kind {
		prove = "lockprover prove --kind " + dbsemaphore.Kind + " --impl ..."
		var err error
		passed, err = process.ValidateLease(ctx, *impl, mysqlDSN(*dsn), o, stdout)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			fmt.Fprintf(stderr, "validate-impl: %v\nvalidate-impl: cannot use the database, so the implementation was not tried\n", err)
			return exitUsage
		}
	} else {
		if code := preflight(ctx, "validate-impl", brokerURL(*amqpURL), stderr); code >= 0 {
			if code == exitUsage {
				fmt.Fprintln(stderr, "validate-impl: cannot reach the broker, so the implementation was not tried")
			}
			return code
		}
		passed = process.ValidateContext(ctx, *impl, brokerURL(*amqpURL), stdout)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "validate-impl: interrupted")
		return exitInterrupted
	}
	if !passed {
		fmt.Fprintln(stdout, "\nthe implementation does not follow the protocol yet: see docs/protocol.md")
		return exitViolation
	}
	fmt.Fprintln(stdout, "\nthe implementation follows the protocol: prove it with "+prove)
	return exitOK
}

// mysqlDSN is the flag's DSN, else $LOCKPROVER_MYSQL_DSN, else the local
// default.
func mysqlDSN(flagDSN string) string {
	if flagDSN != "" {
		return flagDSN
	}
	if d := os.Getenv("LOCKPROVER_MYSQL_DSN"); d != "" {
		return d
	}
	return mysql.DefaultDSN
}
