package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/faultnet/faultnettest"
)

// The tests run against the MariaDB that $LOCKPROVER_MYSQL_DSN names, by
// default root@tcp(127.0.0.1:3306)/test, which they share with others: they
// use tables and keys of their own and drop them, and never stop, pause or
// reconfigure that server (restarts happen on a private one). Without it,
// every test that needs it skips.

const defaultDSN = "root@tcp(127.0.0.1:3306)/test"

var (
	testCfg *driver.Config // the DSN, with short timeouts
	noDB    error          // why the database is unreachable, or nil
)

func TestMain(m *testing.M) {
	// Killed connections make the driver log "unexpected EOF" and the like.
	driver.SetLogger(log.New(io.Discard, "", 0))
	testCfg, noDB = reach()
	if noDB != nil {
		fmt.Printf("adapters/mysql: no MariaDB (%v): database tests skip\n", noDB)
	}
	os.Exit(m.Run())
}

func reach() (*driver.Config, error) {
	dsn := os.Getenv("LOCKPROVER_MYSQL_DSN")
	if dsn == "" {
		dsn = defaultDSN
	}
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("LOCKPROVER_MYSQL_DSN: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second // dial
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 20 * time.Second // never hang
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 20 * time.Second
	}
	db := openCfg(cfg)
	defer db.Close()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := db.PingContext(c); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Addr, err)
	}
	return cfg, nil
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
