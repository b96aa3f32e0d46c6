package consulsemrun

import (
	"context"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/model/lease"
)

// A Client is one process's handle on the semaphore: the reference
// (*consulsem.Semaphore, or a mutant of it) or an implementation in
// another process, over the process protocol (docs/protocol.md, "Consul's
// semaphore"). Its errors are the reference's, and say what the history
// records:
//   - Acquire: consulsem.ErrFull (fail, full); consulsem.ErrUnknownOutcome
//     (info: the slot may be held until the session expires); any other
//     error, consulsem.ErrNotGranted and consulsem.ErrMismatch among them,
//     certainly took no slot (fail, claiming nothing);
//   - Refresh, Release: consulsem.ErrExpired (fail, expired); any other
//     error leaves the outcome unknown (info);
//   - Verify: an error leaves the answer unknown (info).
//
// A Lease's Fence is NoFence where the implementation gave none (fencing
// then has nothing to judge of that grant), and its TTL the one asked for
// where it said none.
type Client interface {
	Acquire(ctx context.Context, prefix string, limit int, ttl time.Duration) (consulsem.Lease, error)
	Refresh(ctx context.Context, prefix, token string) error
	Verify(ctx context.Context, prefix, token string) (bool, error)
	Release(ctx context.Context, prefix, token string) error
	Close() error
}

// The reference is a Client.
var _ Client = (*consulsem.Semaphore)(nil)

// NoFence is a Lease's Fence when the implementation gave no fence (the
// reference's are the server's indexes, never negative).
const NoFence = -1

// An Impl is an implementation under test that runs as processes of its
// own, in any language (consulsemprotocol.Processes starts them): one
// process per incarnation of a client, on a real Consul agent or etcd.
type Impl = lease.Impl[Session, ProcessClient]

// A Session is what a client process is told when it starts (init): the
// semaphore's prefix, the server behind the process's own fault proxy,
// and the client's limit and the sessions' TTL.
type Session struct {
	Prefix string
	// Backend is Consul or Etcd; Addr is host:port of the process's fault
	// proxy in front of the server (Consul's HTTP API, etcd's gRPC).
	Backend, Addr string
	Limit         int
	TTL           time.Duration
	// Run names the run (its prefix): a start that fails is charged to
	// it.
	Run string
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
}
