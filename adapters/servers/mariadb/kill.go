package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	driver "github.com/go-sql-driver/mysql"
)

// errUnknownThread is MariaDB's and MySQL's "Unknown thread id" (1094):
// the connection is gone already.
const errUnknownThread = 1094

// KillConnections closes the server's connections with the given ids
// (CONNECTION_ID(); a Proxy's ConnectionIDs) from the server's side, with
// KILL CONNECTION on admin, a pool that may kill them (root's, or one with
// the CONNECTION ADMIN privilege, MariaDB's SUPER). The server aborts what
// each is running, rolls back its transaction (releasing its row locks) and
// closes the socket without a word: its client reads EOF, whether it was
// waiting for a reply (go-sql-driver: "invalid connection") or idle (the
// driver discards the connection before its next use). Killing a
// connection already gone is no error. The ids are killed in order; the
// errors of the others are joined.
//
// KILL takes effect at the connection's next check: at once for an idle
// connection or one waiting for a row lock, after the current row
// operation for a running statement.
func KillConnections(ctx context.Context, admin *sql.DB, ids ...int64) error {
	var errs []error
	for _, id := range ids {
		_, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		var me *driver.MySQLError
		if err != nil && !(errors.As(err, &me) && me.Number == errUnknownThread) {
			errs = append(errs, fmt.Errorf("mysql: kill connection %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
