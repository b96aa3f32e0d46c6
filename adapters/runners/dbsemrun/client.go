package dbsemrun

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
	"github.com/lockprover/lockprover/model/lease"
)

// A Client is one process's handle on the semaphore: the reference
// (*dbsem.Semaphore) or an implementation in another process, over the
// process protocol. Its errors say what the history records:
//   - Acquire: dbsem.ErrFull (fail, full); an error wrapping ErrNotGranted
//     (fail, claiming nothing); any other error, dbsem.ErrUnknownOutcome
//     among them, leaves the outcome unknown (info);
//   - Refresh, Release: dbsem.ErrExpired (fail, expired); any other error
//     leaves the outcome unknown (info).
type Client interface {
	Acquire(ctx context.Context, key string, ttl time.Duration, max int) (dbsem.Lease, error)
	Refresh(ctx context.Context, key, token string, ttl time.Duration) error
	Release(ctx context.Context, key, token string) error
}

// ErrNotGranted marks an acquire that certainly took nothing, for a reason
// that is not "full" (a disagreeing max, say).
var ErrNotGranted = errors.New("not granted")

// reference is the reference as a Client: every acquire error but full and
// an unknown outcome certainly granted nothing (dbsem's contract).
type reference struct{ *dbsem.Semaphore }

func (r reference) Acquire(ctx context.Context, key string, ttl time.Duration, max int) (dbsem.Lease, error) {
	l, err := r.Semaphore.Acquire(ctx, key, ttl, max)
	if err != nil && !errors.Is(err, dbsem.ErrFull) && !errors.Is(err, dbsem.ErrUnknownOutcome) {
		err = notGranted{err}
	}
	return l, err
}

// notGranted wraps an error as ErrNotGranted, keeping its text.
type notGranted struct{ err error }

func (e notGranted) Error() string        { return e.err.Error() }
func (e notGranted) Is(target error) bool { return target == ErrNotGranted }
func (e notGranted) Unwrap() error        { return e.err }

// An Impl is an implementation under test that runs as processes of its
// own, in any language (dbsemprotocol.Processes starts them): one process
// per incarnation of a client, on a real database.
type Impl = lease.Impl[Session, ProcessClient]

// A Session is what a client process is told when it starts: the
// semaphore and where its tables are.
type Session struct {
	Key string
	// DSN is the database as a github.com/go-sql-driver/mysql DSN, through
	// the client's fault proxy.
	DSN string
	// Prefix starts the name of every table the implementation makes:
	// letters, digits and '_', at most 50.
	Prefix string
	// Max and TTL are the plan's limit and lease time.
	Max int
	TTL time.Duration
	// Design is "master-row" or "row-per-slot" ("" means master-row), for
	// implementations that offer both; Fencing asks for numeric fencing
	// tokens.
	Design  string
	Fencing bool
}

// A ProcessClient is a Client in a process of its own.
type ProcessClient interface {
	Client
	// Signal sends sig to the process: SIGKILL for a kill, SIGSTOP and
	// SIGCONT for a pause.
	Signal(sig syscall.Signal)
	// Crashed says why the process is gone, if it ended or was given up on
	// other than by Signal or Close; "" otherwise.
	Crashed() string
	// Close ends the process as the protocol says.
	Close() error
}
