package main

import (
	"context"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"github.com/lockprover/lockprover/histories"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockprover/lockprover/prover"
)

// A variant is one row of the matrix: the reference with some of its open
// choices changed.
type variant struct {
	name string
	set  func(*amqp.Options)
}

var variants = []variant{
	{"spec defaults", func(*amqp.Options) {}},
	{"ascending deletion", func(o *amqp.Options) { o.DeleteOrder = "ascending" }},
	{"ascending deletion, overshoot 2", func(o *amqp.Options) { o.DeleteOrder, o.Overshoot = "ascending", 2 }},
	{"overshoot 2", func(o *amqp.Options) { o.Overshoot = 2 }},
	{"scan from the last known slot", func(o *amqp.Options) { o.ScanStart = "last-known" }},
	{"scan from a random slot", func(o *amqp.Options) { o.ScanStart = "random" }},
	{"no admin mutex", func(o *amqp.Options) { o.NoAdminMutex = true }},
	{"verify by passive declare", func(o *amqp.Options) { o.VerifyMethod = "passive" }},
	{"heartbeat 1 s", func(o *amqp.Options) { o.HeartbeatMs = amqp.Ms(1000) }},
	{"heartbeats off", func(o *amqp.Options) { o.HeartbeatMs = amqp.Ms(0) }},
	{"connect at the first operation", func(o *amqp.Options) { o.LazyConnect = true }},
	{"a channel per purpose", func(o *amqp.Options) { o.Channels = "per-purpose" }},
	{"reconnect after a lost connection", func(o *amqp.Options) { o.Reconnect = true }},
	{"plain failure (unavailable)", func(o *amqp.Options) { o.PlainFailure = true }},
}

// faultSets are the matrix's columns.
var faultSets = []struct {
	name   string
	faults []string
}{
	{"no faults", []string{}},
	{"crashes", []string{histories.Kill, amqp.AdminCrash}},
	{"network", []string{histories.Partition, histories.Pause, histories.DropReply}},
	{"broker", []string{histories.ForceClose, histories.RestartBroker}},
	{"all faults", nil},
}

// runExplore is `lockprover explore`: it proves the reference with each
// open choice changed under each family of faults and prints the table of
// what broke, so that the spec's choices can be compared side by side.
// With --kind db-semaphore the table is the lease matrix (see
// exploreLease).
func runExplore(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parseExploreFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	if cfg.kind == dbsemaphore.Kind {
		return exploreLease(ctx, cfg, stdout, stderr)
	}
	var rows, cols []string
	for _, v := range variants {
		rows = append(rows, v.name)
	}
	for _, f := range faultSets {
		cols = append(cols, f.name)
	}
	var b strings.Builder
	return exploreMatrix(ctx, cfg, &b, rows, cols, func(r, c int) prover.Family {
		a := amqp.Config{Faults: faultSets[c].faults}
		variants[r].set(&a.Options)
		return a
	}, stdout, stderr)
}

// exploreMatrix proves family(r, c) for each row and column and writes the
// Markdown table of what broke to b, then to stdout (what it has so far,
// when interrupted). It returns the exit status.
func exploreMatrix(ctx context.Context, cfg exploreConfig, b *strings.Builder, rows, cols []string, family func(r, c int) prover.Family, stdout, stderr io.Writer) int {
	status := exitOK
	writeExploreHeader(b, "variant", cols)
	for r, row := range rows {
		b.WriteString("| " + row + " |")
		for c, col := range cols {
			o, err := prover.Search{Config: prover.Config{Family: family(r, c)}, Seed: cfg.seed, Plans: cfg.plans, Shrink: cfg.shrink, Context: ctx}.Run()
			if err != nil {
				fmt.Fprintf(stderr, "explore: %s, %s: %v\n", row, col, err)
				return exitUsage
			}
			if o.Interrupted {
				fmt.Fprintf(stdout, "%s", b.String())
				fmt.Fprintf(stderr, "explore: interrupted at %s / %s\n", row, col)
				return exitInterrupted
			}
			dir := filepath.Join(cfg.root, slug(row)+"--"+slug(col))
			cell, inconclusive := exploreCell(o, dir, stderr)
			if inconclusive {
				status = exitInconclusive
			}
			b.WriteString(" " + cell + " |")
			fmt.Fprintf(stderr, "%s / %s: %s\n", row, col, cell)
		}
		b.WriteString("\n")
	}
	fmt.Fprint(stdout, b.String())
	b.Reset()
	return status
}

// exploreConfig is what explore's flags ask for, checked.
type exploreConfig struct {
	kind   string // --kind: semaphore (amqp-locks) or db-semaphore
	plans  int
	seed   uint64
	shrink time.Duration // never 0: no shrinking is a nanosecond of it
	root   string        // a fresh directory under --out for the counterexamples
}

// parseExploreFlags reads and checks explore's flags, and picks the
// directory the counterexamples go to before anything runs: ok false with
// the exit status when the run must not start.
func parseExploreFlags(args []string, stdout, stderr io.Writer) (cfg exploreConfig, code int, ok bool) {
	fs := newFlags("explore", "explore [--kind semaphore|db-semaphore] [--plans N] [--seed S] [--shrink-time D] [--out DIR]", `Proves the reference with each of its open choices changed (rows) under each
family of faults (columns), on the simulator, and prints a Markdown table of
what broke, with the path of a minimal counterexample for each violation.
With --kind db-semaphore: the database semaphore's designs, ttls and drift
bounds under each family of faults, then how large a jump of the database's
clock (or a client's) each design tolerates.
Exit status: 0 the table was made, 2 usage, 3 a cell was inconclusive,
130 interrupted.`, stderr)
	fs.StringVar(&cfg.kind, "kind", "semaphore", "semaphore (amqp-locks' options) or db-semaphore (the lease matrix)")
	fs.IntVar(&cfg.plans, "plans", 300, "plans per cell")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the plans drawn")
	out := fs.String("out", "lockprover-explore", "directory for the counterexamples")
	fs.DurationVar(&cfg.shrink, "shrink-time", 5*time.Second, "time to spend minimising each counterexample (0: none)")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return cfg, code, false
	}
	if !noArgs("explore", pos, stderr) {
		return cfg, exitUsage, false
	}
	var bad checks
	bad.positive("plans", cfg.plans)
	bad.oneOf("kind", cfg.kind, histories.Semaphore, dbsemaphore.Kind)
	bad.duration("shrink-time", cfg.shrink, true)
	if !bad.report("explore", stderr) {
		return cfg, exitUsage, false
	}
	if cfg.shrink == 0 {
		cfg.shrink = time.Nanosecond
	}
	if err := checkOut(*out); err != nil {
		fmt.Fprintf(stderr, "explore: --out: %v\n", err)
		return cfg, exitUsage, false
	}
	root, err := freshDir(*out)
	if err != nil {
		fmt.Fprintf(stderr, "explore: --out: %v\n", err)
		return cfg, exitUsage, false
	}
	cfg.root = root
	return cfg, exitOK, true
}

// writeExploreHeader writes a table's header: the rows' title, then a
// column each.
func writeExploreHeader(b *strings.Builder, title string, cols []string) {
	b.WriteString("| " + title + " |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
}

// exploreCell says in a table cell how one cell's search ended: it held,
// it broke (the counterexample written to dir, or why it could not be), or
// checks ran out of time, which makes the whole table inconclusive.
func exploreCell(o *prover.Outcome, dir string, stderr io.Writer) (cell string, inconclusive bool) {
	switch {
	case o.Found != nil:
		cell = fmt.Sprintf("**%s** after %d plans: `%s`", strings.Join(violated(o.Found), ", "), o.Plans, dir)
		if err := o.Found.Write(dir); err != nil {
			fmt.Fprintf(stderr, "explore: writing the counterexample: %v\n", err)
			cell = fmt.Sprintf("**%s** after %d plans (not written: %v)", strings.Join(violated(o.Found), ", "), o.Plans, err)
		}
		return cell, false
	case o.Inconclusive > 0:
		return fmt.Sprintf("inconclusive on %d of %d plans (checks ran out of time)", o.Inconclusive, o.Plans), true
	}
	return fmt.Sprintf("holds (%d plans)", o.Plans), false
}

// violated lists the properties a counterexample breaks, the one it was
// shrunk for first.
func violated(cx *prover.Counterexample) []string {
	props := []string{cx.Property}
	for _, v := range cx.Report.Verdicts {
		if v.Status.String() == "FAIL" && v.Property != cx.Property {
			props = append(props, v.Property)
		}
	}
	return props
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
