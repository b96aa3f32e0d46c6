// Package dbsemprotocol is the database semaphore's side of the process
// protocol (docs/protocol-db-semaphore.md): Processes starts one process of
// an implementation under test per client of a run and speaks to it;
// Serve serves the reference (or a mutant) as such a process
// (serve-reference); Validate checks an implementation's plainest promises
// one request at a time (validate-impl). The processes are launched, read,
// timed out, signalled and ended by the generic launcher
// (adapters/process), with the lease families' common terms.
package dbsemprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/model/dbsem"
)

// This file is the database semaphore's side of the process protocol
// (docs/protocol.md, "Lease locks: the database semaphore") as the harness
// speaks it: Processes starts one process per client of a run and Process
// speaks to it. The processes are launched, read, timed out, signalled and
// ended by the generic launcher (adapters/process); only the handshake and
// what the replies mean are this family's.

var leasePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{0,50}$`)

// leaseInit is the init request for session s from client name: lock kind
// Kind, the key as "name", and the DSN also as a mysql:// URL
// (MySQLURL) for drivers other than Go's; TTL in whole milliseconds.
func leaseInit(name string, s dbsemrun.Session) (process.Request, error) {
	design := s.Design
	if design == "" {
		design = dbsem.MasterRow.String()
	}
	switch {
	case len(s.Key) < 1 || len(s.Key) > 255:
		return nil, fmt.Errorf("lease init: key of %d bytes: must be 1 to 255", len(s.Key))
	case s.DSN == "":
		return nil, errors.New("lease init: no DSN")
	case !leasePrefixRE.MatchString(s.Prefix):
		return nil, fmt.Errorf("lease init: prefix %q: letters, digits and '_' only, at most 50", s.Prefix)
	case s.Max < 1:
		return nil, fmt.Errorf("lease init: max %d: must be at least 1", s.Max)
	case s.TTL < time.Millisecond:
		return nil, fmt.Errorf("lease init: ttl %v: must be at least 1ms", s.TTL)
	case design != dbsem.MasterRow.String() && design != dbsem.RowPerSlot.String():
		return nil, fmt.Errorf("lease init: design %q: want %s or %s", design, dbsem.MasterRow, dbsem.RowPerSlot)
	}
	u, err := MySQLURL(s.DSN)
	if err != nil {
		return nil, fmt.Errorf("lease init: %w", err)
	}
	return process.Request{"type": "init", "client": name, "lock": dbsemrun.Kind, "name": s.Key, "dsn": s.DSN, "url": u,
		"prefix": s.Prefix, "max": s.Max, "ttl_ms": s.TTL.Milliseconds(), "design": design, "fencing": s.Fencing}, nil
}

// MySQLURL is the database a go-sql-driver DSN names as a mysql:// URL,
// mysql://user:pass@host:port/db, for drivers other than Go's: the DSN's
// parameters (timeouts and the like) are left out. The DSN must name a TCP
// address.
func MySQLURL(dsn string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	if cfg.Net != "tcp" && cfg.Net != "tcp4" && cfg.Net != "tcp6" {
		return "", fmt.Errorf("DSN over %q: a mysql:// URL needs a TCP address", cfg.Net)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	switch {
	case cfg.Passwd != "":
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	case cfg.User != "":
		u.User = url.User(cfg.User)
	}
	return u.String(), nil
}

// dsnCredentials matches the user:password@ of a go-sql-driver DSN
// (user:pass@tcp(host:port)/db) anywhere in a text.
var dsnCredentials = regexp.MustCompile(`([A-Za-z0-9_.$\-]*):[^\s"']*?@(tcp|tcp4|tcp6|unix)?\(`)

// redactDSN hides the passwords of DSNs in s.
func redactDSN(s string) string { return dsnCredentials.ReplaceAllString(s, "${1}:xxxxx@${2}(") }

// redactLease hides the passwords of DSNs and URLs in s.
func redactLease(s string) string { return rabbitmq.Redact(redactDSN(s)) }

// family is the database semaphore's side of the handshake (a run is
// named by its prefix), and what the replies of its processes become:
// their errors and crashes hide the passwords of DSNs and URLs.
var side = leaseprotocol.Side[dbsemrun.Session]{
	Terms: &leaseprotocol.Terms{NotGranted: dbsemrun.ErrNotGranted, Busy: "full", ErrBusy: dbsem.ErrFull, ErrExpired: dbsem.ErrExpired, Redact: redactLease},
	Init: func(name string, s dbsemrun.Session) (process.Request, string, string, error) {
		req, err := leaseInit(name, s)
		return req, s.Prefix, s.Key, err
	},
}

// Processes is a lease-lock implementation under test that runs as
// processes: the Launcher's Command is started for each client, and
// spoken to over the protocol. Make one with NewProcesses.
type Processes struct{ process.Launcher }

// NewProcesses is the implementation that command starts, one process per
// client: its messages hide the passwords of DSNs as well as URLs'.
func NewProcesses(command string) *Processes {
	return &Processes{process.Launcher{Command: command, Redact: redactDSN}}
}

// Processes is an Impl, and its clients ProcessClients.
var (
	_ dbsemrun.Impl          = (*Processes)(nil)
	_ dbsemrun.ProcessClient = (*Process)(nil)
)

// Connect starts a process as client name (c1, c2, ..., probe1, ...) of
// session s, and shakes hands (init says s). The implementation failing to
// start (it exited, hung, wrote garbage or refused with a definite error
// before init_ok) is a *prover.ImplementationError; after two in a run
// (s.Prefix names it: each run has its own), no more of its processes
// start and its every Connect fails with one. Any other error (the
// database out of reach, as the process said with a *ProcessError without
// Definite; ctx done) may pass if tried again. The client is a *Process;
// with an error it is a nil interface.
func (i *Processes) Connect(ctx context.Context, name string, s dbsemrun.Session) (dbsemrun.ProcessClient, error) {
	c, err := side.Connect(ctx, &i.Launcher, name, s)
	if err != nil {
		return nil, err
	}
	return &Process{conn: c, fencing: s.Fencing}, nil
}

// initialise starts a process and sends it init, for validate-impl's
// checks: with a client, the error is init's as the process answered it
// (a *ProcessError), or why it did not answer init_ok, and the process is
// left for the caller to kill; without one, nothing started.
func (i *Processes) initialise(ctx context.Context, name string, s dbsemrun.Session) (*Process, error) {
	c, err := side.Handshake(ctx, &i.Launcher, name, s)
	if c == nil {
		return nil, err
	}
	return &Process{conn: c, fencing: s.Fencing}, err
}

// Preflight starts one process as the probe of a throwaway key in session
// s (s.Key, if set, is replaced by one named lp-preflight-...), waits for
// init_ok and ends it: an implementation that cannot start fails here at
// once, with its stderr, rather than in every plan of a run. The probe
// takes no lease; its tables, if it makes any, are under s's prefix.
func (i *Processes) Preflight(ctx context.Context, s dbsemrun.Session) error {
	s.Key = rabbitmq.UniqueName("lp-preflight-")
	req, err := leaseInit("probe", s)
	if err != nil {
		return err
	}
	c, err := i.Launch(ctx, "probe", req)
	var le *ProcessError
	switch {
	case errors.As(side.Answered("init", err), &le):
		return fmt.Errorf("probe could not reach the database: %v", le)
	case err != nil:
		return err
	}
	return c.Close()
}

// A ProcessError is an error a process answered. Definite, it certainly had
// no effect: for an acquire, errors.Is(err, ErrNotGranted)
// holds. Otherwise the outcome is unknown.
type ProcessError = leaseprotocol.ProcessError

// Process is one running process of a lease-lock implementation: a
// client of one key. It has Client's methods, with its error
// contract: Acquire answers dbsem.ErrFull, a *ProcessError that matches
// ErrNotGranted (the process said the acquire certainly took
// nothing), or any other error for an unknown outcome; Refresh and Release
// answer dbsem.ErrExpired, or any other error for an unknown outcome.
// Requests go one at a time: its methods must not be called concurrently.
type Process struct {
	conn    *leaseprotocol.Conn
	fencing bool
	// granted is the lease the last acquire_ok or refresh_ok said it
	// granted (its optional ttl_ms), 0 if it said none.
	granted time.Duration
}

// Granted is the lease the process's last acquire_ok or refresh_ok said it
// granted (its ttl_ms: an implementation whose grain is a whole second
// grants a 100 ms lease as 1 s), 0 if that reply said none: then the lease
// is the ttl asked for. The history records it, and the lease checker
// judges by it.
func (l *Process) Granted() time.Duration { return l.granted }

// grantedTTL reads a reply's optional ttl_ms into l.granted.
func (l *Process) grantedTTL(typ string, f map[string]json.RawMessage) error {
	l.granted = 0
	raw, ok := f["ttl_ms"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err != nil || ms < 1 {
		return l.conn.GiveUp(fmt.Sprintf("sent %s whose \"ttl_ms\" is not an integer >= 1 (the lease granted, in milliseconds): %s", typ, raw))
	}
	l.granted = time.Duration(ms) * time.Millisecond
	return nil
}

// Name is the client's name (c1, ...).
func (l *Process) Name() string { return l.conn.Name() }

// Pid is the process's id (the leader of its process group).
func (l *Process) Pid() int { return l.conn.Pid() }

// ms is a ttl as the protocol's whole milliseconds.
func ms(op string, ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, side.Refused(op, "bad request", fmt.Sprintf("ttl %v: must be at least 1ms", ttl))
	}
	return ttl.Milliseconds(), nil
}

// Acquire asks for a lease on key for ttl if fewer than max are live.
func (l *Process) Acquire(ctx context.Context, key string, ttl time.Duration, max int) (dbsem.Lease, error) {
	if err := l.conn.Key("acquire", key); err != nil {
		return dbsem.Lease{}, err
	}
	t, err := ms("acquire", ttl)
	if err != nil {
		return dbsem.Lease{}, err
	}
	f, err := l.conn.Acquire(ctx, process.Request{"type": "acquire", "max": max, "ttl_ms": t})
	if err != nil {
		return dbsem.Lease{}, err
	}
	var token string
	if err := json.Unmarshal(f["token"], &token); err != nil || token == "" {
		return dbsem.Lease{}, l.conn.GiveUp(fmt.Sprintf("sent an acquire_ok whose \"token\" is not a non-empty string: %s", f["token"]))
	}
	fence, fenced, err := l.conn.Fence(f)
	switch {
	case err != nil:
		return dbsem.Lease{}, err
	case !fenced && l.fencing:
		return dbsem.Lease{}, l.conn.GiveUp("sent an acquire_ok without a \"fence\", though init asked for fencing (answer init with a definite error if you have no fencing tokens)")
	}
	if err := l.grantedTTL("an acquire_ok", f); err != nil {
		return dbsem.Lease{}, err
	}
	return dbsem.Lease{Token: token, Fence: fence}, nil
}

// Refresh moves a live lease's deadline to ttl from now.
func (l *Process) Refresh(ctx context.Context, key, token string, ttl time.Duration) error {
	if err := l.conn.Key("refresh", key); err != nil {
		return err
	}
	t, err := ms("refresh", ttl)
	if err != nil {
		return err
	}
	return l.change(ctx, "refresh", process.Request{"type": "refresh", "token": token, "ttl_ms": t})
}

// Release ends a live lease.
func (l *Process) Release(ctx context.Context, key, token string) error {
	if err := l.conn.Key("release", key); err != nil {
		return err
	}
	return l.change(ctx, "release", process.Request{"type": "release", "token": token})
}

// change is refresh or release: <op>_ok, or <op>_fail {reason: expired}.
func (l *Process) change(ctx context.Context, op string, req process.Request) error {
	r, err := l.conn.Change(ctx, op, req)
	if err == nil && op == "refresh" {
		return l.grantedTTL("a refresh_ok", r.Fields)
	}
	return err
}

// Signal delivers sig to the process group; a SIGKILL is the harness's own
// doing, not a crash.
func (l *Process) Signal(sig syscall.Signal) { l.conn.Signal(sig) }

// Crashed says why the process is gone, with its last request and the end
// of its stderr, if it crashed or was given up on (not if the harness
// killed it, nor if it exited with status 0 after Close), the passwords
// of DSNs and URLs hidden; "" otherwise.
func (l *Process) Crashed() string { return l.conn.Crashed() }

// Broken says whether the process is gone or was given up on.
func (l *Process) Broken() bool { return l.conn.Broken() }

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
func (l *Process) Close() error { return l.conn.Close() }
