package conform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// A Status is how a conformance run ended, worst last.
type Status int

const (
	Agree        Status = iota // the simulator agrees with the real server
	Inconclusive               // a harness failure (rabbitmqctl, the cleanup) left something undecided
	Diverge                    // the simulator and the server disagree
)

// RunConfig is what a conformance run against RabbitMQ does: the
// semantics table (part 1), with Retries more tries for a diverging timed
// case, then, unless Sequences is 0, drawn differential sequences from
// Seed (part 2), a divergence shrunk for up to Shrink.
type RunConfig struct {
	Cases              []semantics.Case // part 1's cases; nil means every one
	Sequences, Retries int
	Seed               uint64
	Shrink             time.Duration
	Out, Log           io.Writer
}

// RunRabbitMQ runs part 1 and then, unless c.Sequences is 0, part 2 on
// the target, writing what it finds to c.Out. An interrupted run's error
// wraps ctx's.
func RunRabbitMQ(ctx context.Context, tg *Server, shown string, c RunConfig) (Status, error) {
	st := runTable(ctx, tg, shown, c.Cases, c.Retries, c.Out)
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	if c.Sequences > 0 {
		var err error
		if st, err = runSequences(ctx, tg, c, st); err != nil {
			return st, err
		}
	}
	if st == Agree {
		fmt.Fprintln(c.Out, "\nthe simulator agrees with RabbitMQ")
	}
	return st, nil
}

// runTable runs part 1, the semantics table, and prints a line per case.
func runTable(ctx context.Context, tg *Server, shown string, cases []semantics.Case, retries int, stdout io.Writer) Status {
	code := Agree
	fmt.Fprintf(stdout, "part 1: the semantics table on %s and on the simulator (queues %s*)\n", shown, tg.Prefix())
	start := time.Now()
	counts := map[string]int{}
	tg.RunTable(ctx, cases, retries, func(r CaseReport) {
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
		for _, n := range r.Real.Notes {
			fmt.Fprintf(stdout, "    note: %s\n", n)
		}
		switch r.Status() {
		case "diverge", "table":
			code = Diverge
		case "error":
			code = max(code, Inconclusive)
		}
	})
	fmt.Fprintf(stdout, "part 1: %d agree, %d diverge, %d contradict the table on both sides, %d harness failures, %d skipped (%.1fs)\n",
		counts["agree"], counts["diverge"], counts["table"], counts["error"], counts["skip"], time.Since(start).Seconds())
	return code
}

// runSequences runs part 2, drawn differential sequences, on top of part
// 1's status, and returns the run's status.
func runSequences(ctx context.Context, tg *Server, c RunConfig, code Status) (Status, error) {
	sequences, seed, shrink, stdout := c.Sequences, c.Seed, c.Shrink, c.Out
	fmt.Fprintf(stdout, "\npart 2: %d differential sequences from seed %d (replay: --seed %d --sequences %d)\n", sequences, seed, seed, sequences)
	step := max(sequences/10, 1)
	out, err := tg.Differential(ctx, DiffOptions{
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
		return code, ctx.Err()
	case err != nil:
		fmt.Fprintf(c.Log, "conform: part 2: %v\n", err)
		if errors.Is(err, ErrHarness) {
			return max(code, Inconclusive), nil
		}
		return Diverge, nil
	}
	fmt.Fprintf(stdout, "part 2: %d sequences, %d steps in %.1fs (%.0f sequences/s)\n", out.Sequences, out.Steps, out.Elapsed.Seconds(), float64(out.Sequences)/out.Elapsed.Seconds())
	if out.Found != nil {
		fmt.Fprintf(stdout, "divergence, shrunk to a minimal sequence: %s", out.Found)
		return Diverge, nil
	}
	fmt.Fprintln(stdout, "no divergence")
	return code, nil
}

// SelectCases picks the table's cases by the IDs part 1 prints: a name
// picks the case of that ID, and every case whose ID is the name and a
// parameter ("7b" picks "7b T=1s", "7b T=2s", ...). A name that picks
// nothing is an error that names it.
func SelectCases(names []string) ([]semantics.Case, error) {
	var out []semantics.Case
	picked := map[int]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		found := false
		for i, c := range semantics.Cases {
			if c.ID == n || strings.HasPrefix(c.ID, n+" ") {
				found = true
				if !picked[i] {
					picked[i] = true
					out = append(out, c)
				}
			}
		}
		if !found {
			ids := make([]string, len(semantics.Cases))
			for i, c := range semantics.Cases {
				ids[i] = c.ID
			}
			return nil, fmt.Errorf("no case %q in the semantics table; its cases are %s", n, strings.Join(ids, ", "))
		}
	}
	return out, nil
}
