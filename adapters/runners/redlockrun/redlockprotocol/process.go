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
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	ref "github.com/lockprover/lockprover/model/redlock"
)

// Processes is a Redlock implementation under test that runs as
// processes: the Launcher's Command is started for each client, and
// spoken to over the protocol (Connect). Make one with NewProcesses.
type Processes = leaseprotocol.Processes[redlockrun.Session, redlockrun.ProcessClient]

// NewProcesses is the implementation that command starts, one process per
// client.
func NewProcesses(command string) *Processes {
	rs := &runs{}
	return leaseprotocol.NewProcesses(side, command, func(c *leaseprotocol.Conn, s redlockrun.Session) redlockrun.ProcessClient {
		return rs.open(c, s)
	})
}

// initRequest is the init request for session s from client name, with
// the run s belongs to and the key its process serves (Family.Init).
func initRequest(name string, s redlockrun.Session) (init process.Request, run, key string, err error) {
	switch {
	case len(s.Key) < 1 || len(s.Key) > 255:
		return nil, "", "", fmt.Errorf("redlock init: key of %d bytes: must be 1 to 255", len(s.Key))
	case len(s.Addrs) == 0:
		return nil, "", "", errors.New("redlock init: no servers")
	case s.TTL < time.Millisecond:
		return nil, "", "", fmt.Errorf("redlock init: ttl %v: must be at least 1ms", s.TTL)
	case s.Limit > 1 && s.Priority:
		return nil, "", "", fmt.Errorf("redlock init: limit %d: the priority Redlock is a mutex", s.Limit)
	}
	lock := redlockrun.Kind
	if s.Priority {
		lock = redlockrun.PriorityKind
	}
	init = process.Request{"type": "init", "client": name, "lock": lock, "name": s.Key,
		"addrs": s.Addrs, "ttl_ms": s.TTL.Milliseconds()}
	if s.Limit > 1 {
		init["limit"] = s.Limit
	}
	return init, s.Run, s.Key, nil
}

// family is Redlock's side of the handshake, and what the replies of its
// processes become.
var side = leaseprotocol.Side[redlockrun.Session]{
	Terms: &leaseprotocol.Terms{NotGranted: redlockrun.ErrNotGranted, Busy: "held", ErrBusy: ref.ErrHeld, ErrExpired: ref.ErrExpired},
	Init:  initRequest,
}

// A ProcessError is an error a process answered. Definite, it certainly
// had no effect: for an acquire, errors.Is(err, redlockrun.ErrNotGranted)
// holds. Otherwise the outcome is unknown.
type ProcessError = leaseprotocol.ProcessError

// runs are an implementation's processes of the priority Redlock still
// open, by run, whose notices each reply waits for (Process.drain).
type runs struct {
	mu sync.Mutex
	m  map[string]map[*Process]bool
}

// open is the process of c for session s: for the priority Redlock, its
// lost notices go to s.OnLost, and it joins its run's processes.
func (rs *runs) open(c *leaseprotocol.Conn, s redlockrun.Session) *Process {
	l := &Process{conn: c}
	if !s.Priority {
		return l
	}
	prio := s.Prio
	l.prio, l.owner, l.run = &prio, rs, s.Run
	c.OnNotice([]string{"lost"}, func(n process.Notice) error { return l.lost(n, s) })
	rs.mu.Lock()
	if rs.m == nil {
		rs.m = map[string]map[*Process]bool{}
	}
	if rs.m[s.Run] == nil {
		rs.m[s.Run] = map[*Process]bool{}
	}
	rs.m[s.Run][l] = true
	rs.mu.Unlock()
	return l
}

// lost is a lost notice of the process of session s: its token and thief
// non-empty strings, and nothing else.
func (l *Process) lost(n process.Notice, s redlockrun.Session) error {
	var x ref.Lost
	for name, raw := range n.Fields {
		switch name {
		case "type":
		case "token", "thief":
			var v string
			if err := json.Unmarshal(raw, &v); err != nil || v == "" {
				return fmt.Errorf("%q is not a non-empty string: %s", name, raw)
			}
			if name == "token" {
				x.Token = v
			} else {
				x.Thief = v
			}
		default:
			return fmt.Errorf("unknown field %q: a lost notice says token and thief only", name)
		}
	}
	switch {
	case x.Token == "":
		return errors.New(`"token" is missing: a lost notice names the lease lost`)
	case x.Thief == "":
		return errors.New(`"thief" is missing: a lost notice names the lease that took it`)
	}
	x.Key, x.At = s.Key, ref.Monotonic()
	if s.OnLost != nil {
		s.OnLost(x)
	}
	return nil
}

// drain handles the notices every other process of l's run (the priority
// Redlock's) has written so far: called once l's reply is read, before it
// is returned, so that a victim's lost notice, written before it
// acknowledged the theft, is handled before the thief's grant, which
// came after the acknowledgement, whichever process's pipe lockprover
// happened to read first.
func (l *Process) drain() {
	if l.owner == nil {
		return
	}
	l.owner.mu.Lock()
	others := make([]*Process, 0, len(l.owner.m[l.run]))
	for p := range l.owner.m[l.run] {
		if p != l {
			others = append(others, p)
		}
	}
	l.owner.mu.Unlock()
	for _, p := range others {
		p.conn.Drain()
	}
}

// Process is one running process of a Redlock implementation: a client of
// one key, with redlockrun.Client's error contract. Requests go one at a
// time: its methods must not be called concurrently.
type Process struct {
	conn *leaseprotocol.Conn
	// prio is the priority each acquire says (the priority Redlock's),
	// nil for Redlock; owner and run, its processes and its run, whose
	// notices its replies wait for.
	prio  *int64
	owner *runs
	run   string
	// claimed is what the last acquire_ok or refresh_ok claimed; said,
	// whether it claimed any validity.
	claimed redlockrun.Claim
	said    bool
}

var (
	_ redlockrun.Impl          = (*Processes)(nil)
	_ redlockrun.ProcessClient = (*Process)(nil)
)

// Claimed is what the last acquire_ok or refresh_ok said of the lease's
// validity (redlockrun.Claim); ok is false if it said no validity_ms.
func (l *Process) Claimed() (redlockrun.Claim, bool) { return l.claimed, l.said }

// Name is the client's name (c1, ...).
func (l *Process) Name() string { return l.conn.Name() }

// Acquire asks for the lock on key for ttl.
func (l *Process) Acquire(ctx context.Context, key string, ttl time.Duration) (ref.Lease, error) {
	if err := l.conn.Key("acquire", key); err != nil {
		return ref.Lease{}, err
	}
	req := process.Request{"type": "acquire", "ttl_ms": ttl.Milliseconds()}
	if l.prio != nil {
		req["priority"] = *l.prio
	}
	f, err := l.conn.Acquire(ctx, req)
	l.drain()
	if err != nil {
		return ref.Lease{}, err
	}
	lease := ref.Lease{Key: key, Fence: redlockrun.NoFence}
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
	l.drain()
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
	l.drain()
	return err
}

// claim reads a grant's optional validity_ms, elapsed_ms and started_ms
// (numbers of milliseconds, >= 0, fractions allowed) into l.claimed and
// lease. started_ms needs validity_ms and elapsed_ms, and is at most
// elapsed_ms: the library's start lies between the process's own and the
// reply. A reply that breaks this is given up on, naming the field.
func (l *Process) claim(typ string, f map[string]json.RawMessage, lease *ref.Lease) error {
	l.claimed, l.said = redlockrun.Claim{}, false
	lease.Validity = -1
	var c redlockrun.Claim
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
func (l *Process) Close() error {
	if l.owner != nil {
		l.owner.mu.Lock()
		delete(l.owner.m[l.run], l)
		if len(l.owner.m[l.run]) == 0 {
			delete(l.owner.m, l.run)
		}
		l.owner.mu.Unlock()
	}
	return l.conn.Close()
}
