package dbsemaphore

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/prover"
)

// mariaDSN is the MariaDB the tests use: $LOCKPROVER_MYSQL_DSN, or the
// machine's own. A test skips when it is out of reach.
func mariaDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("LOCKPROVER_MYSQL_DSN")
	if dsn == "" {
		dsn = DefaultDSN
	}
	if err := (MariaDB{DSN: dsn}).Preflight(context.Background()); err != nil {
		t.Skipf("no MariaDB: %v", err)
	}
	return dsn
}

// tablesLeft counts the tables of runs (prefix lp<hex>_) in the DSN's
// database.
func tablesLeft(t *testing.T, dsn string) map[string]bool {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name REGEXP '^lp[0-9a-f]{8}_'`)
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
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	dsn := mariaDSN(t)
	before := tablesLeft(t, dsn)
	c := prover.Config{Family: Config{Target: MariaDB{DSN: dsn}}, Timeout: time.Minute}
	out, err := prover.Search{Config: c, Seed: 3, Plans: 6, Shrink: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	for n := range tablesLeft(t, dsn) {
		if !before[n] {
			t.Errorf("table %s left behind", n)
		}
	}
	t.Logf("%d plans in %v", out.Plans, out.Elapsed)
}

// A mutant whose defect needs real row locks (the master-row design
// without FOR UPDATE: two clients count at once and both insert) is caught
// on MariaDB too, by its property.
func TestMutantsOnMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("real plans take seconds each")
	}
	dsn := mariaDSN(t)
	for _, m := range []string{"count-without-lock"} {
		t.Run(m, func(t *testing.T) {
			c := prover.Config{Family: Config{Target: MariaDB{DSN: dsn}, Mutant: m}, Timeout: time.Minute}
			c.Properties = []string{MutantNamed(m).Property}
			out, err := prover.Search{Config: c, Seed: 1, Plans: 40, Shrink: 5 * time.Second}.Run()
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
