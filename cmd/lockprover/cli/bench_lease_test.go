package cli

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/internal/quick"
)

// bench --kind db-semaphore measures the reference on MariaDB beside its
// floors, in both designs, and drops its tables; amqp-locks' flags are
// refused.
func TestBenchDBSemaphore(t *testing.T) {
	quick.Skip(t, "MariaDB")
	t.Parallel()
	dsn := mariadbtest.DSN(t)
	var prefixes []string // each run's own: other runs may share the server
	for _, opts := range []string{"", "design=row-per-slot,fencing"} {
		args := []string{"bench", "--kind", "db-semaphore", "--dsn", dsn, "--n", "5", "--warmup", "1"}
		if opts != "" {
			args = append(args, "--options", opts)
		}
		code, out, errOut := lockprover(args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if _, rest, ok := strings.Cut(out, "table prefix "); ok {
			prefixes = append(prefixes, strings.Fields(rest)[0])
		} else {
			t.Errorf("%v: no table prefix in\n%s", args, out)
		}
		for _, want := range []string{"| acquire, key free |", "| acquire, key full |", "| refresh, lease live | ", "1 (1 update)", "| F4 |"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: no %q in\n%s", args, want, out)
			}
		}
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, prefix := range prefixes {
		var left int
		db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND LEFT(table_name, ?) = ?`, len(prefix), prefix).Scan(&left)
		if left != 0 {
			t.Errorf("%d bench tables of %s left behind", left, prefix)
		}
	}
	for _, bad := range [][]string{{"--slots", "4"}, {"--amqp-url", "amqp://x"}, {"--options", "design=sideways"}} {
		code, _, errOut := lockprover(append([]string{"bench", "--kind", "db-semaphore"}, bad...)...)
		if code != exitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("bench --kind db-semaphore %v: exit %d, %s", bad, code, errOut)
		}
	}
}
