package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/mysql"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"github.com/lockprover/lockprover/histories"
)

// runConform is `lockprover conform`: is the simulator telling the truth?
// Part 1 runs the semantics table (broker-semantics.md as data) on a real
// broker and on the simulator and compares them step by step; part 2 draws
// sequences of low-level operations with rapid, runs each on both, and
// shrinks the first divergence.
func runConform(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parseConformFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	if cfg.kind == dbsemaphore.Kind {
		return conformDatabase(ctx, cfg, stdout, stderr)
	}
	if code := preflight(ctx, "conform", cfg.url, stderr); code >= 0 {
		return code
	}
	tg, err := conform.Open(ctx, conform.Options{URL: cfg.url, Ctl: strings.Fields(cfg.ctl), AllowRestart: cfg.allowRestart})
	if err != nil {
		if errors.Is(err, conform.ErrNoBroker) {
			fmt.Fprintf(stderr, "conform: %v\nStart RabbitMQ there, or name another broker with --amqp-url or LOCKPROVER_AMQP_URL.\n", err)
		} else {
			fmt.Fprintf(stderr, "conform: %v\n", err)
		}
		return exitUsage
	}
	defer func() {
		if err := tg.Close(); err != nil {
			fmt.Fprintf(stderr, "conform: %v\n", err)
		}
	}()
	if !tg.FastCtl() {
		fmt.Fprintln(stdout, "note: the rabbitmqctl eval session did not start; every query is a plain rabbitmqctl command (about a second), so timed cases may diverge")
	}
	return conformBoth(ctx, tg, cfg, stdout, stderr)
}

// conformDatabase is conform --kind db-semaphore: the simulated database
// (sim/sqlsim) against MariaDB on drawn sequences of dbsem's statements.
func conformDatabase(ctx context.Context, cfg conformConfig, stdout, stderr io.Writer) int {
	rep, err := conform.MariaDB(ctx, cfg.dsn, cfg.sequences, cfg.seed, stdout)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "conform: interrupted; its tables are dropped")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "conform: %v\n", err)
		return exitUsage
	case rep.Found != nil:
		return exitViolation
	}
	return exitOK
}

// conformConfig is what conform's flags ask for, checked.
type conformConfig struct {
	kind               string // --kind: semaphore (RabbitMQ) or db-semaphore (MariaDB)
	dsn                string // --kind db-semaphore: the MariaDB's
	url                string // the broker's, from the flag or the environment
	sequences, retries int
	seed               uint64 // picked at random unless --seed was given
	allowRestart       bool
	ctl                string // the rabbitmqctl command, split on spaces when used
	shrink             time.Duration
}

// conformDoc is conform's usage, before its flags.
const conformDoc = `Usage: lockprover conform [flags]

Differential test of the simulator against a real RabbitMQ broker.
Part 1 runs every case of the semantics table (broker-semantics.md) that a
shared broker allows on RabbitMQ and on the simulator, step by step. Part 2
runs drawn sequences of declares, publishes, deletes, consumes, gets,
purges, channel and connection closes, kills and forced closes on both, and
shrinks the first divergence to a minimal sequence.
It needs rabbitmqctl for the broker's node (run as root or the rabbitmq
user) and cleans up every queue it creates.
With --kind db-semaphore: the simulated database (sim/sqlsim) against MariaDB
(--dsn): drawn sequences of the statements dbsem sends, on 2 to 4
connections with their lock waits and deadlocks, run on both and compared
step by step; the first divergence is shrunk.
Exit status: 0 the simulator agrees, 1 a divergence, 2 usage or no broker,
3 inconclusive (rabbitmqctl or the cleanup failed).

Flags:`

// parseConformFlags reads and checks conform's flags before the broker is
// touched: ok false with the exit status when the run must not start.
func parseConformFlags(args []string, stdout, stderr io.Writer) (cfg conformConfig, code int, ok bool) {
	fs := flag.NewFlagSet("conform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), conformDoc)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.kind, "kind", "semaphore", "semaphore (the simulated broker against RabbitMQ) or db-semaphore (the simulated database against MariaDB)")
	rawURL := fs.String("amqp-url", "", "the broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	dsn := fs.String("dsn", "", "--kind db-semaphore: the MariaDB's DSN; default $LOCKPROVER_MYSQL_DSN, else "+mysql.DefaultDSN)
	fs.IntVar(&cfg.sequences, "sequences", 500, "differential sequences to draw in part 2; 0 skips part 2")
	fs.Uint64Var(&cfg.seed, "seed", 0, "seed of the drawn sequences; by default one is picked (and printed)")
	fs.BoolVar(&cfg.allowRestart, "allow-restart", false, "let table cases restart the broker (rabbitmqctl stop_app/start_app cuts every client of the broker off)")
	fs.StringVar(&cfg.ctl, "rabbitmqctl", "rabbitmqctl", "the command that runs rabbitmqctl for the broker's node (split on spaces)")
	fs.IntVar(&cfg.retries, "retries", 2, "run a diverging table case again up to this many times (real timing varies on a loaded machine)")
	fs.DurationVar(&cfg.shrink, "shrink-time", time.Minute, "time to spend minimising a divergence")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return cfg, code, false
	}
	if !noArgs("conform", pos, stderr) {
		return cfg, exitUsage, false
	}
	var bad checks
	bad.nonNegative("sequences", cfg.sequences)
	bad.nonNegative("retries", cfg.retries)
	bad.duration("shrink-time", cfg.shrink, true)
	bad.add(strings.TrimSpace(cfg.ctl) == "", "--rabbitmqctl must not be empty")
	bad.oneOf("kind", cfg.kind, histories.Semaphore, dbsemaphore.Kind)
	if cfg.kind == dbsemaphore.Kind {
		for _, name := range []string{"amqp-url", "allow-restart", "rabbitmqctl", "retries", "shrink-time"} {
			bad.add(given(fs, name), "--%s is for --kind semaphore (RabbitMQ), not %s", name, dbsemaphore.Kind)
		}
		bad.add(cfg.sequences == 0, "--sequences 0 leaves nothing to run with --kind %s", dbsemaphore.Kind)
	} else {
		bad.add(given(fs, "dsn"), "--dsn is for --kind %s", dbsemaphore.Kind)
	}
	if !bad.report("conform", stderr) {
		return cfg, exitUsage, false
	}
	if !given(fs, "seed") {
		cfg.seed = rand.Uint64()
	}
	cfg.url, cfg.dsn = brokerURL(*rawURL), mysqlDSN(*dsn)
	return cfg, exitOK, true
}

// conformBoth runs part 1 and then, unless --sequences 0, part 2 on top of
// part 1's status, and returns the run's exit status (130 as soon as
// either part is interrupted).
func conformBoth(ctx context.Context, tg *conform.Target, cfg conformConfig, stdout, stderr io.Writer) int {
	code := conformTable(ctx, tg, redact(cfg.url), cfg.retries, stdout)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "conform: interrupted")
		return exitInterrupted
	}
	if cfg.sequences > 0 {
		code = conformSequences(ctx, tg, cfg.sequences, cfg.seed, cfg.shrink, code, stdout, stderr)
		if code == exitInterrupted {
			return code
		}
	}
	if code == exitOK {
		fmt.Fprintln(stdout, "\nthe simulator agrees with RabbitMQ")
	}
	return code
}

// conformTable runs part 1, the semantics table, and prints a line per
// case: exit 1 on a divergence, 3 on a harness failure, else 0.
func conformTable(ctx context.Context, tg *conform.Target, shown string, retries int, stdout io.Writer) int {
	code := exitOK
	fmt.Fprintf(stdout, "part 1: the semantics table on %s and on the simulator (queues %s*)\n", shown, tg.Prefix())
	start := time.Now()
	counts := map[string]int{}
	tg.RunTable(ctx, nil, retries, func(r conform.CaseReport) {
		counts[r.Status()]++
		timing := ""
		if r.Skipped == "" {
			timing = r.Elapsed.Round(time.Millisecond).String()
		}
		note := ""
		switch {
		case r.Skipped != "":
			note = " (" + r.Skipped + ")"
		case r.Attempts > 1:
			note = fmt.Sprintf(" (attempt %d)", r.Attempts)
		}
		fmt.Fprintf(stdout, "  %-16s %-8s %8s  %s%s\n", r.Case.ID, r.Status(), timing, r.Case.Title, note)
		if d := r.Details(); d != "" {
			fmt.Fprint(stdout, d)
		}
		switch r.Status() {
		case "diverge", "table":
			code = exitViolation
		case "error":
			if code == exitOK {
				code = exitInconclusive
			}
		}
	})
	fmt.Fprintf(stdout, "part 1: %d agree, %d diverge, %d contradict the table on both sides, %d harness failures, %d skipped (%.1fs)\n",
		counts["agree"], counts["diverge"], counts["table"], counts["error"], counts["skip"], time.Since(start).Seconds())
	return code
}

// conformSequences runs part 2, drawn differential sequences, on top of
// part 1's status code, and returns the run's status.
func conformSequences(ctx context.Context, tg *conform.Target, sequences int, seed uint64, shrink time.Duration, code int, stdout, stderr io.Writer) int {
	fmt.Fprintf(stdout, "\npart 2: %d differential sequences from seed %d (replay: --seed %d --sequences %d)\n", sequences, seed, seed, sequences)
	step := max(sequences/10, 1)
	out, err := tg.Differential(ctx, conform.DiffOptions{
		Sequences: sequences,
		Seed:      seed,
		Shrink:    shrink,
		Progress: func(n, steps int) {
			if n%step == 0 && n < sequences {
				fmt.Fprintf(stdout, "  %d/%d sequences, %d steps\n", n, sequences, steps)
			}
		},
	})
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(stderr, "conform: interrupted")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "conform: part 2: %v\n", err)
		if errors.Is(err, conform.ErrHarness) && code == exitOK {
			return exitInconclusive
		}
		return max(code, exitViolation)
	}
	fmt.Fprintf(stdout, "part 2: %d sequences, %d steps in %.1fs (%.0f sequences/s)\n", out.Sequences, out.Steps, out.Elapsed.Seconds(), float64(out.Sequences)/out.Elapsed.Seconds())
	if out.Found != nil {
		fmt.Fprintf(stdout, "divergence, shrunk to a minimal sequence: %s", out.Found)
		return exitViolation
	}
	fmt.Fprintln(stdout, "no divergence")
	return code
}
