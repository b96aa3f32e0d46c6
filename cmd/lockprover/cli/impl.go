package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
)

func runServeReference(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "serve-reference", sections: []section{{title: "Flags", flags: "[--kind KIND] [--options K=V,...] [--mutant NAME]"}},
		about: `Serves the reference implementation (or a mutant of it) over the process
protocol (docs/protocol.md) on stdin and stdout, for --impl.`}, stderr)
	mutant := fs.String("mutant", "", "serve this mutant of the reference instead")
	kind := fs.String("kind", histories.Semaphore, "the family, by a kind of it: "+family.KindList()+" (amqp-locks serves the semaphore and mutex alike)")
	opts := fs.String("options", "", "the reference's options as in plans, comma-separated: lazy_connect, channels=per-purpose, reconnect, plain_failure, scan_start=random, ...")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("serve-reference", pos, stderr) {
		return exitUsage
	}
	d := family.Of(*kind)
	switch {
	case d == nil:
		fmt.Fprintf(stderr, "serve-reference: --kind: want %s, got %q\n", family.KindList(), *kind)
		return exitUsage
	case d.Serve == nil:
		fmt.Fprintf(stderr, "serve-reference: --kind %s: the %s family has no process protocol yet\n", *kind, d.Name)
		return exitUsage
	}
	err := d.Serve(os.Stdin, stdout, stderr, *mutant, *opts)
	var ue *family.UsageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "serve-reference: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "serve-reference: %v\n", err)
		return exitViolation
	}
	return exitOK
}

// validateAbout says what validate-impl does, in its help: the server
// each family's implementation is checked on.
const validateAbout = `Checks an implementation's handling of the process protocol (docs/protocol.md)
and says what to fix, before a long prove, on a server of its family: a
real one is tried first, and one that cannot be used is named at once
(exit 2), not blamed on the implementation. What the checks make (queues,
tables, keys) is named by the check alone and removed at the end. Give the
--kind of your lock: without it, the checks are amqp-locks' (semaphore).
With --kind semaphore or mutex (amqp-locks, the default): the semaphore and
the mutex alike, on the simulated RabbitMQ served on the wire (no server
needed; --server-version 4.3.6 for its behaviour), or against a real broker
given --amqp-url (or one in Docker: --docker).
With --kind consul-semaphore: Consul's semaphore against a private Consul
agent or etcd it starts (--backend consul, the default, or etcd).
With --kind db-semaphore: a database semaphore (lease lock) against a real
MariaDB or MySQL (--dsn, or --private-server), with the session's design
and fencing from --options (as prove's).
With --kind pg-advisory: a PostgreSQL advisory lock against a private
PostgreSQL it starts (--server-version).
With --kind redlock or priority-redlock: a Redlock (or a priority Redlock)
against private redis-servers it starts (--server-version).
Exit status: 0 every check passes, 1 the implementation fails a check (of
the protocol or of the lock's semantics), 2 usage or a server that cannot
be used, 130 interrupted.`

// defaultedKind says, for an implementation that failed when --kind was
// not given, what it was taken for (done: "checked", "proved"): the
// default kind, its family's, which may not be the implementation's own.
func defaultedKind(done, kind string) string {
	var others []string
	for _, k := range family.Kinds() {
		if k != kind {
			others = append(others, k)
		}
	}
	return fmt.Sprintf("--kind not given: %s as %s (%s, the default); give --kind for another kind of lock: %s",
		done, kind, family.Of(kind).Name, strings.Join(others, ", "))
}

func runValidateImpl(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "validate-impl", about: validateAbout, sections: []section{
		{title: "Every run", flags: "[--impl COMMAND] [--init-timeout D] [--kind KIND] [--options K=V,...]"},
		{title: "Real servers", servers: true},
	}}, stderr)
	impl := fs.String("impl", "", "the command that starts one process of the implementation")
	kind := fs.String("kind", histories.Semaphore, "the family, by a kind of it: "+family.KindList())
	opts := fs.String("options", "", "db-semaphore: the session's design and fencing, comma-separated: design=master-row|row-per-slot, fencing")
	var ff familyFlags
	ff.register(fs, family.Validate)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("validate-impl", pos, stderr) {
		return exitUsage
	}
	var bad checks
	bad.add(strings.TrimSpace(*impl) == "", "--impl: give the command that starts one process of the implementation")
	bad.oneOf("kind", *kind, family.Kinds()...)
	ff.check(&bad)
	d := family.Of(*kind)
	if d != nil {
		if err := ff.otherFamilies(fs, d, *kind); err != nil {
			bad.add(true, "%v", err)
		}
		bad.add(d.Validate == nil, "--kind %s: the %s family has no process protocol yet", *kind, d.Name)
	}
	if !bad.report("validate-impl", stderr) {
		return exitUsage
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	s := ff.settings(fs, *kind, "")
	s.Options, s.Stderr = *opts, stderr
	passed, err := d.Validate(ctx, *impl, s, stdout)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "validate-impl: interrupted")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "validate-impl: %v\n", strings.ReplaceAll(err.Error(), "\n", "\nvalidate-impl: "))
		return exitUsage
	case !passed:
		fmt.Fprintln(stdout, "\nthe implementation fails the checks marked FAIL above (of the protocol or of the lock's semantics; each says what to fix): see docs/protocol.md")
		if !given(fs, "kind") {
			fmt.Fprintln(stdout, defaultedKind("checked", *kind))
		}
		return exitViolation
	}
	fmt.Fprintf(stdout, "\nthe implementation follows the protocol: prove it with lockprover prove --kind %s --impl ...\n", *kind)
	return exitOK
}
