package dbsem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/model/dbsem"
)

// At most two workers run the nightly report at a time; each keeps its
// lease alive while it works and releases it when done. (The example needs
// the test MariaDB, $LOCKPROVER_MYSQL_DSN's or the machine's own, and does
// not run without one.)
func Example() {
	cfg, err := mariadbtest.Config() // in your code: your database's DSN
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()

	// Tables of its own, so that the example shares nothing.
	prefix := fmt.Sprintf("dbsem_example_%d_", os.Getpid())
	sem, err := dbsem.Open(ctx, db, dbsem.Options{Prefix: prefix, Fencing: true})
	if err != nil {
		panic(err)
	}
	defer sem.Drop(ctx)

	first, _ := sem.Acquire(ctx, "nightly-report", 30*time.Second, 2)
	second, _ := sem.Acquire(ctx, "nightly-report", 30*time.Second, 2)
	fmt.Println("fences:", first.Fence, second.Fence)

	_, err = sem.Acquire(ctx, "nightly-report", 30*time.Second, 2)
	fmt.Println("third worker:", errors.Is(err, dbsem.ErrFull))

	// Progress made: 30 more seconds.
	fmt.Println("refresh:", sem.Refresh(ctx, "nightly-report", first.Token, 30*time.Second))
	fmt.Println("release:", sem.Release(ctx, "nightly-report", first.Token))
	fmt.Println("release again:", sem.Release(ctx, "nightly-report", first.Token))

	third, err := sem.Acquire(ctx, "nightly-report", 30*time.Second, 2)
	fmt.Println("third worker:", third.Fence, err)

	_, err = sem.Acquire(ctx, "nightly-report", 30*time.Second, 5)
	fmt.Println(err)
	// Output:
	// fences: 1 2
	// third worker: true
	// refresh: <nil>
	// release: <nil>
	// release again: dbsem: the lease has expired
	// third worker: 3 <nil>
	// dbsem: the key was set up differently: key "nightly-report" was set up with max 2, the acquire asked for max 5
}
