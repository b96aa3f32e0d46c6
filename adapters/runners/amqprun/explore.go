package amqprun

import (
	"context"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
)

// exploreRows are the explore matrix's rows: the reference with some of its
// open choices changed.
var exploreRows = []struct {
	name string
	set  func(*Options)
}{
	{"spec defaults", func(*Options) {}},
	{"ascending deletion", func(o *Options) { o.DeleteOrder = "ascending" }},
	{"ascending deletion, overshoot 2", func(o *Options) { o.DeleteOrder, o.Overshoot = "ascending", 2 }},
	{"overshoot 2", func(o *Options) { o.Overshoot = 2 }},
	{"scan from the last known slot", func(o *Options) { o.ScanStart = "last-known" }},
	{"scan from a random slot", func(o *Options) { o.ScanStart = "random" }},
	{"no admin mutex", func(o *Options) { o.NoAdminMutex = true }},
	{"verify by passive declare", func(o *Options) { o.VerifyMethod = "passive" }},
	{"heartbeat 1 s", func(o *Options) { o.HeartbeatMs = Ms(1000) }},
	{"heartbeats off", func(o *Options) { o.HeartbeatMs = Ms(0) }},
	{"connect at the first operation", func(o *Options) { o.LazyConnect = true }},
	{"a channel per purpose", func(o *Options) { o.Channels = "per-purpose" }},
	{"reconnect after a lost connection", func(o *Options) { o.Reconnect = true }},
	{"plain failure (unavailable)", func(o *Options) { o.PlainFailure = true }},
}

// exploreCols are the matrix's columns.
var exploreCols = []struct {
	name   string
	faults []string
}{
	{"no faults", []string{}},
	{"crashes", []string{histories.Kill, AdminCrash}},
	{"network", []string{histories.Partition, histories.Pause, histories.DropReply}},
	{"broker", []string{histories.ForceClose, histories.RestartBroker}},
	{"all faults", nil},
}

// ExploreColumns are the explore matrix's columns: each family of faults
// by name, and its faults (nil: every fault).
func ExploreColumns() (names []string, faults [][]string) {
	for _, f := range exploreCols {
		names, faults = append(names, f.name), append(faults, f.faults)
	}
	return names, faults
}

// Explore proves the reference with each open choice of the spec changed
// (rows) under each family of faults (columns), on the simulator, and
// writes the table of what broke.
func Explore(ctx context.Context, c explore.Config) (inconclusive bool, err error) {
	m := explore.Matrix{Title: "variant", Prove: func(r, col int) prover.Subject {
		a := Config{Scope: prover.Scope{Faults: exploreCols[col].faults}}
		exploreRows[r].set(&a.Options)
		return a
	}}
	for _, v := range exploreRows {
		m.Rows = append(m.Rows, v.name)
	}
	for _, f := range exploreCols {
		m.Cols = append(m.Cols, f.name)
	}
	return m.Run(ctx, c)
}
