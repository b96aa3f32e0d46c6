package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
)

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: lockprover replay [flags] PLAN\n\nRuns a saved plan again and checks its history. On the simulator the history\nis the same, byte for byte.\n\nFlags:")
		fs.PrintDefaults()
	}
	history := fs.String("history", "", "also write the history to this file (it must not exist)")
	trace := fs.Bool("trace", false, "print the simulator's event trace")
	mutant := fs.String("mutant", "", "run this mutant instead of the plan's implementation (\"reference\" for the reference)")
	modelName := fs.String("model", "standard", "acquire-exact model: standard or strict")
	timeout := fs.Duration("timeout", time.Minute, "time budget of each linearizability check")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "replay: want exactly one plan file")
		fs.Usage()
		return exitUsage
	}
	if *modelName != "standard" && *modelName != "strict" {
		fmt.Fprintf(stderr, "replay: --model must be standard or strict, not %q\n", *modelName)
		return exitUsage
	}
	p, err := prover.ReadPlan(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitUsage
	}
	switch *mutant {
	case "":
	case "reference":
		p.Mutant = ""
	default:
		if prover.MutantNamed(*mutant) == nil {
			fmt.Fprintf(stderr, "replay: --mutant: no mutant named %q\n", *mutant)
			return exitUsage
		}
		p.Mutant = *mutant
	}
	if *history != "" {
		if _, err := os.Stat(*history); err == nil {
			fmt.Fprintf(stderr, "replay: %s exists; not overwriting it\n", *history)
			return exitUsage
		}
	}
	sim := prover.Simulator{}
	if *trace {
		sim.Trace = stdout
	}
	res, err := sim.Run(p, prover.ImplFor(p))
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return exitViolation
	}
	if *history != "" {
		var b bytes.Buffer
		histories.Write(&b, res.History)
		if err := os.WriteFile(*history, b.Bytes(), 0o644); err != nil {
			fmt.Fprintf(stderr, "replay: %v\n", err)
			return exitUsage
		}
	}
	r := prover.Judge(p, res, model.Options{Strict: *modelName == "strict", Timeout: *timeout})
	printReport(stdout, filepath.Base(fs.Arg(0)), r)
	return exitFor(r.Status())
}

func runMutants(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "also say what each mutant gets wrong")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	for _, m := range prover.Mutants {
		fmt.Fprintf(stdout, "%-26s %s\n", m.Name, m.Property)
		if *verbose {
			fmt.Fprintf(stdout, "    %s\n", m.Defect)
		}
	}
	return exitOK
}
