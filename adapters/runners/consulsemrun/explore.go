package consulsemrun

import (
	"context"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
)

// exploreRows are the configurations explore compares: what a restart
// does to the sessions on each backend, Consul's sessions with a
// lock-delay (of their TTL), and Consul judged as if its TTL were exact
// (an expiry factor of 1, where Consul's is 2).
var exploreRows = []struct {
	name string
	c    Config
}{
	{"Consul -dev (a restart forgets)", Config{Backend: Consul, AnyRestart: true}},
	{"Consul persistent (a restart keeps, renews)", Config{Backend: Consul, Persistent: true}},
	{"etcd (a restart keeps, renews)", Config{Backend: Etcd}},
	{"Consul persistent, lock-delay = TTL", Config{Backend: Consul, Persistent: true, LockDelay: true}},
	{"Consul persistent, judged with factor 1", Config{Backend: Consul, Persistent: true, Expiry: 1}},
}

// exploreCols are the faults of each column.
var exploreCols = []struct {
	name   string
	faults []string
}{
	{"no faults", []string{}},
	{"kills, lost replies", []string{histories.Kill, histories.DropReply}},
	{"pauses", []string{histories.Pause}},
	{"partitions", []string{histories.Partition}},
	{"server restarts", []string{histories.RestartBroker}},
}

// Explore proves the reference in each configuration (exploreRows) under
// each family of faults (exploreCols), on the simulator, and writes the
// table: where a configuration is unsafe, the cell shows the property
// that fails and its counterexample.
func Explore(ctx context.Context, c explore.Config) (inconclusive bool, err error) {
	m := explore.Matrix{Title: "configuration", Prove: func(r, col int) prover.Subject {
		cfg := exploreRows[r].c
		cfg.Faults = exploreCols[col].faults
		return cfg
	}}
	for _, r := range exploreRows {
		m.Rows = append(m.Rows, r.name)
	}
	for _, f := range exploreCols {
		m.Cols = append(m.Cols, f.name)
	}
	return m.Run(ctx, c)
}
