// Package pgadvisoryprotocol is the pg-advisory family's side of the
// process protocol (docs/protocol.md, "PostgreSQL advisory locks"):
// Processes starts one process of an implementation under test per client
// of a run and Process speaks to it; Serve serves the reference (or a
// mutant) as such a process (serve-reference); Validate checks an
// implementation's plainest promises one request at a time
// (validate-impl). The processes are launched, read, timed out, signalled
// and ended by the generic launcher (adapters/process); the lease
// families' common terms (an acquire's, a refresh's, a release's replies)
// are leaseprotocol's; only the handshake is this family's.
package pgadvisoryprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// Processes is an implementation of the lock under test that runs as
// processes: the Launcher's Command is started for each client, and
// spoken to over the protocol (Connect). Make one with NewProcesses.
type Processes = leaseprotocol.Processes[pgadvisoryrun.Session, pgadvisoryrun.ProcessClient]

// NewProcesses is the implementation that command starts, one process per
// client.
func NewProcesses(command string) *Processes {
	return leaseprotocol.NewProcesses(side, command, func(c *leaseprotocol.Conn, _ pgadvisoryrun.Session) pgadvisoryrun.ProcessClient {
		return &Process{conn: c}
	})
}

// initRequest is the init request for session s from client name.
func initRequest(name string, s pgadvisoryrun.Session) (init process.Request, run, key string, err error) {
	switch {
	case !strings.HasPrefix(s.URL, "postgres://"):
		return nil, "", "", fmt.Errorf("pg-advisory init: url %q: want a postgres:// URL", s.URL)
	case s.TTL.Milliseconds() < 1:
		return nil, "", "", fmt.Errorf("pg-advisory init: ttl %v: must be at least 1ms", s.TTL)
	}
	return process.Request{"type": "init", "client": name, "lock": pgadvisoryrun.Kind, "url": s.URL,
		"key": s.Key, "ttl_ms": s.TTL.Milliseconds()}, s.Run, strconv.FormatInt(s.Key, 10), nil
}

// family is the lock's side of the handshake, and what the replies of its
// processes become: the reference's errors. A definite error to an
// acquire certainly took nothing (pgadvisory.ErrNotSent).
var side = leaseprotocol.Side[pgadvisoryrun.Session]{
	Terms: &leaseprotocol.Terms{NotGranted: pgadvisory.ErrNotSent, Busy: "held", ErrBusy: pgadvisory.ErrFull, ErrExpired: pgadvisory.ErrLost},
	Init:  initRequest,
}

// A ProcessError is an error a process answered. Definite, it certainly
// had no effect: for an acquire, errors.Is(err, pgadvisory.ErrNotSent)
// holds. Otherwise the outcome is unknown.
type ProcessError = leaseprotocol.ProcessError

// Process is one running process of an implementation of the lock: a
// client of one key, with pgadvisoryrun.Client's error contract. Requests go
// one at a time: its methods must not be called concurrently.
type Process struct {
	conn *leaseprotocol.Conn
}

var (
	_ pgadvisoryrun.Impl          = (*Processes)(nil)
	_ pgadvisoryrun.ProcessClient = (*Process)(nil)
)

// Name is the client's name (c1, ...).
func (l *Process) Name() string { return l.conn.Name() }

// Acquire asks for the lock once: its token; pgadvisory.ErrFull for
// acquire_fail {reason: held}; a definite error certainly took nothing
// (pgadvisory.ErrNotSent); any other error leaves the outcome unknown.
func (l *Process) Acquire(ctx context.Context) (string, error) {
	f, err := l.conn.Acquire(ctx, process.Request{"type": "acquire"})
	if err != nil {
		return "", err
	}
	var token string
	if err := json.Unmarshal(f["token"], &token); err != nil || token == "" {
		return "", errors.Join(errUnknown, l.conn.GiveUp(fmt.Sprintf("sent an acquire_ok whose \"token\" is not a non-empty string: %s", leaseprotocol.OrAbsent(f["token"]))))
	}
	return token, nil
}

// errUnknown marks an acquire whose process broke the protocol as of
// unknown outcome.
var errUnknown = errors.New("outcome unknown")

// Refresh checks that the lease token names is still held, and renews it.
func (l *Process) Refresh(ctx context.Context, token string) error {
	_, err := l.conn.Change(ctx, "refresh", process.Request{"type": "refresh", "token": token})
	return err
}

// Release lets the lease token names go.
func (l *Process) Release(ctx context.Context, token string) error {
	_, err := l.conn.Change(ctx, "release", process.Request{"type": "release", "token": token})
	return err
}

// Signal delivers sig to the process group; a SIGKILL is the harness's own
// doing, not a crash.
func (l *Process) Signal(sig syscall.Signal) { l.conn.Signal(sig) }

// Crashed says why the process is gone, if it crashed or was given up on;
// "" otherwise.
func (l *Process) Crashed() string { return l.conn.Crashed() }

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
func (l *Process) Close() error { return l.conn.Close() }
