// Package mariadbtest finds the MariaDB that tests use.
//
// Import it only from _test.go files: it imports package testing, which
// must not end up in a non-test binary.
//
// The test database is the one the environment variable
// LOCKPROVER_MYSQL_DSN names (a go-sql-driver/mysql DSN), or, when it is
// unset or empty, mariadb.DefaultDSN: the machine's own server on
// 127.0.0.1:3306, user root without a password, database test. Tests share
// it with others: they use tables of their own, drop them, and never stop,
// pause or reconfigure the server. It is pinged once per test binary, with
// short timeouts; when it cannot be used (the variable does not parse, or
// the server does not answer), DSN skips the test saying why and how to
// provide one.
//
// Package mysql's own (internal) tests cannot import this package, which
// imports package mysql: their TestMain is in the external test package
// mysql_test, which can, and hands Config's answer to them.
package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/internal/quick"
)

const (
	// EnvVar names the environment variable that names the test database.
	EnvVar = "LOCKPROVER_MYSQL_DSN"

	dialTimeout = 2 * time.Second  // a server out of reach is said quickly
	ioTimeout   = 20 * time.Second // a read or write never hangs a test
	pingTimeout = 3 * time.Second

	howTo = "set " + EnvVar + " (a go-sql-driver/mysql DSN, user:password@tcp(host:port)/database), " +
		"or start MariaDB on 127.0.0.1:3306 so that " + mariadb.DefaultDSN + " reaches it " +
		"(user root without a password, database test)"
)

var shared struct {
	once sync.Once
	dsn  string
	cfg  *driver.Config
	err  error
}

// lookup finds and pings the test database, once per test binary.
func lookup() (string, *driver.Config, error) {
	shared.once.Do(func() {
		var from string
		shared.dsn, from, shared.cfg, shared.err = parse(os.LookupEnv)
		if shared.err == nil {
			shared.err = ping(shared.cfg, from)
		}
	})
	return shared.dsn, shared.cfg, shared.err
}

// Config returns the test database's configuration: $LOCKPROVER_MYSQL_DSN,
// or mariadb.DefaultDSN, with a dial timeout of 2 s and read and write
// timeouts of 20 s where the DSN sets none. The caller owns the copy it
// gets. Without a database it returns why: the variable does not parse
// (the error names it), or the server at the DSN's address does not
// answer (the error names the address, never the password).
func Config() (*driver.Config, error) {
	_, cfg, err := lookup()
	if err != nil {
		return nil, err
	}
	return cfg.Clone(), nil
}

// DSN returns the test database's DSN as it was given
// ($LOCKPROVER_MYSQL_DSN, or mariadb.DefaultDSN; without Config's timeouts),
// or skips the test, saying why and how to provide one (set
// LOCKPROVER_MYSQL_DSN, or start MariaDB on 127.0.0.1:3306). Under -short
// (make check) it skips the test: the quick loop leaves MariaDB to make test.
func DSN(t testing.TB) string {
	t.Helper()
	quick.Skip(t, "MariaDB")
	dsn, _, err := lookup()
	if err != nil {
		t.Skip(skipMessage(err))
	}
	return dsn
}

// skipMessage says why there is no test database, and how to provide one.
func skipMessage(err error) string {
	return fmt.Sprintf("no MariaDB for this test (%v): %s", err, howTo)
}

// parse reads the test database's DSN from the environment (lookupEnv),
// says where it came from ($LOCKPROVER_MYSQL_DSN or mariadb.DefaultDSN) and
// adds the short timeouts.
func parse(lookupEnv func(string) (string, bool)) (dsn, from string, cfg *driver.Config, err error) {
	dsn, _ = lookupEnv(EnvVar)
	from = "$" + EnvVar
	if dsn == "" {
		dsn, from = mariadb.DefaultDSN, "mysql.DefaultDSN"
	}
	cfg, err = driver.ParseDSN(dsn)
	if err != nil {
		return "", "", nil, fmt.Errorf("%s does not parse: %w", from, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = dialTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = ioTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = ioTimeout
	}
	return dsn, from, cfg, nil
}

// ping connects to the server once; from says where its DSN came from.
func ping(cfg *driver.Config, from string) error {
	c, err := driver.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s (from %s): %w", cfg.Addr, from, err)
	}
	return nil
}
