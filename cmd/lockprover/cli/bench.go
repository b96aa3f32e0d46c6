package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/bench"
)

// benchAbout says what bench does, in its help.
const benchAbout = `Measures the reference implementation against a real RabbitMQ broker (with
--kind db-semaphore: the database semaphore's against a real MariaDB; with
--kind redlock or priority-redlock: Redlock's on private redis-servers it
starts; with --kind consul-semaphore: Consul's semaphore recipe's on a private
Consul agent and a private etcd it starts, --backend naming one), counting
what each operation sends: latency (p50, p99, mean) and what each operation
sent (AMQP methods, SQL statements, Redis commands, HTTP and gRPC requests),
beside the floor, the same requests sent raw on the same kind of connection
with no lock library. Prints a Markdown table and how each operation
compares with its target. Everything it creates is deleted, also on error
or interrupt.
Exit status: 0 measured, 2 usage error, unreachable backend or a failure
while measuring, 130 interrupted.`

// runBench is `lockprover bench`: it measures the reference of the family
// --kind names against its real backend beside the floor and prints the
// table (family.Descriptor.Bench).
func runBench(args []string, stdout, stderr io.Writer) int {
	kinds := kindsWith(func(d *family.Descriptor) bool { return d.Bench != nil })
	fs := newFlags(verbHelp{verb: "bench", about: benchAbout, sections: []section{
		{title: "Every run", flags: "[--kind KIND] [--n N] [--warmup N] [--seed N] [--options K=V,...]"},
		{title: "Real servers", servers: true},
	}}, stderr)
	kind := fs.String("kind", histories.Semaphore, "the family, by its kind: "+strings.Join(kinds, " or "))
	options := fs.String("options", "", "db-semaphore: the reference's options, design=master-row|row-per-slot and fencing")
	n := fs.Int("n", 500, "measured iterations of each operation")
	warmup := fs.Int("warmup", 50, "unmeasured iterations before them")
	seed := fs.Uint64("seed", 0, "seed of the per-iteration order of the operations; 0 picks one")
	var ff familyFlags
	ff.register(fs, family.Bench)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("bench", pos, stderr) {
		return exitUsage
	}
	var bad checks
	bad.positive("n", *n)
	bad.nonNegative("warmup", *warmup)
	bad.oneOf("kind", *kind, kinds...)
	d := family.Of(*kind)
	if d != nil {
		if err := ff.otherFamilies(fs, d, *kind); err != nil {
			bad.add(true, "%v", err)
		}
	}
	if !bad.report("bench", stderr) {
		return exitUsage
	}
	if *seed == 0 {
		*seed = mrand.Uint64()
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	s := ff.settings(fs, *kind, "")
	s.Options = *options
	err := d.Bench(ctx, s, bench.Config{N: *n, Warmup: *warmup, Seed: *seed, Log: stderr}, stdout)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "bench: %s\n", interrupted(err))
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	return exitOK
}
