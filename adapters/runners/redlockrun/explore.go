package redlockrun

import (
	"context"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
)

// exploreTTL is every explored plan's ttl, so that the rows compare.
const exploreTTL = 300

// exploreRows are the configurations of the Redlock debate: one server or
// three, keeping nothing across a restart or every write (fsync always),
// and a restart delayed past the ttl (antirez's answer to Kleppmann).
var exploreRows = []struct {
	name        string
	servers     int
	persistence string
	minDownMs   int
}{
	{"N=1, keeps nothing", 1, PersistNone, 0},
	{"N=1, fsync always", 1, PersistAlways, 0},
	{"N=3, keeps nothing", 3, PersistNone, 0},
	{"N=3, keeps nothing, restart delayed past the ttl", 3, PersistNone, exploreTTL*101/100 + 1},
	{"N=3, fsync always", 3, PersistAlways, 0},
}

// exploreCols are the faults of each column.
var exploreCols = []struct {
	name   string
	faults []string
}{
	{"no faults", []string{}},
	{"client kills, lost replies", []string{histories.Kill, histories.DropReply}},
	{"partitions", []string{histories.Partition}},
	{"server pauses", []string{histories.Pause}},
	{"server restarts", []string{histories.RestartBroker}},
	{"server clock jumps", []string{histories.ClockJump}},
}

// Explore proves the reference in each configuration of the Redlock debate
// (exploreRows) under each family of faults (exploreCols), on the
// simulated servers, and writes the table: where a configuration is
// unsafe, the cell shows the property that fails and its counterexample.
func Explore(ctx context.Context, c explore.Config) (inconclusive bool, err error) {
	m := explore.Matrix{Title: "configuration", Prove: func(r, col int) prover.Subject {
		row := exploreRows[r]
		return Config{Scope: prover.Scope{Faults: exploreCols[col].faults}, Servers: row.servers, Persistence: row.persistence, TTLMs: exploreTTL,
			AnyRestart: true, MinDownMs: row.minDownMs}
	}}
	for _, r := range exploreRows {
		m.Rows = append(m.Rows, r.name)
	}
	for _, f := range exploreCols {
		m.Cols = append(m.Cols, f.name)
	}
	return m.Run(ctx, c)
}
