package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
)

// conformAbout says what conform does, in its help.
const conformAbout = `Differential test of the simulator against a real RabbitMQ broker.
Part 1 runs every case of the semantics table (broker-semantics.md) that a
shared broker allows on RabbitMQ and on the simulator, step by step. Part 2
runs drawn sequences of declares, publishes, deletes, consumes, gets,
purges, channel and connection closes, kills and forced closes on both, and
shrinks the first divergence to a minimal sequence.
It needs rabbitmqctl for the broker's node (run as root or the rabbitmq
user) and cleans up every queue it creates.
With --cluster: the simulated RabbitMQ cluster against a private cluster
of three nodes the run starts and removes (root, network namespaces),
in --partition-handling's mode: drawn sequences of queue methods through
each node and cluster faults (cuts, kills, pauses, restarts, heals), run
on both and compared step by step; the first divergence is shrunk.
With --kind db-semaphore: the simulated database (sim/mariadbsim) against
MariaDB (--dsn): drawn sequences of the statements dbsem sends, on 2 to 4
connections with their lock waits and deadlocks, run on both and compared
step by step; the first divergence is shrunk.
With --kind consul-semaphore --cluster: the simulated Consul or etcd cluster
(sim/consulsim) against a private one the run starts and removes (root,
network namespaces): drawn sequences of the recipe's calls through clients
on different nodes and faults on the cluster, compared step by step.
With --kind redlock: the simulated Redis servers (sim/redissim) against
private redis-servers the run starts and removes: drawn sequences of the
commands and scripts redlock sends, with sleeps, compared step by step; the
first divergence is printed with the flags that draw it again.
With --kind pg-advisory: the simulated PostgreSQL (sim/postgressim) against a
private PostgreSQL the run starts and removes: drawn sequences of the
statements pg-advisory sends, compared step by step.
Exit status: 0 the simulator agrees, 1 a divergence, 2 usage or no broker,
3 inconclusive (rabbitmqctl, the cleanup or the harness failed, or with
--cluster a node did not serve again within the wait after a fault),
130 interrupted.`

// runConform is `lockprover conform`: is the simulator telling the truth?
// The family --kind names runs its simulators against its real backends
// (family.Descriptor.Conform).
func runConform(args []string, stdout, stderr io.Writer) int {
	kinds := kindsWith(func(d *family.Descriptor) bool { return d.Conform != nil })
	fs := newFlags(verbHelp{verb: "conform", about: conformAbout, sections: []section{
		{title: "Every run", flags: "[--kind KIND] [--sequences N] [--seed N]"},
		{title: "Real servers", servers: true},
	}}, stderr)
	kind := fs.String("kind", histories.Semaphore, "the family, by its kind: "+strings.Join(kinds, " or "))
	sequences := fs.Int("sequences", 500, "differential sequences to draw; 0 skips them (amqp-locks: part 2)")
	seed := fs.Uint64("seed", 0, "seed of the drawn sequences; by default one is picked (and printed)")
	var ff familyFlags
	ff.register(fs, family.Conform)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("conform", pos, stderr) {
		return exitUsage
	}
	var bad checks
	bad.nonNegative("sequences", *sequences)
	bad.oneOf("kind", *kind, kinds...)
	d := family.Of(*kind)
	if d != nil {
		if err := ff.otherFamilies(fs, d, *kind); err != nil {
			bad.add(true, "%v", err)
		}
	}
	if !bad.report("conform", stderr) {
		return exitUsage
	}
	if !given(fs, "seed") {
		*seed = rand.Uint64()
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	st, err := d.Conform(ctx, ff.settings(fs, *kind, ""), family.ConformConfig{Sequences: *sequences, Seed: *seed, Log: stderr}, stdout)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "conform: %s\n", interrupted(err))
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "conform: %v\n", err)
		return exitUsage
	case st == family.Diverge:
		return exitViolation
	case st == family.Inconclusive:
		return exitInconclusive
	}
	return exitOK
}
