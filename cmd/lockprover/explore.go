package main

import (
	"flag"
	"fmt"
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
	set  func(*prover.Options)
}

var variants = []variant{
	{"spec defaults", func(*prover.Options) {}},
	{"ascending deletion", func(o *prover.Options) { o.DeleteOrder = "ascending" }},
	{"ascending deletion, overshoot 2", func(o *prover.Options) { o.DeleteOrder, o.Overshoot = "ascending", 2 }},
	{"overshoot 2", func(o *prover.Options) { o.Overshoot = 2 }},
	{"scan from the last known slot", func(o *prover.Options) { o.ScanStart = "last-known" }},
	{"scan from a random slot", func(o *prover.Options) { o.ScanStart = "random" }},
	{"no admin mutex", func(o *prover.Options) { o.NoAdminMutex = true }},
	{"verify by passive declare", func(o *prover.Options) { o.VerifyMethod = "passive" }},
	{"heartbeat 1 s", func(o *prover.Options) { o.HeartbeatMs = 1000 }},
	{"heartbeats off", func(o *prover.Options) { o.HeartbeatMs = -1 }},
}

// faultSets are the matrix's columns.
var faultSets = []struct {
	name   string
	faults []string
}{
	{"no faults", []string{}},
	{"crashes", []string{"kill", "admin-crash"}},
	{"network", []string{"partition", "pause", "drop-reply"}},
	{"broker", []string{"force-close", "restart-broker"}},
	{"all faults", nil},
}

func runExplore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("explore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: lockprover explore [flags]\n\nProves the reference with each of its open choices changed (rows) under each\nfamily of faults (columns) and prints a Markdown table of what broke, with\nthe path of a minimal counterexample for each violation.\n\nFlags:")
		fs.PrintDefaults()
	}
	plans := fs.Int("plans", 300, "plans per cell")
	seed := fs.Uint64("seed", 1, "seed of the plans drawn")
	out := fs.String("out", "lockprover-explore", "directory for the counterexamples")
	shrink := fs.Duration("shrink-time", 5*time.Second, "time to spend minimising each counterexample")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *plans < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "explore: --plans must be at least 1 and no arguments are taken")
		return exitUsage
	}
	root, err := freshDir(*out)
	if err != nil {
		fmt.Fprintf(stderr, "explore: %v\n", err)
		return exitUsage
	}
	var b strings.Builder
	b.WriteString("| variant |")
	for _, f := range faultSets {
		b.WriteString(" " + f.name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(faultSets)) + "\n")
	for _, v := range variants {
		b.WriteString("| " + v.name + " |")
		for _, f := range faultSets {
			c := prover.Config{Faults: f.faults}
			v.set(&c.Options)
			o, err := prover.Search{Config: c, Seed: *seed, Plans: *plans, Shrink: *shrink}.Run()
			if err != nil {
				fmt.Fprintf(stderr, "explore: %s, %s: %v\n", v.name, f.name, err)
				return exitViolation
			}
			cell := fmt.Sprintf("holds (%d plans)", o.Plans)
			if o.Found != nil {
				dir := filepath.Join(root, slug(v.name)+"--"+slug(f.name))
				if err := o.Found.Write(dir); err != nil {
					fmt.Fprintf(stderr, "explore: %v\n", err)
					return exitViolation
				}
				cell = fmt.Sprintf("**%s** after %d plans: `%s`", strings.Join(violated(o.Found), ", "), o.Plans, dir)
			}
			b.WriteString(" " + cell + " |")
			fmt.Fprintf(stderr, "%s / %s: %s\n", v.name, f.name, cell)
		}
		b.WriteString("\n")
	}
	fmt.Fprint(stdout, b.String())
	return exitOK
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
