package mariadb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/host/faultnet/faultnettest"
)

// The tests run against the test MariaDB (package mariadbtest:
// $LOCKPROVER_MYSQL_DSN, by default DefaultDSN), which they share with
// others: they use tables and keys of their own and drop them, and never
// stop, pause or reconfigure that server (restarts happen on a private
// one). Without it, every test that needs it skips.
//
// These tests are in package mysql, which mariadbtest imports, so they cannot
// import it: TestMain is in the external test package (testmain_test.go),
// which asks mariadbtest and hands the answer in with SetTestDB.

var (
	testCfg *driver.Config // the DSN, with short timeouts
	noDB    error          // why the database is unreachable, or nil
)

// SetTestDB is for TestMain: cfg is the test database (mariadbtest.Config),
// or err says why there is none.
func SetTestDB(cfg *driver.Config, err error) {
	testCfg, noDB = cfg, err
}

func openCfg(cfg *driver.Config) *sql.DB {
	c, err := driver.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	return sql.OpenDB(c)
}

func needDB(t testing.TB) {
	t.Helper()
	if noDB != nil {
		t.Skipf("no MariaDB: %v", noDB)
	}
}

// direct is a pool on the test database, not through any proxy, closed
// when the test ends.
func direct(t testing.TB) *sql.DB {
	t.Helper()
	needDB(t)
	db := openCfg(testCfg)
	t.Cleanup(func() { db.Close() })
	return db
}

// startProxy starts a proxy in front of the test database. At the end of
// the test the proxy is closed and must have left no goroutine behind.
func startProxy(t testing.TB) *Proxy {
	t.Helper()
	needDB(t)
	p, err := Listen(testCfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	faultnettest.CloseAtEnd(t, p)
	return p
}

// through is a pool on the test database through p, closed when the test
// ends (before the proxy is: cleanups run last first).
func through(t testing.TB, p *Proxy) *sql.DB {
	t.Helper()
	db := openCfg(p.Config(testCfg))
	t.Cleanup(func() { db.Close() })
	return db
}

// unique is a name (of a table, a prefix) no other test or run uses.
func unique(prefix string) string {
	var b [5]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s%x", prefix, b)
}

// table creates a table of this test's own (columns: the DDL's inside),
// dropped when the test ends.
func table(t testing.TB, db *sql.DB, columns string) string {
	t.Helper()
	name := unique("mysqlproxyt_")
	if _, err := db.ExecContext(ctx(t), "CREATE TABLE "+name+" ("+columns+") ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(c, "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return name
}

// ctx is a context that ends with the test, or after 20 s.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// session is a dedicated connection of db: one database session.
func session(t testing.TB, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
