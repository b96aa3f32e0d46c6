package mariadbsim

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// The database/sql driver. It behaves, towards database/sql, as
// go-sql-driver/mysql does with its default configuration: the same
// statements around transactions, the same errors when the server has
// closed a connection (driver.ErrBadConn only where nothing was sent, so
// that database/sql retries on a fresh connection; mysql.ErrInvalidConn
// once a statement went out and EOF came back), and the same check of a
// pooled connection before reuse. Every statement is one scheduling
// point of its process. One difference: a query runs at its first
// Rows.Next (QueryRow's Scan), not in QueryContext, so its errors come
// from Next (see Process.call for why), and a query whose rows are
// closed unread is not run at all.

// errInvalidConn is go-sql-driver/mysql's "invalid connection".
var errInvalidConn = mysql.ErrInvalidConn

// errRefused is what dialling a server that is down gives.
func errRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: serverAddr,
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

var serverAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3306}

type connector struct{ p *Process }

// Connect opens a connection: one scheduling point, refused while the
// server is down.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := c.p.call(request{kind: reqConnect}, true)
	if rep.err != nil {
		return nil, rep.err
	}
	return rep.conn, nil
}

func (c *connector) Driver() driver.Driver { return simDriver{} }

type simDriver struct{}

func (simDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("sqlsim: connections come from Process.DB, not from a DSN")
}

// A conn is the client's end of a connection.
type conn struct {
	p            *Process
	s            *session
	broken       bool // the client knows the connection is gone
	clientClosed bool
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
)

// send posts one statement and returns the server's reply; safe says
// whether the process may stop in it if killed (see Process.call).
func (c *conn) send(ctx context.Context, query string, args []driver.Value, safe bool) (reply, error) {
	if c.broken {
		return reply{}, driver.ErrBadConn
	}
	if err := ctx.Err(); err != nil {
		return reply{}, err
	}
	rq := request{kind: reqStmt, c: c}
	rq.parsed, rq.err = parse(query)
	if rq.err == nil {
		var err error
		if rq.b, err = bind(rq.parsed.v, args); err != nil {
			rq.err = errors.New("sqlsim: statement " + rq.parsed.v.tpl.name + ": " + err.Error())
		}
	}
	rep := c.p.call(rq, safe)
	return rep, rep.err
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	rep, err := c.send(ctx, query, values(args), true)
	if err != nil {
		return nil, err
	}
	return result{affected: rep.affected, lastID: rep.lastID}, nil
}

// QueryContext returns the query's rows, to be run at the first Next.
func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.query(ctx, query, values(args))
}

func (c *conn) query(ctx context.Context, query string, args []driver.Value) (driver.Rows, error) {
	if c.broken {
		return nil, driver.ErrBadConn
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &rows{c: c, ctx: ctx, query: query, args: args}
	if p, err := parse(query); err == nil {
		r.cols = p.v.tpl.cols
	}
	return r, nil
}

func values(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

// BeginTx sends what go-sql-driver/mysql sends: SET TRANSACTION ISOLATION
// LEVEL for a level other than the default, then START TRANSACTION. Only
// READ COMMITTED (dbsem's) is modelled; read-only transactions are not.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.broken {
		return nil, driver.ErrBadConn
	}
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault:
	case sql.LevelReadCommitted:
		if _, err := c.send(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", nil, false); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("sqlsim: isolation level " + sql.IsolationLevel(opts.Isolation).String() + " is not modelled")
	}
	q := "START TRANSACTION"
	if opts.ReadOnly {
		q = "START TRANSACTION READ ONLY"
	}
	if _, err := c.send(ctx, q, nil, false); err != nil {
		return nil, err
	}
	return &tx{c: c}, nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext returns a statement that is sent as text when it runs
// (the server has nothing to prepare; dbsem never prepares explicitly).
func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.broken {
		return nil, driver.ErrBadConn
	}
	return &stmt{c: c, query: query}, nil
}

// Close closes the client's end. The server rolls back what the
// connection had open, at once, unless it is waiting for a lock in a
// statement of that connection (then when the wait ends). A killed
// process stops here (see Process.call).
func (c *conn) Close() error {
	if !c.clientClosed {
		c.clientClosed, c.broken = true, true
		c.p.w.clientClose(c.s)
	}
	c.p.w.base.StopKilled(c.p)
	return nil
}

// ResetSession is go-sql-driver/mysql's check of a pooled connection
// before reuse: one the server has closed is bad, and database/sql takes
// another, or dials.
func (c *conn) ResetSession(context.Context) error {
	if c.broken || c.s.closed || c.p.proc.Killed() {
		c.broken = true
		return driver.ErrBadConn
	}
	return nil
}

func (c *conn) IsValid() bool { return !c.broken && !c.p.proc.Killed() }

// A tx is the client's handle on a transaction: COMMIT and ROLLBACK.
type tx struct {
	c    *conn
	done bool
}

func (t *tx) Commit() error   { return t.end("COMMIT") }
func (t *tx) Rollback() error { return t.end("ROLLBACK") }

func (t *tx) end(q string) error {
	if t.done || t.c.broken {
		return errInvalidConn
	}
	t.done = true
	_, err := t.c.send(context.Background(), q, nil, false)
	return err
}

type stmt struct {
	c     *conn
	query string
}

func (s *stmt) Close() error  { return nil }
func (s *stmt) NumInput() int { return -1 }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	rep, err := s.c.send(context.Background(), s.query, args, true)
	if err != nil {
		return nil, err
	}
	return result{affected: rep.affected, lastID: rep.lastID}, nil
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.c.query(context.Background(), s.query, args)
}

type result struct{ affected, lastID int64 }

func (r result) LastInsertId() (int64, error) { return r.lastID, nil }
func (r result) RowsAffected() (int64, error) { return r.affected, nil }

// rows is a query's result set. The first Next runs the query, and the
// server's answer holds every row; closing never talks to the server
// (database/sql may close rows from a goroutine of its own).
type rows struct {
	c     *conn
	ctx   context.Context
	query string
	args  []driver.Value
	sent  bool
	cols  []string
	data  [][]driver.Value
	next  int
}

func (r *rows) Columns() []string { return r.cols }
func (r *rows) Close() error      { return nil }

func (r *rows) Next(dest []driver.Value) error {
	if !r.sent {
		r.sent = true
		rep, err := r.c.send(r.ctx, r.query, r.args, true)
		if err != nil {
			return err
		}
		r.data = rep.rows
	}
	if r.next >= len(r.data) {
		return io.EOF
	}
	copy(dest, r.data[r.next])
	r.next++
	return nil
}
