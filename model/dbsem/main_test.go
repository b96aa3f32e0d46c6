package dbsem

import (
	"context"
	"crypto/rand"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
)

// The tests run against the test MariaDB (package mariadbtest:
// $LOCKPROVER_MYSQL_DSN, by default the machine's own). Without one, every
// test that needs it skips, and the examples do not run.

var (
	testCfg *mysql.Config // the DSN, with short timeouts
	noDB    error         // why the database is unreachable, or nil
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The lost-reply tests make the driver log "unexpected EOF".
	mysql.SetLogger(log.New(io.Discard, "", 0))
	testCfg, noDB = mariadbtest.Config()
	if noDB != nil {
		fmt.Printf("dbsem: no MariaDB (%v): database tests skip\n", noDB)
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			f.Value.Set("^Test") // examples cannot skip
		}
	}
	os.Exit(m.Run())
}

// openDB opens a pool on the test database (through the proxy at addr, if
// given), closed when the test ends; it skips the test without a database.
func openDB(t testing.TB, addr ...string) *sql.DB {
	t.Helper()
	if noDB != nil {
		t.Skipf("no MariaDB: %v", noDB)
	}
	cfg := testCfg.Clone()
	if len(addr) > 0 { // a proxy, which must see plain text
		cfg.Addr, cfg.TLS, cfg.TLSConfig = addr[0], nil, "false"
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	return db
}

// clientDB opens a pool of one connection, one database session, whose
// clock is skew away from the true one (frozen there, as SET @@timestamp
// does); 0 leaves it true.
func clientDB(t testing.TB, skew time.Duration) *sql.DB {
	t.Helper()
	db := openDB(t)
	db.SetMaxOpenConns(1)
	if skew != 0 {
		_, err := db.ExecContext(ctx(t), "SET @@timestamp = UNIX_TIMESTAMP(NOW(6)) + ?", skew.Seconds())
		if err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// uniquePrefix is a table prefix of this test's own.
func uniquePrefix() string {
	var b [5]byte
	rand.Read(b[:])
	return fmt.Sprintf("dbsemt_%x_", b)
}

// open opens a semaphore with a prefix of its own (o.Prefix if set) and
// drops its tables when the test ends, pass or fail.
func open(t testing.TB, db *sql.DB, o Options) *Semaphore {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = uniquePrefix()
	}
	s, err := Open(ctx(t), db, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Drop(c); err != nil {
			t.Errorf("drop: %v", err)
		}
	})
	return s
}

// ctx is a context that ends with the test, or after 20 s.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// designs runs f once per design, in parallel subtests.
func designs(t *testing.T, f func(t *testing.T, d Design)) {
	for _, d := range []Design{MasterRow, RowPerSlot} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}

// live counts the leases of key the database's true clock sees live.
func live(t testing.TB, db *sql.DB, s *Semaphore, key string) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM {tokens} WHERE lock_key = ? AND expires > UTC_TIMESTAMP(6)"
	if s.o.Design == RowPerSlot {
		q = "SELECT COUNT(*) FROM {slots} WHERE lock_key = ? AND token IS NOT NULL AND expires > UTC_TIMESTAMP(6)"
	}
	var n int
	if err := db.QueryRowContext(ctx(t), s.tables.Replace(q), key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
