package mysql_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/backends/mysql"
	"github.com/lockprover/lockprover/backends/mysql/mysqltest"
)

// TestMain finds the test database for package mysql's tests, which cannot
// import mysqltest themselves (it imports package mysql): this external
// test package can.
func TestMain(m *testing.M) {
	// Killed connections make the driver log "unexpected EOF" and the like.
	driver.SetLogger(log.New(io.Discard, "", 0))
	cfg, err := mysqltest.Config()
	if err != nil {
		fmt.Printf("backends/mysql: no MariaDB (%v): database tests skip\n", err)
	}
	mysql.SetTestDB(cfg, err)
	os.Exit(m.Run())
}
