package pgadvisoryrun

import (
	"context"
	"strconv"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// A Client is one process's handle on the lock: the reference (a Lock) or
// an implementation in a process of its own, over the process protocol
// (docs/protocol.md, "PostgreSQL advisory locks"). Its errors say what
// the history records: ErrFull (acquire: fail, full); ErrNotSent (the
// operation certainly did nothing: fail, claiming nothing); ErrLost
// (refresh, release: fail, expired); any other error leaves the outcome
// unknown.
type Client interface {
	// Acquire tries to take the lock once, never waiting: the token of
	// the lease granted.
	Acquire(ctx context.Context) (token string, err error)
	// Refresh checks that the lease token names is still held, and
	// renews it.
	Refresh(ctx context.Context, token string) error
	// Release lets the lease token names go.
	Release(ctx context.Context, token string) error
}

// A Session is what a client process is told when it starts.
type Session struct {
	// URL is the server, through the client's fault proxy, as a
	// PostgreSQL connection URL (user postgres, database postgres, no
	// password, sslmode=disable).
	URL string
	// Key is the advisory lock's key (the one-bigint form).
	Key int64
	// TTL is the lease the holder counts on.
	TTL time.Duration
	// Run names the run, for the launcher's count of failed starts.
	Run string
}

// A ProcessClient is a Client in a process of its own.
type ProcessClient interface {
	Client
	// Signal sends sig to the process: SIGKILL for a kill, SIGSTOP and
	// SIGCONT for a pause.
	Signal(sig syscall.Signal)
	// Crashed says why the process is gone, if it ended or was given up
	// on other than by Signal or Close; "" otherwise.
	Crashed() string
	// Close ends the process as the protocol says.
	Close() error
}

// An Impl is an implementation under test that runs as processes of its
// own, in any language (pgadvisoryprotocol.Processes starts them): one
// process per incarnation of a client.
type Impl = lease.Impl[Session, ProcessClient]

// reference is a Lock as a Client: its tokens are name-1, name-2, ...,
// one per grant.
type reference struct {
	*pgadvisory.Lock
	name   string
	grants *int
}

// NewReference is the reference as a Client of session s, for client
// name: a Lock whose grants are named name-1, name-2, ...
func NewReference(name string, s Session, d pgadvisory.Defects) Client {
	return reference{Lock: pgadvisory.NewLock(s.URL, s.Key, s.TTL, d), name: name, grants: new(int)}
}

func (r reference) Acquire(ctx context.Context) (string, error) {
	if err := r.Lock.Acquire(ctx); err != nil {
		return "", err
	}
	*r.grants++
	return r.name + "-" + strconv.Itoa(*r.grants), nil
}

// current is the token of the lease the Lock holds, "" if none.
func (r reference) current() string {
	if !r.Lock.Held() {
		return ""
	}
	return r.name + "-" + strconv.Itoa(*r.grants)
}

func (r reference) Refresh(ctx context.Context, token string) error {
	if !r.Lock.Defects().NoCheck && token != r.current() {
		return pgadvisory.ErrLost
	}
	return r.Lock.Refresh(ctx)
}

func (r reference) Release(ctx context.Context, token string) error {
	if !r.Lock.Defects().UnlockElsewhere && token != r.current() {
		return pgadvisory.ErrLost
	}
	return r.Lock.Release(ctx)
}
