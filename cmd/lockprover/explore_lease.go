package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/lockprover/lockprover/families/dbsemaphore"
	"github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
)

// leaseRows are the lease matrix's rows: the database semaphore's designs,
// a short and a long ttl, and a wider drift bound.
var leaseRows = []struct {
	name    string
	options dbsemaphore.Options
	ttlMs   int
	drift   float64
}{
	{"master-row, ttl 100 ms", dbsemaphore.Options{}, 100, 0},
	{"master-row, ttl 1 s", dbsemaphore.Options{}, 1000, 0},
	{"master-row, ttl 1 s, drift 10%", dbsemaphore.Options{}, 1000, 0.1},
	{"row-per-slot, ttl 100 ms", dbsemaphore.Options{Design: "row-per-slot"}, 100, 0},
	{"row-per-slot, ttl 1 s", dbsemaphore.Options{Design: "row-per-slot"}, 1000, 0},
	{"row-per-slot, fencing, ttl 300 ms", dbsemaphore.Options{Design: "row-per-slot", Fencing: true}, 300, 0},
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

// exploreLease is explore --kind db-semaphore: the lease matrix (design x
// ttl x drift bound, under each family of faults, on the simulated
// database), then the clock-jump tolerance table (skewTolerance).
func exploreLease(ctx context.Context, cfg exploreConfig, stdout, stderr io.Writer) int {
	var rows, cols []string
	for _, r := range leaseRows {
		rows = append(rows, r.name)
	}
	for _, f := range leaseFaultSets {
		cols = append(cols, f.name)
	}
	var b strings.Builder
	status := exploreMatrix(ctx, cfg, &b, rows, cols, func(r, c int) prover.Family {
		row := leaseRows[r]
		return dbsemaphore.Config{Options: row.options, TTLMs: row.ttlMs, Drift: row.drift, Faults: leaseFaultSets[c].faults}
	}, stdout, stderr)
	if status != exitOK && status != exitInconclusive {
		return status
	}
	fmt.Fprintln(stdout)
	if code := skewTolerance(ctx, stdout, stderr); code != exitOK {
		return code
	}
	return status
}

// toleranceRows are the tolerance table's rows: both designs, and the
// mutant that judges expiry by the client's clock, for contrast.
var toleranceRows = []struct {
	name    string
	options dbsemaphore.Options
	mutant  string
}{
	{"master-row", dbsemaphore.Options{}, ""},
	{"row-per-slot", dbsemaphore.Options{Design: "row-per-slot"}, ""},
	{"expiry by the client's clock (mutant client-clock-expiry)", dbsemaphore.Options{}, "client-clock-expiry"},
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
func skewTolerance(ctx context.Context, stdout, stderr io.Writer) int {
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
	writeExploreHeader(&b, "design", cols)
	for _, row := range toleranceRows {
		b.WriteString("| " + row.name + " |")
		for _, col := range toleranceCols {
			if ctx.Err() != nil {
				fmt.Fprint(stdout, b.String())
				fmt.Fprintln(stderr, "explore: interrupted in the tolerance table")
				return exitInterrupted
			}
			cell, err := toleranceCell(row.options, row.mutant, col.target, col.fraction)
			if err != nil {
				fmt.Fprintf(stderr, "explore: tolerance of %s: %v\n", row.name, err)
				return exitUsage
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	fmt.Fprint(stdout, b.String())
	return exitOK
}

// toleranceCell runs the scenario toleranceRuns times and says what
// lease-exclusive made of it.
func toleranceCell(o dbsemaphore.Options, mutant, target string, fraction float64) (string, error) {
	tolerated, excused, violated := 0, 0, 0
	for i := 0; i < toleranceRuns; i++ {
		p := toleranceScenario(o, mutant, target, int(fraction*toleranceTTLMs), 50+20*i)
		res, err := dbsemaphore.Simulate(p, nil)
		if err != nil {
			return "", err
		}
		r := prover.Judge(res, dbsemaphore.Config{}.Judging(model.Options{}))
		for _, v := range r.Verdicts {
			if v.Property != lease.LeaseExclusive {
				continue
			}
			switch {
			case v.Status == model.Fail:
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
func toleranceScenario(o dbsemaphore.Options, mutant, target string, offsetMs, atMs int) *dbsemaphore.Plan {
	c2 := []dbsemaphore.Step{{Op: dbsemaphore.Sleep, Ms: 600}}
	for i := 0; i < 100; i++ {
		c2 = append(c2, dbsemaphore.Step{Op: histories.Acquire}, dbsemaphore.Step{Op: dbsemaphore.Sleep, Ms: 5})
	}
	return &dbsemaphore.Plan{Version: dbsemaphore.PlanVersion, Kind: dbsemaphore.Kind, Key: "lp", Max: 1, TTLMs: toleranceTTLMs,
		Options: o, Mutant: mutant,
		Clients: [][]dbsemaphore.Step{
			{{Op: histories.Acquire}, {Op: dbsemaphore.Sleep, Ms: 1500}, {Op: histories.Release}},
			c2,
		},
		Nemesis:      []dbsemaphore.Fault{{At: atMs, Fault: histories.ClockJump, Target: target, OffsetMs: offsetMs}},
		ScheduleSeed: uint64(atMs),
	}
}
