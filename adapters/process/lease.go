package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/families/dbsemaphore"
	"github.com/lockprover/lockprover/prover"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/rabbitmq"
	"github.com/lockprover/lockprover/dbsem"
)

// This file is the harness side of the protocol for lease locks
// (docs/protocol.md, "Lease locks: the database semaphore"): LeaseImpl
// starts one process per client of a run and LeaseClient speaks to it. The
// processes are launched, read, timed out, signalled and ended by the same
// machinery as the amqp-locks ones (start, client, call, tail in
// process.go); only the handshake and what the replies mean are the lease
// protocol's.

// LeaseDBSemaphore is the lock kind of the database counting semaphore, as
// init names it (and `prove --kind` does).
const LeaseDBSemaphore = dbsemaphore.Kind

var leasePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{0,50}$`)

// leaseInit is the init request for session s from client name: lock kind
// LeaseDBSemaphore, the key as "name", and the DSN also as a mysql:// URL
// (MySQLURL) for drivers other than Go's; TTL in whole milliseconds.
func leaseInit(name string, s dbsemaphore.Session) (request, error) {
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
	return request{"type": "init", "client": name, "lock": LeaseDBSemaphore, "name": s.Key, "dsn": s.DSN, "url": u,
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

// redactLease hides the passwords of DSNs and URLs in s.
func redactLease(s string) string {
	return rabbitmq.Redact(dsnCredentials.ReplaceAllString(s, "${1}:xxxxx@${2}("))
}

// LeaseImpl is a lease-lock implementation under test that runs as
// processes: Command is started (by /bin/sh -c, in a process group of its
// own) for each client, and spoken to over the protocol.
type LeaseImpl struct {
	Command string
	// Timeout bounds an operation; 0 means 30 s. A process that does not
	// answer in time is killed and its operation's outcome is unknown.
	Timeout time.Duration

	mu     sync.Mutex
	broken error // set after the implementation failed to start twice
	starts int   // failed starts so far
	procs  map[*client]bool
}

// LeaseImpl is a dbsemaphore.Impl, and its clients dbsemaphore.ProcessClients.
var (
	_ dbsemaphore.Impl          = (*LeaseImpl)(nil)
	_ dbsemaphore.ProcessClient = (*LeaseClient)(nil)
)

// Connect starts a process as client name (c1, c2, ..., probe1, ...) of
// session s, and shakes hands (init says s). The implementation failing to
// start (it exited, hung, wrote garbage or refused with a definite error
// before init_ok) is a *prover.ImplementationError; after two, LeaseImpl
// starts no more processes and every Connect fails with one. Any other
// error (the database out of reach, as the process said with an error
// without definite; ctx done) may pass if tried again. The client is a
// *LeaseClient; with an error it is a nil interface.
func (i *LeaseImpl) Connect(ctx context.Context, name string, s dbsemaphore.Session) (dbsemaphore.ProcessClient, error) {
	i.mu.Lock()
	if i.broken != nil {
		i.mu.Unlock()
		return nil, &prover.ImplementationError{Msg: fmt.Sprintf("%s not started: the implementation failed to start twice (%v)", name, i.broken)}
	}
	i.mu.Unlock()
	c, err := i.launch(ctx, name, s)
	i.mu.Lock()
	defer i.mu.Unlock()
	var ie *prover.ImplementationError
	if errors.As(err, &ie) {
		if i.starts++; i.starts >= 2 {
			i.broken = err
		}
	}
	if err != nil {
		return nil, err
	}
	if i.procs == nil {
		i.procs = map[*client]bool{}
	}
	i.procs[c.c] = true
	c.c.gone = func() {
		i.mu.Lock()
		delete(i.procs, c.c)
		i.mu.Unlock()
	}
	return c, nil
}

// launch starts a process and shakes hands. On failure the process is
// gone, and the error is a *prover.ImplementationError when the
// implementation cannot start.
func (i *LeaseImpl) launch(ctx context.Context, name string, s dbsemaphore.Session) (*LeaseClient, error) {
	lc, err := i.initialise(ctx, name, s)
	if err == nil || lc == nil {
		return lc, err
	}
	err = lc.startFailure(ctx, err)
	lc.c.Signal(syscall.SIGKILL)
	lc.c.wait()
	return nil, err
}

// initialise starts a process and sends it init. With a client, the error
// is init's as the process answered it (a *LeaseError), or why it did not
// answer init_ok (then the client's Crashed says more), and the process is
// left for the caller to kill; without one, nothing started (a session
// that makes no init, a command that cannot start).
func (i *LeaseImpl) initialise(ctx context.Context, name string, s dbsemaphore.Session) (*LeaseClient, error) {
	req, err := leaseInit(name, s)
	if err != nil {
		return nil, err
	}
	c, err := start(i.Command, name, i.timeout())
	if err != nil {
		var ie *prover.ImplementationError
		if errors.As(err, &ie) {
			return nil, &prover.ImplementationError{Msg: redactLease(ie.Msg)}
		}
		return nil, err
	}
	lc := &LeaseClient{c: c, key: s.Key, fencing: s.Fencing}
	_, err = lc.call(ctx, handshake, "init", req, "init_ok")
	return lc, err
}

// startFailure is err, the failure of l's init, as Connect reports it: a
// *prover.ImplementationError when the implementation failed itself (a
// definite refusal, a crash, a broken or missing reply); as it is when it
// may pass if tried again (an error without definite: the database out of
// reach; ctx done).
func (l *LeaseClient) startFailure(ctx context.Context, err error) error {
	var le *LeaseError
	switch {
	case ctx.Err() != nil:
		// Cut short by the harness.
	case errors.As(err, &le) && !le.Definite:
		// The database out of reach (a fault, say): try again later.
	case errors.As(err, &le):
		err = &prover.ImplementationError{Msg: redactLease(fmt.Sprintf("%s refused to start: %s", l.c.name, le.describe()))}
	default:
		why := strings.TrimPrefix(l.Crashed(), "crashed: ")
		if why == "" {
			why = err.Error()
		}
		err = &prover.ImplementationError{Msg: redactLease(fmt.Sprintf("%s did not start: %s", l.c.name, why))}
	}
	return err
}

// Preflight starts one process as the probe of a throwaway key in session
// s (s.Key, if set, is replaced by one named lp-preflight-...), waits for
// init_ok and ends it: an implementation that cannot start fails here at
// once, with its stderr, rather than in every plan of a run. The probe
// takes no lease; its tables, if it makes any, are under s's prefix.
func (i *LeaseImpl) Preflight(ctx context.Context, s dbsemaphore.Session) error {
	s.Key = rabbitmq.UniqueName("lp-preflight-")
	c, err := i.launch(ctx, "probe", s)
	var le *LeaseError
	switch {
	case errors.As(err, &le):
		return fmt.Errorf("probe could not reach the database: %v", le)
	case err != nil:
		return err
	}
	return c.Close()
}

// String is the implementation's command, for reports.
func (i *LeaseImpl) String() string { return fmt.Sprintf("the implementation %q", i.Command) }

func (i *LeaseImpl) timeout() time.Duration {
	if i.Timeout > 0 {
		return i.Timeout
	}
	return 30 * time.Second
}

// Stop kills every process still running (after an interrupt, say).
func (i *LeaseImpl) Stop() {
	i.mu.Lock()
	cs := make([]*client, 0, len(i.procs))
	for c := range i.procs {
		cs = append(cs, c)
	}
	i.mu.Unlock()
	for _, c := range cs {
		c.Signal(syscall.SIGKILL)
		c.wait()
	}
}

// A LeaseError is an error a process answered. Definite, it certainly had
// no effect: for an acquire, errors.Is(err, dbsemaphore.ErrNotGranted)
// holds. Otherwise the outcome is unknown.
type LeaseError struct {
	Op, Code, Text string
	Definite       bool
}

func (e *LeaseError) Error() string { return redactLease(e.describe()) }

func (e *LeaseError) describe() string {
	if e.Text == "" {
		return e.Code
	}
	return e.Code + ": " + e.Text
}

// NotGranted says whether the error is an acquire's definite failure.
func (e *LeaseError) NotGranted() bool { return e.Definite && e.Op == "acquire" }

// Is makes a definite acquire failure match dbsemaphore.ErrNotGranted.
func (e *LeaseError) Is(target error) bool {
	return e.NotGranted() && target == dbsemaphore.ErrNotGranted
}

// LeaseClient is one running process of a lease-lock implementation: a
// client of one key. It has dbsemaphore.Client's methods, with its error
// contract: Acquire answers dbsem.ErrFull, a *LeaseError that matches
// dbsemaphore.ErrNotGranted (the process said the acquire certainly took
// nothing), or any other error for an unknown outcome; Refresh and Release
// answer dbsem.ErrExpired, or any other error for an unknown outcome.
// Requests go one at a time: its methods must not be called concurrently.
type LeaseClient struct {
	c       *client
	key     string
	fencing bool
	closed  atomic.Bool // Close was called
}

// Name is the client's name (c1, ...).
func (l *LeaseClient) Name() string { return l.c.name }

// Pid is the process's id (the leader of its process group).
func (l *LeaseClient) Pid() int { return l.c.cmd.Process.Pid }

// wrongKey is the error of an operation on a key the process does not
// serve: nothing was sent.
func (l *LeaseClient) wrongKey(op, key string) error {
	return &LeaseError{Op: op, Code: "wrong key", Text: fmt.Sprintf("%s serves key %q, not %q", l.c.name, l.key, key), Definite: true}
}

// ms is a ttl as the protocol's whole milliseconds.
func ms(op string, ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, &LeaseError{Op: op, Code: "bad request", Text: fmt.Sprintf("ttl %v: must be at least 1ms", ttl), Definite: true}
	}
	return ttl.Milliseconds(), nil
}

// Acquire asks for a lease on key for ttl if fewer than max are live.
func (l *LeaseClient) Acquire(ctx context.Context, key string, ttl time.Duration, max int) (dbsem.Lease, error) {
	if key != l.key {
		return dbsem.Lease{}, l.wrongKey("acquire", key)
	}
	t, err := ms("acquire", ttl)
	if err != nil {
		return dbsem.Lease{}, err
	}
	r, err := l.call(ctx, l.c.timeout, "acquire", request{"type": "acquire", "max": max, "ttl_ms": t}, "acquire_ok", "acquire_fail")
	if err != nil {
		return dbsem.Lease{}, err
	}
	f := r.fields
	if r.typ == "acquire_fail" {
		if err := l.reason(f, "acquire_fail", "full"); err != nil {
			return dbsem.Lease{}, err
		}
		return dbsem.Lease{}, dbsem.ErrFull
	}
	var token string
	if err := json.Unmarshal(f["token"], &token); err != nil || token == "" {
		return dbsem.Lease{}, l.c.giveUp(fmt.Sprintf("sent an acquire_ok whose \"token\" is not a non-empty string: %s", f["token"]))
	}
	var fence int64
	raw, ok := f["fence"]
	switch {
	case ok && string(raw) != "null":
		if err := json.Unmarshal(raw, &fence); err != nil || fence < 0 {
			return dbsem.Lease{}, l.c.giveUp(fmt.Sprintf("sent an acquire_ok whose \"fence\" is not an integer >= 0: %s", raw))
		}
	case l.fencing:
		return dbsem.Lease{}, l.c.giveUp("sent an acquire_ok without a \"fence\", though init asked for fencing (answer init with a definite error if you have no fencing tokens)")
	}
	return dbsem.Lease{Token: token, Fence: fence}, nil
}

// Refresh moves a live lease's deadline to ttl from now.
func (l *LeaseClient) Refresh(ctx context.Context, key, token string, ttl time.Duration) error {
	if key != l.key {
		return l.wrongKey("refresh", key)
	}
	t, err := ms("refresh", ttl)
	if err != nil {
		return err
	}
	return l.change(ctx, "refresh", request{"type": "refresh", "token": token, "ttl_ms": t})
}

// Release ends a live lease.
func (l *LeaseClient) Release(ctx context.Context, key, token string) error {
	if key != l.key {
		return l.wrongKey("release", key)
	}
	return l.change(ctx, "release", request{"type": "release", "token": token})
}

// change is refresh or release: <op>_ok, or <op>_fail {reason: expired}.
func (l *LeaseClient) change(ctx context.Context, op string, req request) error {
	r, err := l.call(ctx, l.c.timeout, op, req, op+"_ok", op+"_fail")
	if err != nil {
		return err
	}
	if r.typ == op+"_fail" {
		if err := l.reason(r.fields, r.typ, "expired"); err != nil {
			return err
		}
		return dbsem.ErrExpired
	}
	return nil
}

// reason checks that a _fail reply's reason is want.
func (l *LeaseClient) reason(f map[string]json.RawMessage, typ, want string) error {
	var reason string
	if err := json.Unmarshal(f["reason"], &reason); err != nil || reason != want {
		return l.c.giveUp(fmt.Sprintf("sent %s whose \"reason\" is %s: want %q (answer other failures with an error)", typ, orAbsent(f["reason"]), want))
	}
	return nil
}

func orAbsent(raw json.RawMessage) string {
	if raw == nil {
		return "absent"
	}
	return string(raw)
}

// Signal delivers sig to the process group; a SIGKILL is the harness's own
// doing, not a crash.
func (l *LeaseClient) Signal(sig syscall.Signal) { l.c.Signal(sig) }

// Crashed says why the process is gone, with its last request and the end
// of its stderr, if it crashed or was given up on (not if the harness
// killed it, nor if it exited with status 0 after Close); "" otherwise.
func (l *LeaseClient) Crashed() string {
	if l.closed.Load() {
		l.c.mu.Lock()
		clean := l.c.exitOnly && l.c.crashed == "exited (status 0)"
		l.c.mu.Unlock()
		if clean {
			return ""
		}
	}
	return redactLease(l.c.Crashed())
}

// Broken says whether the process is gone or was given up on.
func (l *LeaseClient) Broken() bool { return l.c.Broken() }

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
func (l *LeaseClient) Close() error {
	l.closed.Store(true)
	return l.c.Close()
}

// call is the client's call (process.go) in the lease protocol's terms:
// an error reply to op becomes a *LeaseError (definite or not), and a
// process already gone says its name; anything else that goes wrong is an
// error of unknown outcome with the process given up on.
func (l *LeaseClient) call(ctx context.Context, d time.Duration, op string, req request, wants ...string) (reply, error) {
	r, err := l.c.call(ctx, d, req, wants...)
	var e *errorReply
	switch {
	case errors.As(err, &e):
		return reply{}, &LeaseError{Op: op, Code: e.code, Text: e.text, Definite: e.definite}
	case errors.Is(err, errGone):
		return reply{}, fmt.Errorf("%s: %w", l.c.name, err)
	}
	return r, err
}
