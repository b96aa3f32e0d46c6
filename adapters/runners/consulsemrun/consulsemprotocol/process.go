// Package consulsemprotocol is the consul-semaphore family's side of the
// process protocol (docs/protocol.md, "Consul's semaphore"): Processes
// starts one process of an implementation under test per client of a run
// and Process speaks to it; Serve serves the reference (or a mutant) as
// such a process (serve-reference); Validate checks an implementation's
// plainest promises one request at a time (validate-impl). The processes
// are launched, read, timed out, signalled and ended by the generic
// launcher (adapters/process); the lease families' common terms (an
// acquire's, a refresh's, a release's replies) are leaseprotocol's; only
// the handshake, verify and what an acquire's errors mean are this
// family's.
package consulsemprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/model/consulsem"
)

// Processes is an implementation of the semaphore under test that runs as
// processes: the Launcher's Command is started for each client, and
// spoken to over the protocol (Connect). Make one with NewProcesses.
type Processes = leaseprotocol.Processes[consulsemrun.Session, consulsemrun.ProcessClient]

// NewProcesses is the implementation that command starts, one process per
// client.
func NewProcesses(command string) *Processes {
	return leaseprotocol.NewProcesses(side, command, func(c *leaseprotocol.Conn, _ consulsemrun.Session) consulsemrun.ProcessClient {
		return &Process{conn: c}
	})
}

// prefixRE is what a semaphore's prefix may be (docs/protocol.md): key
// segments of letters, digits, '-', '_' and '.', joined by '/'.
var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)

// initRequest is the init request for session s from client name, with
// the run s belongs to and the key its process serves (Family.Init).
func initRequest(name string, s consulsemrun.Session) (init process.Request, run, key string, err error) {
	switch {
	case len(s.Prefix) > 100 || !prefixRE.MatchString(s.Prefix):
		return nil, "", "", fmt.Errorf("consul-semaphore init: prefix %q: want 1 to 100 bytes of letters, digits, '-', '_', '.' and '/' (not first or last)", s.Prefix)
	case s.Backend != consulsemrun.Consul && s.Backend != consulsemrun.Etcd:
		return nil, "", "", fmt.Errorf("consul-semaphore init: backend %q: want %s or %s", s.Backend, consulsemrun.Consul, consulsemrun.Etcd)
	case s.Addr == "":
		return nil, "", "", errors.New("consul-semaphore init: no server address")
	case s.Limit < 1:
		return nil, "", "", fmt.Errorf("consul-semaphore init: limit %d: must be at least 1", s.Limit)
	case s.TTL < time.Millisecond:
		return nil, "", "", fmt.Errorf("consul-semaphore init: ttl %v: must be at least 1ms", s.TTL)
	}
	return process.Request{"type": "init", "client": name, "lock": consulsemrun.Kind, "name": s.Prefix,
		"backend": s.Backend, "addr": s.Addr, "limit": s.Limit, "ttl_ms": s.TTL.Milliseconds()}, s.Run, s.Prefix, nil
}

// family is the semaphore's side of the handshake (a run is named by its
// prefix), and what the replies of its processes become: the reference's
// errors.
var side = leaseprotocol.Side[consulsemrun.Session]{
	Terms: &leaseprotocol.Terms{NotGranted: consulsem.ErrNotGranted, Busy: "full", ErrBusy: consulsem.ErrFull, ErrExpired: consulsem.ErrExpired},
	Init:  initRequest,
}

// A ProcessError is an error a process answered. Definite, it certainly
// had no effect: for an acquire, errors.Is(err, consulsem.ErrNotGranted)
// holds. Otherwise the outcome is unknown.
type ProcessError = leaseprotocol.ProcessError

// Process is one running process of an implementation of the semaphore:
// a client of one prefix, with consulsemrun.Client's error contract.
// Requests go one at a time: its methods must not be called concurrently.
type Process struct {
	conn *leaseprotocol.Conn
}

var (
	_ consulsemrun.Impl          = (*Processes)(nil)
	_ consulsemrun.ProcessClient = (*Process)(nil)
)

// Name is the client's name (c1, ...).
func (l *Process) Name() string { return l.conn.Name() }

// Acquire asks for a slot of the semaphore at prefix, of limit holders,
// with a session of ttl. acquire_fail {reason: full} is consulsem.ErrFull;
// a definite error certainly took no slot (consulsem.ErrNotGranted, and
// consulsem.ErrMismatch for code "mismatch"); any other error leaves the
// outcome unknown (consulsem.ErrUnknownOutcome).
func (l *Process) Acquire(ctx context.Context, prefix string, limit int, ttl time.Duration) (consulsem.Lease, error) {
	if err := l.conn.Key("acquire", prefix); err != nil {
		return consulsem.Lease{}, err
	}
	f, err := l.conn.Acquire(ctx, process.Request{"type": "acquire", "limit": limit, "ttl_ms": ttl.Milliseconds()})
	if err != nil {
		return consulsem.Lease{}, acquireError(err)
	}
	lease := consulsem.Lease{Fence: consulsemrun.NoFence, TTL: ttl}
	if err := json.Unmarshal(f["token"], &lease.Token); err != nil || lease.Token == "" {
		return consulsem.Lease{}, unknown(l.conn.GiveUp(fmt.Sprintf("sent an acquire_ok whose \"token\" is not a non-empty string: %s", leaseprotocol.OrAbsent(f["token"]))))
	}
	fence, fenced, err := l.conn.Fence(f)
	if err != nil {
		return consulsem.Lease{}, unknown(err)
	}
	if fenced {
		lease.Fence = fence
	}
	granted, said, err := l.ttl("acquire_ok", f)
	if err != nil {
		return consulsem.Lease{}, unknown(err)
	}
	if said {
		lease.TTL = granted
	}
	return lease, nil
}

// acquireError is an acquire's error in the reference's terms.
func acquireError(err error) error {
	var pe *ProcessError
	switch {
	case errors.Is(err, consulsem.ErrFull):
		return err
	case errors.As(err, &pe) && pe.Definite && pe.Code == "mismatch":
		return fmt.Errorf("%w: %w", consulsem.ErrMismatch, err)
	case errors.Is(err, consulsem.ErrNotGranted):
		return err
	}
	return unknown(err)
}

// unknown marks an acquire's error as of unknown outcome.
func unknown(err error) error { return fmt.Errorf("%w: %w", consulsem.ErrUnknownOutcome, err) }

// ttl reads a grant's optional "ttl_ms": an integer >= 1, or the process
// is given up on.
func (l *Process) ttl(typ string, f map[string]json.RawMessage) (time.Duration, bool, error) {
	raw, ok := f["ttl_ms"]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err != nil || ms < 1 || ms > 1e9 {
		return 0, false, l.conn.GiveUp(fmt.Sprintf("sent a %s whose \"ttl_ms\" is not an integer >= 1: %s", typ, raw))
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

// Refresh renews the session of the lease token names.
func (l *Process) Refresh(ctx context.Context, prefix, token string) error {
	if err := l.conn.Key("refresh", prefix); err != nil {
		return err
	}
	r, err := l.conn.Change(ctx, "refresh", process.Request{"type": "refresh", "token": token})
	if err != nil {
		return err
	}
	_, _, err = l.ttl(r.Type, r.Fields)
	return err
}

// Verify asks whether the lease token names is still held.
func (l *Process) Verify(ctx context.Context, prefix, token string) (bool, error) {
	if err := l.conn.Key("verify", prefix); err != nil {
		return false, err
	}
	r, err := l.conn.Do(ctx, "verify", process.Request{"type": "verify", "token": token}, "verify_ok")
	if err != nil {
		return false, err
	}
	var held bool
	if err := json.Unmarshal(r.Fields["held"], &held); err != nil || r.Fields["held"] == nil {
		return false, l.conn.GiveUp(fmt.Sprintf("sent a verify_ok whose \"held\" is not true or false: %s", leaseprotocol.OrAbsent(r.Fields["held"])))
	}
	return held, nil
}

// Release lets the lease token names go.
func (l *Process) Release(ctx context.Context, prefix, token string) error {
	if err := l.conn.Key("release", prefix); err != nil {
		return err
	}
	_, err := l.conn.Change(ctx, "release", process.Request{"type": "release", "token": token})
	return err
}

// Signal delivers sig to the process group; a SIGKILL is the harness's own
// doing, not a crash.
func (l *Process) Signal(sig syscall.Signal) { l.conn.Signal(sig) }

// Crashed says why the process is gone, with its last request and the end
// of its stderr, if it crashed or was given up on (not if the harness
// killed it, nor if it exited with status 0 after Close); "" otherwise.
func (l *Process) Crashed() string { return l.conn.Crashed() }

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
func (l *Process) Close() error { return l.conn.Close() }
