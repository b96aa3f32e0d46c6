package dbsemaphore

import (
	"context"
	"errors"
	"time"

	"github.com/lockprover/lockprover/dbsem"
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
