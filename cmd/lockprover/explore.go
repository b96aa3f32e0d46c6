package main

import (
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
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
	{"heartbeat 1 s", func(o *amqp.Options) { o.HeartbeatMs = 1000 }},
	{"heartbeats off", func(o *amqp.Options) { o.HeartbeatMs = -1 }},
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

func runExplore(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("explore", "explore [--plans N] [--seed S] [--shrink-time D] [--out DIR]", `Proves the reference with each of its open choices changed (rows) under each
family of faults (columns), on the simulator, and prints a Markdown table of
what broke, with the path of a minimal counterexample for each violation.
Exit status: 0 the table was made, 2 usage, 3 a cell was inconclusive,
130 interrupted.`, stderr)
	plans := fs.Int("plans", 300, "plans per cell")
	seed := fs.Uint64("seed", 1, "seed of the plans drawn")
	out := fs.String("out", "lockprover-explore", "directory for the counterexamples")
	shrink := fs.Duration("shrink-time", 5*time.Second, "time to spend minimising each counterexample (0: none)")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("explore", pos, stderr) {
		return exitUsage
	}
	var bad checks
	bad.positive("plans", *plans)
	bad.duration("shrink-time", *shrink, true)
	if !bad.report("explore", stderr) {
		return exitUsage
	}
	if *shrink == 0 {
		*shrink = time.Nanosecond
	}
	if err := checkOut(*out); err != nil {
		fmt.Fprintf(stderr, "explore: --out: %v\n", err)
		return exitUsage
	}
	root, err := freshDir(*out)
	if err != nil {
		fmt.Fprintf(stderr, "explore: --out: %v\n", err)
		return exitUsage
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	status := exitOK
	var b strings.Builder
	b.WriteString("| variant |")
	for _, f := range faultSets {
		b.WriteString(" " + f.name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(faultSets)) + "\n")
	for _, v := range variants {
		b.WriteString("| " + v.name + " |")
		for _, f := range faultSets {
			a := amqp.Config{Faults: f.faults}
			v.set(&a.Options)
			c := prover.Config{Family: a}
			o, err := prover.Search{Config: c, Seed: *seed, Plans: *plans, Shrink: *shrink, Context: ctx}.Run()
			if err != nil {
				fmt.Fprintf(stderr, "explore: %s, %s: %v\n", v.name, f.name, err)
				return exitUsage
			}
			if o.Interrupted {
				fmt.Fprintf(stdout, "%s", b.String())
				fmt.Fprintf(stderr, "explore: interrupted at %s / %s\n", v.name, f.name)
				return exitInterrupted
			}
			cell := fmt.Sprintf("holds (%d plans)", o.Plans)
			switch {
			case o.Found != nil:
				dir := filepath.Join(root, slug(v.name)+"--"+slug(f.name))
				cell = fmt.Sprintf("**%s** after %d plans: `%s`", strings.Join(violated(o.Found), ", "), o.Plans, dir)
				if err := o.Found.Write(dir); err != nil {
					fmt.Fprintf(stderr, "explore: writing the counterexample: %v\n", err)
					cell = fmt.Sprintf("**%s** after %d plans (not written: %v)", strings.Join(violated(o.Found), ", "), o.Plans, err)
				}
			case o.Inconclusive > 0:
				cell = fmt.Sprintf("inconclusive on %d of %d plans (checks ran out of time)", o.Inconclusive, o.Plans)
				status = exitInconclusive
			}
			b.WriteString(" " + cell + " |")
			fmt.Fprintf(stderr, "%s / %s: %s\n", v.name, f.name, cell)
		}
		b.WriteString("\n")
	}
	fmt.Fprint(stdout, b.String())
	return status
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
