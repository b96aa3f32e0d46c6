package dbsemrun

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// leaseRows are the lease matrix's rows: the database semaphore's designs,
// a short and a long ttl, and a wider drift bound.
var leaseRows = []struct {
	name    string
	options Options
	ttlMs   int
	drift   float64
}{
	{"master-row, ttl 100 ms", Options{}, 100, 0},
	{"master-row, ttl 1 s", Options{}, 1000, 0},
	{"master-row, ttl 1 s, drift 10%", Options{}, 1000, 0.1},
	{"row-per-slot, ttl 100 ms", Options{Design: "row-per-slot"}, 100, 0},
	{"row-per-slot, ttl 1 s", Options{Design: "row-per-slot"}, 1000, 0},
	{"row-per-slot, fencing, ttl 300 ms", Options{Design: "row-per-slot", Fencing: true}, 300, 0},
}

// leaseFaultSets are the lease matrix's columns.
var leaseFaultSets = []struct {
	name   string
	faults []string
}{
	{"no faults", []string{}},
	{"crashes", []string{histories.Kill}},
	{"pauses, partitions", []string{histories.Pause, histories.Partition}},
	{"connections", []string{histories.ForceClose, histories.DropReply}},
	{"server restarts", []string{histories.RestartBroker}},
	{"clocks", []string{histories.ClockSkew, histories.ClockJump}},
	{"all faults", nil},
}

// Explore proves the lease matrix (design x ttl x drift bound, under each
// family of faults, on the simulated database), then writes the
// clock-jump tolerance table (skewTolerance).
func Explore(ctx context.Context, c explore.Config) (inconclusive bool, err error) {
	m := explore.Matrix{Title: "variant", Prove: func(r, col int) prover.Subject {
		row := leaseRows[r]
		return Config{Scope: prover.Scope{Faults: leaseFaultSets[col].faults}, Options: row.options, TTLMs: row.ttlMs, Drift: row.drift}
	}}
	for _, r := range leaseRows {
		m.Rows = append(m.Rows, r.name)
	}
	for _, f := range leaseFaultSets {
		m.Cols = append(m.Cols, f.name)
	}
	if inconclusive, err = m.Run(ctx, c); err != nil {
		return inconclusive, err
	}
	fmt.Fprintln(c.Out)
	return inconclusive, skewTolerance(ctx, c.Out)
}

// toleranceRows are the tolerance table's rows: both designs, and the
// mutant that judges expiry by the client's clock, for contrast.
var toleranceRows = []struct {
	name    string
	options Options
	mutant  string
}{
	{"master-row", Options{}, ""},
	{"row-per-slot", Options{Design: "row-per-slot"}, ""},
	{"expiry by the client's clock (mutant client-clock-expiry)", Options{}, "client-clock-expiry"},
}

// toleranceCols are the tolerance table's columns: whose clock jumps
// ("" the database's) and by how much of the ttl, ahead.
var toleranceCols = []struct {
	target   string
	fraction float64
}{
	{"", 0.005}, {"", 0.01}, {"", 0.02}, {"", 0.1}, {"", 0.5},
	{"c2", 0.02}, {"c2", 0.5},
}

// toleranceTTLMs is the ttl of the tolerance scenarios, and toleranceRuns
// how many times each cell's scenario runs, the jump striking at another
// moment each time.
const (
	toleranceTTLMs = 1000
	toleranceRuns  = 10
)

// skewTolerance prints how large a clock jump each design tolerates: in a
// scenario where c1 holds the only lease and c2 tries for it every 5 ms
// near the end of c1's ttl, a clock jumps ahead by a share of the ttl. A
// cell says "tolerated" when lease-exclusive held without an excuse in
// every run; "overlap, excused" when the jump let c2 in while c1's lease
// was certainly valid by true time, which the checker excuses because the
// database's clock was off by more than the drift bound (the design does
// not tolerate it, and need not); "**violated**" when the checker excused
// nothing (a client's clock, which only a design that reads it suffers).
func skewTolerance(ctx context.Context, stdout io.Writer) error {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("Clock jumps ahead, as a share of a %d ms ttl (drift bound %.0f%%), %d runs each:\n\n", toleranceTTLMs, model.DefaultDrift*100, toleranceRuns))
	var cols []string
	for _, c := range toleranceCols {
		whose := "database"
		if c.target != "" {
			whose = "client " + c.target
		}
		cols = append(cols, fmt.Sprintf("%s +%g%%", whose, c.fraction*100))
	}
	explore.Header(&b, "design", cols)
	for _, row := range toleranceRows {
		b.WriteString("| " + row.name + " |")
		for _, col := range toleranceCols {
			if ctx.Err() != nil {
				fmt.Fprint(stdout, b.String())
				return fmt.Errorf("interrupted in the tolerance table: %w", ctx.Err())
			}
			cell, err := toleranceCell(row.options, row.mutant, col.target, col.fraction)
			if err != nil {
				return fmt.Errorf("tolerance of %s: %w", row.name, err)
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	fmt.Fprint(stdout, b.String())
	return nil
}

// toleranceCell runs the scenario toleranceRuns times and says what
// lease-exclusive made of it.
func toleranceCell(o Options, mutant, target string, fraction float64) (string, error) {
	tolerated, excused, violated := 0, 0, 0
	for i := 0; i < toleranceRuns; i++ {
		p := toleranceScenario(o, mutant, target, int(fraction*toleranceTTLMs), 50+20*i)
		res, err := Simulate(p, nil)
		if err != nil {
			return "", err
		}
		r := prover.Judge(res, model.Options{Family: []any{Config{}.Judging("")}})
		for _, v := range r.Verdicts {
			if v.Property != lease.LeaseExclusive {
				continue
			}
			switch {
			case v.Status == verdict.Fail:
				violated++
			case strings.Contains(v.Detail, "excused"):
				excused++
			default:
				tolerated++
			}
		}
	}
	switch {
	case violated > 0:
		return fmt.Sprintf("**violated** (%d of %d)", violated, toleranceRuns), nil
	case excused > 0:
		return fmt.Sprintf("overlap, excused (%d of %d)", excused, toleranceRuns), nil
	}
	return "tolerated", nil
}

// toleranceScenario is the plan of one run: c1 takes the only lease and
// keeps it past its ttl; c2 tries for it every 5 ms from 600 ms on; at
// atMs, target's clock ("" the database's) jumps ahead by offsetMs, until
// the end.
func toleranceScenario(o Options, mutant, target string, offsetMs, atMs int) *Plan {
	c2 := []Step{{Op: Sleep, Ms: 600}}
	for i := 0; i < 100; i++ {
		c2 = append(c2, Step{Op: histories.Acquire}, Step{Op: Sleep, Ms: 5})
	}
	return &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Max: 1, TTLMs: toleranceTTLMs,
		Options: o, Mutant: mutant,
		Clients: [][]Step{
			{{Op: histories.Acquire}, {Op: Sleep, Ms: 1500}, {Op: histories.Release}},
			c2,
		},
		Faulted: leaserun.Faulted[Fault]{
			Nemesis:   []Fault{{At: atMs, Fault: histories.ClockJump, Target: target, OffsetMs: offsetMs}},
			Decisions: run.Decisions{ScheduleSeed: uint64(atMs)},
		},
	}
}
