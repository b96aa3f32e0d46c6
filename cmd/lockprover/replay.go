package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
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
	target := fs.String("target", "sim", "where the plan runs: sim or rabbitmq")
	amqpURL := fs.String("amqp-url", "", "the real broker's URL; default $LOCKPROVER_AMQP_URL, else "+defaultAMQPURL)
	allowRestart := fs.Bool("allow-restart", false, "let the plan restart a real broker")
	impl := fs.String("impl", "", "run an implementation that speaks the process protocol instead (implies --target rabbitmq)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *target != "sim" && *target != "rabbitmq" {
		fmt.Fprintf(stderr, "replay: --target must be sim or rabbitmq, not %q\n", *target)
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
	var t prover.Target = prover.Simulator{}
	if *trace {
		t = prover.Simulator{Trace: stdout}
	}
	implementation := prover.ImplFor(p)
	if *impl != "" {
		pi := &process.Impl{Command: *impl}
		defer pi.Stop()
		implementation, *target = pi, "rabbitmq"
	}
	if *target == "rabbitmq" {
		t = prover.RabbitMQ{URL: brokerURL(*amqpURL), AllowRestart: *allowRestart}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := t.Run(ctx, p, implementation)
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
	for _, pr := range res.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", pr)
	}
	if *target == "rabbitmq" {
		fmt.Fprintf(stdout, "ran on RabbitMQ as lock %s\n", res.Lock)
	}
	printReport(stdout, filepath.Base(fs.Arg(0)), r)
	return exitFor(r.Status())
}

func runMutants(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "also say what each mutant gets wrong")
	detect := fs.Int("detect", 0, "prove each mutant from this many seeds and print a Markdown table of the plans and time it takes to catch")
	budget := fs.Int("budget", 20000, "with --detect, give up on a seed after this many plans")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *detect < 0 || *budget < 1 {
		fmt.Fprintln(stderr, "mutants: --detect must not be negative, --budget must be at least 1")
		return exitUsage
	}
	if *detect > 0 {
		return detectMutants(*detect, *budget, stdout, stderr)
	}
	for _, m := range prover.Mutants {
		fmt.Fprintf(stdout, "%-26s %s\n", m.Name, m.Property)
		if *verbose {
			fmt.Fprintf(stdout, "    %s\n", m.Defect)
		}
	}
	return exitOK
}

// detectMutants proves each mutant from seeds 1..n, counting a seed as
// caught when the mutant's own property breaks, and prints the medians.
func detectMutants(n, budget int, stdout, stderr io.Writer) int {
	fmt.Fprintf(stdout, "| mutant | property | caught | median plans | median seconds |\n|---|---|---|---|---|\n")
	code := exitOK
	for _, m := range prover.Mutants {
		var plans []int
		var secs []float64
		for seed := 1; seed <= n; seed++ {
			c := prover.Config{Mutant: m.Name, Properties: []string{m.Property}}
			o, err := prover.Search{Config: c, Seed: uint64(seed), Plans: budget, Shrink: 1}.Run()
			if err != nil {
				fmt.Fprintf(stderr, "mutants: %s: %v\n", m.Name, err)
				return exitViolation
			}
			if o.Found != nil {
				plans = append(plans, o.Plans)
				secs = append(secs, o.Elapsed.Seconds())
			}
		}
		if len(plans) < n {
			code = exitViolation
		}
		fmt.Fprintf(stdout, "| %s | %s | %d/%d | %s | %s |\n", m.Name, m.Property, len(plans), n, median(plans), medianF(secs))
	}
	return code
}

func median(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	sort.Ints(v)
	return fmt.Sprint(v[len(v)/2])
}

func medianF(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	sort.Float64s(v)
	return fmt.Sprintf("%.2f", v[len(v)/2])
}
