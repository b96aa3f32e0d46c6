package dbsemrun_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/adapters/runners/dbsemrun/dbsemprotocol"
	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
)

// A client whose process hangs is given up, said plainly, and goes on as
// a new process with the rest of its script (as after a kill, recorded
// once its operation has ended, which excuses nothing): here c1's first
// process never answers its refresh, and a second process acquires and
// releases. The hang fails available, and nothing else.
func TestHungClientGoesOn(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	flag := filepath.Join(t.TempDir(), "hung")
	li := dbsemprotocol.NewProcesses("/usr/bin/python3 testdata/hang_first_refresh.py " + flag + " " + lockprover + " serve-reference --kind db-semaphore")
	li.Timeout = 10 * time.Second // the others take well under that, even beside the suite
	defer li.Stop()
	p := &dbsemrun.Plan{Version: dbsemrun.PlanVersion, Kind: dbsemrun.Kind, Key: "lp-hang", Max: 1, TTLMs: 1000,
		Clients: [][]dbsemrun.Step{{{Op: histories.Acquire}, {Op: histories.Refresh}, {Op: histories.Acquire}, {Op: histories.Release}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := dbsemrun.MariaDB{DSN: dsn}.Run(ctx, p, li)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	histories.Write(&b, res.History)
	var ops []string
	hungAt, killAt := -1, -1
	for i, e := range res.History {
		switch {
		case e.Process == "c1" && e.F == histories.Refresh && e.Type == histories.Info && strings.Contains(e.Error, "hung: no answer to its refresh within 10s"):
			hungAt = i
		case e.Process == "nemesis" && e.F == histories.Kill && e.Type == histories.Invoke && e.Value != nil && histories.FaultOf(&e).Process == "c1":
			killAt = i
		case e.Process == "c1" && e.Type != histories.Invoke:
			ops = append(ops, e.F+":"+string(e.Type))
		}
	}
	if hungAt < 0 || killAt < hungAt {
		t.Fatalf("want c1's refresh to end hung, then c1 killed (at %d, %d)\n%s", hungAt, killAt, b.String())
	}
	if want := []string{"acquire:ok", "acquire:ok", "release:ok"}; strings.Join(ops, " ") != strings.Join(want, " ") {
		t.Errorf("c1's other operations ended %v, want %v: the script did not go on after the hang\n%s", ops, want, b.String())
	}
	if !strings.Contains(strings.Join(res.Evidence.Problems, "\n"), "c1 hung: no answer to its refresh within 10s") {
		t.Errorf("the hang is not among the problems: %q", res.Evidence.Problems)
	}
	// The hang is the implementation's failure, charged to available;
	// nothing else is violated.
	for _, v := range prover.Judge(res, model.Options{}).Verdicts {
		hang := v.Property == "available"
		if (v.Status == verdict.Fail) != hang || hang && !strings.Contains(v.Detail, "c1 hung: no answer to its refresh within 10s") {
			t.Errorf("%s: %s %s\n%s", v.Property, v.Status, v.Detail, b.String())
		}
	}
}
