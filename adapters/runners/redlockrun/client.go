package redlockrun

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/redlock"
)

// A Client is one process's handle on the lock: the reference
// (*redlock.Redlock, or a mutant of it) or an implementation in another
// process, over the process protocol. Its errors say what the history
// records:
//   - Acquire: an error wrapping redlock.ErrHeld (fail, full), unless it
//     also wraps redlock.ErrLeftBehind; an error wrapping ErrNotGranted
//     (fail, claiming nothing); any other error leaves the outcome unknown
//     (info): a key it set on some servers may stay until it expires;
//   - Refresh, Release: redlock.ErrExpired (fail, expired); any other
//     error leaves the outcome unknown (info).
//
// A Lease's Fence is NoFence where the implementation gave none (the
// fencing property then has nothing to judge of that grant).
type Client interface {
	Acquire(ctx context.Context, key string, ttl time.Duration) (redlock.Lease, error)
	Refresh(ctx context.Context, l redlock.Lease, ttl time.Duration) (redlock.Lease, error)
	Release(ctx context.Context, l redlock.Lease) error
	Close() error
}

// NoFence is a Lease's Fence when the implementation gave no fencing
// token: Redlock's random value is none (it identifies a grant; it does
// not order grants).
const NoFence = -1

// ErrNotGranted marks an acquire that certainly took nothing, for a reason
// that is not "held" (an implementation's definite error).
var ErrNotGranted = errors.New("not granted")

// The reference is a Client.
var _ Client = (*redlock.Redlock)(nil)

// priorityClient is the priority reference as a client of one priority.
type priorityClient struct {
	*redlock.Priority
	prio int64
}

func (c priorityClient) Acquire(ctx context.Context, key string, ttl time.Duration) (redlock.Lease, error) {
	return c.Priority.Acquire(ctx, key, ttl, c.prio)
}

// An Impl is an implementation under test that runs as processes of its
// own, in any language (redlockprotocol.Processes starts them): one
// process per incarnation of a client, on real redis-servers.
type Impl = lease.Impl[Session, ProcessClient]

// A Session is what a client process is told when it starts: the lock's
// key, the servers (each through the process's own fault proxy, in the
// plan's order) and the plan's ttl.
type Session struct {
	Key   string
	Addrs []string
	TTL   time.Duration
	// Run names the run (its plan's key): a start that fails is charged
	// to it.
	Run string
	// Priority says the lock is the priority Redlock (PriorityKind): init
	// says so, and each acquire says Prio, the client's priority. OnLost,
	// if set, receives the process's lost notices (a lease of its taken
	// by a higher priority, before it acknowledged the thief), each as it
	// is read, and before the reply to any operation of the run is
	// returned that was read after the process wrote the notice.
	Priority bool
	Prio     int64
	OnLost   func(redlock.Lost)
	// Limit, where above 1, makes the lock a counting semaphore of Limit
	// leases (an implementation's: the reference is a mutex); init says
	// it.
	Limit int
}

// A Claim is what an implementation's grant said of its validity, in
// times after the operation's start as the process counted it (the origin
// of its elapsed_ms): Until, the end of the validity it claims (elapsed_ms
// plus validity_ms); Elapsed, its reply (elapsed_ms); Started, when the
// library it wraps started by its own clock (started_ms, 0 if not said),
// no later than Elapsed.
type Claim struct{ Until, Elapsed, Started time.Duration }

// A ProcessClient is a Client in a process of its own.
type ProcessClient interface {
	Client
	// Claimed is what the last acquire_ok or refresh_ok said of the
	// lease's validity; ok is false if the reply claimed none.
	Claimed() (c Claim, ok bool)
	// Signal sends sig to the process: SIGKILL for a kill.
	Signal(sig syscall.Signal)
	// Crashed says why the process is gone, if it ended or was given up on
	// other than by Signal or Close; "" otherwise.
	Crashed() string
}
