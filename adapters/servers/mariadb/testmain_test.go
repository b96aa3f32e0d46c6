package mariadb_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
)

// TestMain finds the test database for package mysql's tests, which cannot
// import mariadbtest themselves (it imports package mysql): this external
// test package can.
func TestMain(m *testing.M) {
	// Killed connections make the driver log "unexpected EOF" and the like.
	driver.SetLogger(log.New(io.Discard, "", 0))
	cfg, err := mariadbtest.Config()
	if err != nil {
		fmt.Printf("adapters/servers/mariadb: no MariaDB (%v): database tests skip\n", err)
	}
	mariadb.SetTestDB(cfg, err)
	os.Exit(m.Run())
}
