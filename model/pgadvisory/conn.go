package pgadvisory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The statements the reference (Lock) sends, behind a Server and its
// Conns: on a real PostgreSQL through pgx (PGX), or on the simulator
// (sim/postgressim, simServer). A Conn's errors say what the Lock needs to
// know of a statement that failed, as errors.Is finds them: ErrNotSent
// (it certainly did nothing: a failed connect, nothing written), ErrEnded
// (the server had ended the session: its locks went with it), ErrIdled
// among them (it ended it for idling, before it read the statement);
// anything else leaves it unknown.
var (
	// ErrEnded: the server ended the session (57P01 admin_shutdown, by
	// pg_terminate_backend or a fast shutdown; 57P05 below).
	ErrEnded = errors.New("pgadvisory: the server ended the session")
	// ErrIdled: the server ended the session for idling past its
	// idle_session_timeout (57P05).
	ErrIdled = fmt.Errorf("%w for idling", ErrEnded)
)

// A Server is where a Lock opens its sessions, and the clock it reads.
type Server interface {
	// Open opens a session whose idle_session_timeout is idle (whole
	// milliseconds, at least one).
	Open(ctx context.Context, idle time.Duration) (Conn, error)
	// Now is the time by the Lock's clock.
	Now() time.Time
}

// A Conn is one session, and the statements the reference sends on it.
type Conn interface {
	// TryLock is pg_try_advisory_lock(key).
	TryLock(ctx context.Context, key int64) (bool, error)
	// Holds says whether pg_locks shows key granted to this session
	// (pg_backend_pid()).
	Holds(ctx context.Context, key int64) (bool, error)
	// Unlock is pg_advisory_unlock(key).
	Unlock(ctx context.Context, key int64) (bool, error)
	// Close closes the session (its connection).
	Close()
	// IsClosed says whether the connection is closed (by Close, or after
	// an error that broke it).
	IsClosed() bool
	// PID is the server's process id of the session.
	PID() uint32
}

// PGX is the PostgreSQL server at url, through pgx.
func PGX(url string) Server { return pgxServer(url) }

type pgxServer string

func (s pgxServer) Now() time.Time { return time.Now() }

func (s pgxServer) Open(ctx context.Context, idle time.Duration) (Conn, error) {
	cfg, err := pgx.ParseConfig(string(s))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["idle_session_timeout"] = strconv.FormatInt(idle.Milliseconds(), 10)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return pgxConn{c}, nil
}

type pgxConn struct{ c *pgx.Conn }

// scalar runs a query of one boolean.
func (c pgxConn) scalar(ctx context.Context, sql string, args ...any) (bool, error) {
	var b bool
	if err := c.c.QueryRow(ctx, sql, args...).Scan(&b); err != nil {
		return false, classify(err)
	}
	return b, nil
}

func (c pgxConn) TryLock(ctx context.Context, key int64) (bool, error) {
	return c.scalar(ctx, "SELECT pg_try_advisory_lock($1)", key)
}

func (c pgxConn) Holds(ctx context.Context, key int64) (bool, error) {
	return c.scalar(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() AND objsubid = 1
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid)`,
		uint64(key)>>32, uint64(key)&0xffffffff)
}

func (c pgxConn) Unlock(ctx context.Context, key int64) (bool, error) {
	return c.scalar(ctx, "SELECT pg_advisory_unlock($1)", key)
}

func (c pgxConn) Close()         { c.c.Close(context.Background()) }
func (c pgxConn) IsClosed() bool { return c.c.IsClosed() }
func (c pgxConn) PID() uint32    { return c.c.PgConn().PID() }

// classify says what pgx's error err means for the Lock: nothing sent
// (pgconn.SafeToRetry), the session ended (57P01, 57P05), or unknown.
func classify(err error) error {
	var pe *pgconn.PgError
	switch {
	case pgconn.SafeToRetry(err):
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	case errors.As(err, &pe) && pe.Code == "57P05":
		return fmt.Errorf("%w: %w", ErrIdled, err)
	case errors.As(err, &pe) && pe.Code == "57P01":
		return fmt.Errorf("%w: %w", ErrEnded, err)
	}
	return err
}
