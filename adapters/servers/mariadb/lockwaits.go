package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// LockWaits returns the connections (CONNECTION_ID()) whose transactions
// wait for a row or table lock, each with the table of the lock it waits
// for (`db`.`name`), as SHOW ENGINE INNODB STATUS shows them on db (a
// *sql.DB or *sql.Conn; the user needs the PROCESS privilege). The status
// is read on the spot, unlike information_schema.INNODB_TRX: a cache that
// InnoDB refreshes only after 100 ms without a reader, so that polling it
// sees a wait long after it ended, or never sees one begin.
func LockWaits(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (map[int64]string, error) {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return nil, fmt.Errorf("SHOW ENGINE INNODB STATUS: %w", err)
	}
	return parseLockWaits(status), nil
}

// parseLockWaits reads the TRANSACTIONS section of InnoDB's status: a
// transaction is "---TRANSACTION ..." and the lines up to the next; one
// of them starts "LOCK WAIT" while it waits, one "MariaDB thread id N,"
// (MySQL: "MySQL thread id N,") names its connection, and the line after
// "------- TRX HAS BEEN WAITING" describes the lock it waits for ("RECORD
// LOCKS ... of table `db`.`name` ..." or "TABLE LOCK table `db`.`name`
// ...").
func parseLockWaits(status string) map[int64]string {
	out := map[int64]string{}
	if i := strings.Index(status, "\nTRANSACTIONS\n"); i >= 0 {
		status = status[i:]
	}
	if i := strings.Index(status, "\n--------\n"); i >= 0 {
		status = status[:i]
	}
	for _, tr := range strings.Split(status, "\n---TRANSACTION ")[1:] {
		waits, id, table := false, int64(-1), "?"
		lines := strings.Split(tr, "\n")
		for i, line := range lines {
			if strings.HasPrefix(line, "LOCK WAIT ") {
				waits = true
			}
			for _, p := range []string{"MariaDB thread id ", "MySQL thread id "} {
				if rest, ok := strings.CutPrefix(line, p); ok {
					n, _, _ := strings.Cut(rest, ",")
					if v, err := strconv.ParseInt(n, 10, 64); err == nil {
						id = v
					}
				}
			}
			if strings.HasPrefix(line, "------- TRX HAS BEEN WAITING") && i+1 < len(lines) {
				lock := lines[i+1]
				for _, p := range []string{" of table ", "TABLE LOCK table "} {
					if _, rest, ok := strings.Cut(lock, p); ok {
						table, _, _ = strings.Cut(rest, " ")
						break
					}
				}
			}
		}
		if waits && id >= 0 {
			out[id] = table
		}
	}
	return out
}
