// Package redlockprotocol is the Redlock family's side of the process
// protocol (docs/protocol.md, "Redlock"): Processes starts one process of
// an implementation under test per client of a run and Process speaks to
// it; Serve serves the reference (or a mutant) as such a process
// (serve-reference); Validate checks an implementation's plainest
// promises one request at a time (validate-impl). The processes are
// launched, read, timed out, signalled and ended by the generic launcher
// (adapters/process); only the handshake and what the replies mean are
// this family's.
package redlockprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/families/lease/leaseprotocol"
	"github.com/lockprover/lockprover/families/redlock"
	ref "github.com/lockprover/lockprover/redlock"
)

// initRequest is the init request for session s from client name.
func initRequest(name string, s redlock.Session) (process.Request, error) {
	switch {
	case len(s.Key) < 1 || len(s.Key) > 255:
		return nil, fmt.Errorf("redlock init: key of %d bytes: must be 1 to 255", len(s.Key))
	case len(s.Addrs) == 0:
		return nil, errors.New("redlock init: no servers")
	case s.TTL < time.Millisecond:
		return nil, fmt.Errorf("redlock init: ttl %v: must be at least 1ms", s.TTL)
	}
	return process.Request{"type": "init", "client": name, "lock": redlock.Kind, "name": s.Key,
		"addrs": s.Addrs, "ttl_ms": s.TTL.Milliseconds()}, nil
}

// family is Redlock's side of the handshake, and what the replies of its
// processes become.
var family = leaseprotocol.Family[redlock.Session]{
	Terms: &leaseprotocol.Terms{NotGranted: redlock.ErrNotGranted, Busy: "held", ErrBusy: ref.ErrHeld, ErrExpired: ref.ErrExpired},
	Init: func(name string, s redlock.Session) (process.Request, string, string, error) {
		req, err := initRequest(name, s)
		return req, s.Run, s.Key, err
	},
}

// A ProcessError is an error a process answered. Definite, it certainly
// had no effect: for an acquire, errors.Is(err, redlock.ErrNotGranted)
// holds. Otherwise the outcome is unknown.
type ProcessError = leaseprotocol.ProcessError

// Processes is a Redlock implementation under test that runs as
// processes: the Launcher's Command is started for each client, and
// spoken to over the protocol. Make one with NewProcesses.
type Processes struct{ process.Launcher }

// NewProcesses is the implementation that command starts, one process per
// client.
func NewProcesses(command string) *Processes {
	return &Processes{process.Launcher{Command: command}}
}

var (
	_ redlock.Impl          = (*Processes)(nil)
	_ redlock.ProcessClient = (*Process)(nil)
)

// Connect starts a process as client name (c1, c2, ..., probe1, ...) of
// session s, and shakes hands (init says s). The implementation failing
// to start (it exited, hung, wrote garbage or refused with a definite
// error before init_ok) is a *prover.ImplementationError; after two in a
// run (s.Run), no more of its processes start. Any other error (a server
// out of reach, as the process said with an error without definite; ctx
// done) may pass if tried again.
func (i *Processes) Connect(ctx context.Context, name string, s redlock.Session) (redlock.ProcessClient, error) {
	c, err := family.Connect(ctx, &i.Launcher, name, s)
	if err != nil {
		return nil, err
	}
	return &Process{conn: c}, nil
}

// Process is one running process of a Redlock implementation: a client of
// one key, with redlock.Client's error contract. Requests go one at a
// time: its methods must not be called concurrently.
type Process struct {
	conn *leaseprotocol.Conn
	// claimed is what the last acquire_ok or refresh_ok claimed; said,
	// whether it claimed any validity.
	claimed redlock.Claim
	said    bool
}

// Claimed is what the last acquire_ok or refresh_ok said of the lease's
// validity (redlock.Claim); ok is false if it said no validity_ms.
func (l *Process) Claimed() (redlock.Claim, bool) { return l.claimed, l.said }

// Name is the client's name (c1, ...).
func (l *Process) Name() string { return l.conn.Name() }

// Acquire asks for the lock on key for ttl.
func (l *Process) Acquire(ctx context.Context, key string, ttl time.Duration) (ref.Lease, error) {
	if err := l.conn.Key("acquire", key); err != nil {
		return ref.Lease{}, err
	}
	f, err := l.conn.Acquire(ctx, process.Request{"type": "acquire", "ttl_ms": ttl.Milliseconds()})
	if err != nil {
		return ref.Lease{}, err
	}
	lease := ref.Lease{Key: key, Fence: redlock.NoFence}
	if err := json.Unmarshal(f["token"], &lease.Token); err != nil || lease.Token == "" {
		return ref.Lease{}, l.conn.GiveUp(fmt.Sprintf("sent an acquire_ok whose \"token\" is not a non-empty string: %s", leaseprotocol.OrAbsent(f["token"])))
	}
	fence, fenced, err := l.conn.Fence(f)
	if err != nil {
		return ref.Lease{}, err
	}
	if fenced {
		lease.Fence = fence
	}
	if err := l.claim("acquire_ok", f, &lease); err != nil {
		return ref.Lease{}, err
	}
	return lease, nil
}

// Refresh extends a held lease to ttl from now.
func (l *Process) Refresh(ctx context.Context, lease ref.Lease, ttl time.Duration) (ref.Lease, error) {
	r, err := l.conn.Change(ctx, "refresh", process.Request{"type": "refresh", "token": lease.Token, "ttl_ms": ttl.Milliseconds()})
	if err != nil {
		return ref.Lease{}, err
	}
	if err := l.claim(r.Type, r.Fields, &lease); err != nil {
		return ref.Lease{}, err
	}
	return lease, nil
}

// Release lets a held lease go.
func (l *Process) Release(ctx context.Context, lease ref.Lease) error {
	_, err := l.conn.Change(ctx, "release", process.Request{"type": "release", "token": lease.Token})
	return err
}

// claim reads a grant's optional validity_ms, elapsed_ms and started_ms
// (numbers of milliseconds, >= 0, fractions allowed) into l.claimed and
// lease. started_ms needs validity_ms and elapsed_ms, and is at most
// elapsed_ms: the library's start lies between the process's own and the
// reply. A reply that breaks this is given up on, naming the field.
func (l *Process) claim(typ string, f map[string]json.RawMessage, lease *ref.Lease) error {
	l.claimed, l.said = redlock.Claim{}, false
	lease.Validity = -1
	var c redlock.Claim
	v, ok, err := millis(f, "validity_ms")
	if err == nil {
		c.Elapsed, _, err = millis(f, "elapsed_ms")
	}
	var started bool
	if err == nil {
		c.Started, started, err = millis(f, "started_ms")
	}
	switch {
	case err != nil:
		return l.conn.GiveUp(fmt.Sprintf("sent a %s whose %v", typ, err))
	case started && (!ok || f["elapsed_ms"] == nil):
		return l.conn.GiveUp(fmt.Sprintf("sent a %s with \"started_ms\" but no %s: started_ms counts from elapsed_ms's origin, and only a validity claimed needs it", typ, orNone(ok)))
	case c.Started > c.Elapsed:
		return l.conn.GiveUp(fmt.Sprintf("sent a %s whose \"started_ms\" %s is more than its \"elapsed_ms\" %s: the library cannot have started after the reply", typ, f["started_ms"], f["elapsed_ms"]))
	case !ok:
		return nil
	}
	lease.Validity = v
	c.Until = c.Elapsed + v
	l.claimed, l.said = c, true
	return nil
}

// orNone names the field a reply with started_ms lacks.
func orNone(validity bool) string {
	if validity {
		return `"elapsed_ms"`
	}
	return `"validity_ms"`
}

// millis is field name as a duration, if present: a number of
// milliseconds, at least 0.
func millis(f map[string]json.RawMessage, name string) (time.Duration, bool, error) {
	raw, ok := f[name]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var x float64
	if err := json.Unmarshal(raw, &x); err != nil || x < 0 || math.IsInf(x, 0) || x > 1e12 {
		return 0, false, fmt.Errorf("%q is not a number of milliseconds >= 0: %s", name, raw)
	}
	return time.Duration(x * float64(time.Millisecond)), true, nil
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
