package dbsemrun

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// tablesLeft lists the tables in the DSN's database whose names start
// with start: a test's own (MariaDB.Tables), as other tests may run on
// the same server at once.
func tablesLeft(t *testing.T, dsn, start string) map[string]bool {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND LEFT(table_name, ?) = ?`, len(start), start)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out[n] = true
	}
	return out
}

// The reference holds on MariaDB under every fault but a restart, and
// each run drops its tables.
func TestReferenceOnMariaDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	dsn := mariadbtest.DSN(t)
	tables := fmt.Sprintf("lpt%d", time.Now().UnixNano()%1e9)
	c := prover.Config{Subject: Config{Target: MariaDB{DSN: dsn, Tables: tables}}, Timeout: time.Minute}
	out, err := prover.Search{Config: c, Seed: 3, Plans: 6, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	if left := tablesLeft(t, dsn, tables); len(left) != 0 {
		t.Errorf("tables left behind: %v", left)
	}
	t.Logf("%d plans in %v", out.Plans, out.Elapsed)
}

// A mutant whose defect needs real row locks (the master-row design
// without FOR UPDATE: two clients count at once and both insert) is caught
// on MariaDB too, by its property. The counts must meet: with two busy
// processes beside the suite, seed 1's first 40 plans never had them
// meet, so the search may draw 120 (it stops at the first catch).
func TestMutantsOnMariaDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	dsn := mariadbtest.DSN(t)
	for _, m := range []string{"count-without-lock"} {
		t.Run(m, func(t *testing.T) {
			c := prover.Config{Subject: Config{Scope: prover.Scope{Mutant: m}, Target: MariaDB{DSN: dsn}}, Timeout: time.Minute}
			c.Properties = []string{MutantNamed(m).Property}
			out, err := prover.Search{Config: c, Seed: 1, Plans: 120, Shrink: 5 * time.Second}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found == nil {
				t.Fatalf("not caught in %d plans", out.Plans)
			}
			t.Logf("caught by %s after %d plans (%v)", out.Found.Property, out.Plans, out.Elapsed)
		})
	}
}

// On a private server of the test's own, plans restart the server (with
// the other faults) and the reference still holds.
func TestRestartsOnAPrivateMariaDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := privateMariaDB(ctx, t)
	c := prover.Config{Subject: Config{Scope: prover.Scope{Faults: []string{histories.RestartBroker, histories.Kill}}, Target: MariaDB{Server: s}}, Timeout: time.Minute}
	out, err := prover.Search{Config: c, Seed: 5, Plans: 5, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	if n := tablesLeft(t, s.DSN(), "lp"); len(n) != 0 {
		t.Errorf("tables left behind: %v", n)
	}
	t.Logf("%d plans in %v", out.Plans, out.Elapsed)
}

// A restart of the private server is recorded as in force from just
// before it began until the server answered again (a span at least its
// downtime long), and the nemesis waits for it: a restart timed within it
// strikes once it is over, never two at once (two launched two mariadbds
// on one port, and the loser ended the run, "another server answers
// there": the soaks' 5615 and 5715), and a force-close timed within it
// strikes once the server is back, recorded after it. Recorded as struck
// at once, a restart excused nothing after a client's last clean
// completion, which MariaDB 11.8's slower shutdown let come after it: a
// false available FAIL (seed 118 of the sixth session's drawn run).
func TestRestartRecordedUntilUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a private server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := privateMariaDB(ctx, t)
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Max: 1, TTLMs: 1000,
		Clients: [][]Step{{{Op: histories.Acquire}, {Op: histories.Release}, {Op: Sleep, Ms: 15000}, {Op: histories.Acquire}, {Op: histories.Release}}},
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{
			{Fault: histories.RestartBroker, At: 100},
			{Fault: histories.RestartBroker, At: 150},            // within the first: down for 200 ms at least
			{Fault: histories.ForceClose, Target: "c1", At: 200}, // within it too
		}}}
	res, err := MariaDB{Server: s}.Run(ctx, p, nil)
	if err != nil {
		t.Fatalf("the run: %v", err)
	}
	var b strings.Builder
	histories.Write(&b, res.History)
	var nemesis []histories.Event
	for _, e := range res.History {
		if e.Process == "nemesis" {
			nemesis = append(nemesis, e)
		}
	}
	var got []string
	for _, e := range nemesis {
		got = append(got, e.F+"/"+string(e.Type))
	}
	want := "restart-broker/invoke restart-broker/info restart-broker/invoke restart-broker/info force-close/invoke force-close/info"
	if strings.Join(got, " ") != want {
		t.Fatalf("the nemesis recorded %v, want %s: each fault after the restart before it is over\n%s", got, want, b.String())
	}
	for _, i := range []int{0, 2} {
		if d := time.Duration(nemesis[i+1].Time - nemesis[i].Time); d < restartDowntime || nemesis[i+1].Error != "" {
			t.Errorf("restart %d recorded over %v (error %q), want a span of at least its downtime %v, ending well", i/2+1, d, nemesis[i+1].Error, restartDowntime)
		}
	}
	for _, v := range prover.Judge(res, model.Options{Family: []any{Config{}.Judging("")}}).Verdicts {
		if v.Status == verdict.Fail {
			t.Errorf("%s failed: %s\n%s", v.Property, v.Detail, b.String())
		}
	}
}

// privateMariaDB starts a private server of the test's own, stopped when
// the test ends; the test is skipped where there is no mariadbd.
func privateMariaDB(ctx context.Context, t *testing.T) *mariadb.Server {
	t.Helper()
	s, err := mariadb.StartPrivate(ctx, t.TempDir())
	if errors.Is(err, mariadb.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

// A plan that restarts the server is refused on the shared one, before
// anything runs, with the flag that allows it.
func TestNoRestartOfTheSharedServer(t *testing.T) {
	t.Parallel()
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "k", Max: 1, TTLMs: 100,
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{{Fault: histories.RestartBroker, At: 10}}}}
	_, err := MariaDB{DSN: "root@tcp(127.0.0.1:1)/test"}.Run(context.Background(), p, nil)
	if err == nil || !strings.Contains(err.Error(), "--private-server") {
		t.Fatalf("got %v, want a refusal naming --private-server", err)
	}
}

// A DSN the target cannot use is said at once, naming what is wrong.
func TestMariaDBBadDSN(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"root@unix(/tmp/x.sock)/test": "over tcp",
		"root@tcp(127.0.0.1:3306)/":   "name a database",
		"not a dsn":                   "MariaDB DSN",
		"root@tcp(127.0.0.1:1)/test":  "127.0.0.1:1",
	} {
		err := MariaDB{DSN: dsn}.Preflight(context.Background())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DSN %q: got %v, want an error saying %q", dsn, err, want)
		}
	}
}
