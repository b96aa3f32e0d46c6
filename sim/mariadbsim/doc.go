// Package mariadbsim is a deterministic, in-memory MariaDB for the database
// counting semaphore (package dbsem): exactly the statements dbsem sends,
// with InnoDB's row locking under READ COMMITTED, virtual time and
// faults, behind a database/sql driver, so that dbsem runs unchanged on
// it and a plan (clients, faults, a schedule) always gives the same run.
//
// A World is the server plus the processes that use it, in the manner of
// package sim: each process is a coroutine that moves only when the
// scheduler hands it control, and every statement it sends is a
// scheduling point (it yields before the server applies the statement,
// so that other processes interleave between statements); Options.Decide
// picks among the runnable processes. Time is virtual: each statement
// takes 100 µs, a connection 1 ms, and when nobody can run the clock
// jumps to the next timer (a sleep, a lock wait's timeout, an After).
// The same decisions give the same trace and results, byte for byte: no
// map order reaches behaviour, and database/sql's own goroutines never
// talk to the server (each process has its own pool, used only from its
// goroutine; see Process.DB).
//
// Modelled, as MariaDB 10.11 with InnoDB does it (compared with a real
// server statement by statement in mariadb_test.go, and on drawn
// sequences of statements by adapters/conform's differential):
//
//   - the statements: CREATE TABLE IF NOT EXISTS and DROP TABLE IF
//     EXISTS of dbsem's tables (with the implicit COMMIT), its SELECTs,
//     INSERTs, UPDATEs and DELETEs in every Defects variant, and SET
//     TRANSACTION ISOLATION LEVEL READ COMMITTED, START TRANSACTION,
//     COMMIT and ROLLBACK as database/sql and go-sql-driver/mysql send
//     them; any other statement fails naming it, and makes Run fail;
//   - transactions: autocommit statements are transactions of their own
//     (REPEATABLE READ, the server's default, which changes nothing for
//     these one-row statements); explicit ones as SET TRANSACTION made
//     them; plain SELECTs read the latest committed rows plus the
//     transaction's own changes;
//   - row locks on primary-key records, S and X, queued and granted in
//     order: SELECT ... FOR UPDATE waits; FOR UPDATE SKIP LOCKED passes
//     over rows others hold; UPDATE and DELETE lock what they look at
//     and wait, a DELETE even for rows it will not delete (InnoDB's
//     semi-consistent read is for range UPDATEs, and dbsem's UPDATEs find
//     their row by whole primary key); READ COMMITTED releases the locks
//     of rows a statement looked at but did not keep, unless it had to
//     wait for them; INSERT locks its row, and a duplicate takes a
//     shared lock (waiting for an uncommitted insert or delete of that
//     key) held to the end of the transaction; locks go at COMMIT,
//     ROLLBACK, and when a connection closes; a deleted row's record
//     stays while anyone holds or waits for its lock (as until InnoDB's
//     purge; with Options.HoldPurge, for good), locked and waited for by
//     REPEATABLE READ statements and duplicates' checks (READ COMMITTED
//     passes over it once the delete has committed),
//     and a rolled-back insert's record goes with its locks (a statement
//     waiting for it goes on), its S locks (a duplicate's check) living on
//     as gap locks before the next record, which an insert into the gap
//     waits for;
//   - waits end in error 1205 after innodb_lock_wait_timeout (only the
//     statement rolls back), or 1213 for a deadlock, found as MariaDB
//     10.6 and later find them: a waiting transaction waits for one
//     other, the owner of the first lock in its way in the record's
//     list (kept in the order InnoDB's lock structs were made), and the
//     check follows that chain, when a request waits and, from the
//     transactions a release leaves waiting for a waiting one, after
//     the release (so a cycle through a lock further down the list is
//     found only once a release makes it the first in the way); the
//     lighter transaction of the cycle rolls back, on a tie the one the
//     check started from: weighed as InnoDB does, by undo records and
//     lock structs, among them the two a waiting lock gains each time an
//     update or a rollback changes the size of its record, which InnoDB
//     rebuilds; 1062 for a duplicate key (INSERT IGNORE: nothing, 0
//     rows); 1146 for a missing table; errors are *mysql.MySQLError, as
//     the real driver's;
//   - results: rows affected are rows changed (go-sql-driver/mysql does
//     not set CLIENT_FOUND_ROWS), LAST_INSERT_ID(expr) in the OK packet,
//     DATETIME(6) to the microsecond, UTC_TIMESTAMP(6) read once at the
//     statement's start (also when it then waits), string datetimes as
//     parameters (the ClientClockExpiry defect);
//   - faults: Kill, KillConnections, Pause and Resume, Partition and
//     Heal, SkewClock, DropCommitReply and Restart, each documented with
//     what the client and the server see, following go-sql-driver/mysql's
//     errors; and AfterStatements and After to aim them.
//
// A killed process stops with sched's Proc.Stop (a panic that the
// process's coroutine recovers at its top), which runs its deferred
// functions (dbsem's tx.Rollback and conn.Close among them; their calls
// to the server fail at once). It stops only where database/sql holds no
// lock that its non-deferred code would release, lest those deferred
// calls wait forever: so a query runs at its first Rows.Next (which
// QueryRow's Scan calls), not in QueryContext, and its errors come from
// there; and a process killed in BeginTx, Commit or Rollback gets
// driver.ErrBadConn, and stops when database/sql closes the connection.
//
// MariaDB 11.8 (Options.Version "11.8") differs in one rule, found by the
// differential against Debian 13's 11.8.9 and modelled there only: a
// transaction that holds S or X on a record passes over the waiting X
// requests of transactions that wait for it (MDEV-34877, MySQL's Bug
// #11745929), so a SKIP LOCKED read takes the row and a lock upgrade
// goes on where 10.11 passes the row over or reports a deadlock (see
// conflictNew). The default is 10.11's behaviour, byte for byte.
//
// Not modelled: SQL beyond dbsem's statements; next-key locks, and gap
// locks other than those a removed record leaves (dbsem takes none under
// READ COMMITTED, and its autocommit statements, under REPEATABLE READ,
// find rows by whole primary key, where a gap lock would last only while
// the statement runs); InnoDB's purge as it
// runs in the background (here a deleted row's record goes once nobody
// holds or waits for its lock, or with Options.HoldPurge never);
// isolation levels other than READ COMMITTED for explicit transactions; metadata locks (a DROP
// does not wait for transactions using its tables); MVCC snapshots older
// than a statement; prepared statements on the server (a statement is one
// round trip, as with interpolateParams); context cancellation in the
// middle of a statement (a context is looked at before each statement
// only); latency beyond the fixed costs above; the server's clock moving
// backwards on its own; the addresses of InnoDB's transaction objects,
// whose order is the order in which a deadlock check after a release
// takes up the transactions it was given (a std::set of pointers): here a
// connection takes the lowest free slot at its first statement on a
// table, as it takes the free object of lowest address from InnoDB's
// pool, which agrees with it as long as nothing else (InnoDB's own
// background transactions, the connections of other clients) takes or
// gives back objects meanwhile; InnoDB's pages, but for one page a table
// (dbsem's tables take a page or so): a release looks again at every
// request waiting on the table, as InnoDB does on the page.
package mariadbsim
