// Package pgadvisory is the reference PostgreSQL advisory lock, used as a
// lease as migration tools and job runners use it: a session takes
// pg_try_advisory_lock on a key and holds it while the session lives
// (Lock), sending its statements through Server and Conn: PGX's on a real
// server, the simulator's (sim/postgressim) on the simulated one.
package pgadvisory

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// The outcomes a Lock's operations report besides success; any other
// error leaves the outcome unknown.
var (
	// ErrFull: pg_try_advisory_lock said another session holds the key.
	ErrFull = errors.New("pgadvisory: held by another session")
	// ErrLost: the session that took the lock no longer holds it (it
	// ended, or says so): a refresh or release that finds it so.
	ErrLost = errors.New("pgadvisory: the lock is no longer held by its session")
	// ErrNotSent: the operation certainly did nothing (no session could be
	// opened, or nothing reached the server).
	ErrNotSent = errors.New("pgadvisory: nothing was sent")
)

// Defects are the reference's deliberate defects, one per mutant.
type Defects struct {
	// NoCheck: refresh believes the lock held as long as its session
	// object exists, and asks the server nothing (as goose's session
	// locker, which never looks again once it has the lock).
	NoCheck bool
	// ShortIdle: the session's idle_session_timeout is half the ttl the
	// holder counts on, so the server ends an idle holder's session, and
	// its lock, before the holder's lease is over.
	ShortIdle bool
	// UnlockElsewhere: release runs pg_advisory_unlock on a fresh
	// session (as a connection pool may hand out), which does not hold
	// the lock, and reports success whatever it answers: the lock stays
	// with the old session until that ends.
	UnlockElsewhere bool
}

// A Lock is the reference client of one PostgreSQL session-level advisory
// lock (pg_try_advisory_lock, pg_advisory_unlock) used as a lease: the
// lock is held by a session, and lives as long as the session does,
// which no client can promise on its own (a terminated session, a
// restarted server end it at once, unseen). What bounds it is the
// server's idle_session_timeout: the session, and so the lock, lives at
// least TTL after the start of the holder's last statement (the server's
// idle clock starts when that statement has ended), and no longer than
// TTL after the holder falls silent. So the holder counts its lease TTL
// from the start of its acquire or of its last check (refresh: a
// statement that asks pg_locks whether its own session still holds the
// key), and must check again before then; a holder that is paused, cut
// off or partitioned for longer loses the lock to the server's timer,
// and its next check says so.
//
// A Lock opens its session lazily, and a new one when its session is
// gone (the old one's lock went with it). It is not safe for concurrent
// use.
type Lock struct {
	server  Server
	key     int64
	ttl     time.Duration
	defects Defects

	conn  Conn
	held  Conn      // the session that took the lock, nil when none
	used  time.Time // when the session's last statement ended
	lease time.Time // when the holder's lease began: the start of its acquire or of its last check that said held
	pid   atomic.Uint32
}

// NewLock returns a Lock on advisory key key of the PostgreSQL server at
// url (through pgx), whose holder counts on ttl: its sessions set
// idle_session_timeout to ttl.
func NewLock(url string, key int64, ttl time.Duration, d Defects) *Lock {
	return NewLockOn(PGX(url), key, ttl, d)
}

// NewLockOn returns a Lock on advisory key key of server (a real one,
// PGX, or the simulator's), whose holder counts on ttl.
func NewLockOn(server Server, key int64, ttl time.Duration, d Defects) *Lock {
	return &Lock{server: server, key: key, ttl: ttl, defects: d}
}

// since is how long ago t was, by the server's clock as the Lock reads
// it.
func (l *Lock) since(t time.Time) time.Duration { return l.server.Now().Sub(t) }

// session returns the open session, opening one if there is none.
func (l *Lock) session(ctx context.Context) (Conn, error) {
	if l.conn != nil && !l.conn.IsClosed() {
		return l.conn, nil
	}
	l.conn = nil
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	l.conn = c
	l.pid.Store(c.PID())
	return c, nil
}

// open opens a session whose idle_session_timeout is the ttl (half of it
// with ShortIdle).
func (l *Lock) open(ctx context.Context) (Conn, error) {
	idle := l.ttl
	if l.defects.ShortIdle {
		idle /= 2
	}
	c, err := l.server.Open(ctx, time.Duration(max(idle.Milliseconds(), 1))*time.Millisecond)
	if err != nil {
		return nil, err
	}
	l.used = l.server.Now()
	return c, nil
}

// Acquire tries to take the lock (pg_try_advisory_lock): nil if taken,
// ErrFull if another session holds it, ErrNotSent if nothing was done;
// any other error leaves it unknown (the session may have taken the lock
// before it ended, and has released it if it ended).
func (l *Lock) Acquire(ctx context.Context) error {
	if l.held != nil {
		// Its session still holds the lock of a lease the client gave up
		// on (a refresh or release that reached nothing). Taking it again
		// there would only count it twice (session locks are re-entrant),
		// and one unlock would not free it: it is held until the session
		// has idled past the ttl, which the server then ends.
		if l.since(l.used) <= l.ttl {
			return ErrFull
		}
		l.Close()
	}
	if l.conn != nil && l.since(l.used) > l.ttl/2 {
		// The server may be ending this idle session just now: a new
		// one, rather than a statement that may meet the end.
		l.Close()
	}
	c, err := l.session(ctx)
	if err != nil {
		return err
	}
	start := l.server.Now()
	ok, err := c.TryLock(ctx, l.key)
	l.used = l.server.Now()
	if err != nil {
		if errors.Is(err, ErrIdled) {
			// The server ended the session for idling before it read
			// the statement: it never ran.
			l.Close()
			return fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return l.failed(err)
	}
	if !ok {
		return ErrFull
	}
	l.held, l.lease = c, start
	return nil
}

// over says whether the holder's lease is over by its own count: TTL
// since it began. The server's idle timer ends the session no sooner, but
// may end it later (a loaded server runs its timers late: the soak of
// issue 55 saw a check 2 ms past the lease's certain end answered held),
// so a holder whose lease is over by its own count takes nobody's word
// that it holds: it ends its session, which lets the lock go, and its
// lease with it.
func (l *Lock) over() bool {
	if l.since(l.lease) <= l.ttl {
		return false
	}
	l.Close()
	return true
}

// Refresh checks that the session that took the lock still holds it,
// which also restarts the server's idle clock: nil if it does, ErrLost if
// it does not (or has ended, or another session is open now).
func (l *Lock) Refresh(ctx context.Context) error {
	if l.defects.NoCheck {
		if l.held == nil {
			return ErrLost
		}
		return nil
	}
	if l.held == nil || l.held != l.conn || l.conn.IsClosed() || l.over() {
		l.held = nil
		return ErrLost
	}
	start := l.server.Now()
	held, err := l.conn.Holds(ctx, l.key)
	l.used = l.server.Now()
	if err != nil {
		return l.failed(err)
	}
	if !held {
		l.held = nil
		return ErrLost
	}
	l.lease = start
	return nil
}

// Release lets the lock go (pg_advisory_unlock on the holding session):
// nil if it was released, ErrLost if the session no longer held it.
func (l *Lock) Release(ctx context.Context) error {
	if l.defects.UnlockElsewhere {
		c, err := l.open(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		c.Unlock(ctx, l.key)
		l.held = nil
		return nil
	}
	if l.held == nil || l.held != l.conn || l.conn.IsClosed() || l.over() {
		l.held = nil
		return ErrLost
	}
	ok, err := l.conn.Unlock(ctx, l.key)
	l.used = l.server.Now()
	if err != nil {
		return l.failed(err)
	}
	l.held = nil
	if !ok {
		return ErrLost
	}
	return nil
}

// failed classifies a statement's error (as its Conn said it): nothing
// sent (ErrNotSent), the session ended by the server (ErrLost: its locks
// went with it), or unknown.
func (l *Lock) failed(err error) error {
	switch {
	case errors.Is(err, ErrNotSent):
		return err
	case errors.Is(err, ErrEnded):
		// admin_shutdown (pg_terminate_backend, a fast shutdown) or
		// idle_session_timeout: the session is over, and its locks.
		l.held = nil
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return err
}

// Close closes the session, which releases the lock if it holds it.
func (l *Lock) Close() {
	l.pid.Store(0)
	if l.conn != nil {
		l.conn.Close()
		l.conn, l.held = nil, nil
	}
}

// PID is the server's process id of the session last opened, 0 if none
// or closed (it may have ended meanwhile). Unlike the Lock's other
// methods, it may be called from any goroutine: a fault strikes the
// session while its client uses it.
func (l *Lock) PID() uint32 { return l.pid.Load() }

// Held says whether the Lock believes it holds the lock: it took it, and
// has not since seen it lost or released it.
func (l *Lock) Held() bool { return l.held != nil }

// Defects are the deliberate defects the Lock was made with.
func (l *Lock) Defects() Defects { return l.defects }
