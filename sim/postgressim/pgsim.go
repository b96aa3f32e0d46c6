// Package postgressim is a deterministic, in-memory model of what PostgreSQL
// does with session-level advisory locks, on a virtual clock: the
// semantics the pg-advisory family's reference (adapters/runners/pgadvisoryrun) and
// the libraries judged on it use, and nothing else.
//
// Modelled, as PostgreSQL 15 does it (held to a private server by the
// differential, adapters/conform/postgresconform: drawn sequences of these
// statements, with sleeps, run on both and compared step by step):
//
//   - sessions, each with its idle_session_timeout (0: none): a session
//     idle (no statement) for longer than its timeout is ended by the
//     server, and its locks released (FATAL 57P05 at the client's next
//     statement);
//   - pg_try_advisory_lock(key): true if no other session holds key
//     (exclusively), and then the session holds it once more: session
//     locks are re-entrant, counted, so a session that took a key twice
//     must unlock it twice;
//   - pg_advisory_unlock(key): true and one hold less if the session
//     holds key; false (with a WARNING) if it does not, whoever else does;
//   - whether a session holds key, as pg_locks says it (granted, by
//     pg_backend_pid());
//   - pg_terminate_backend(pid) by another session: the session ends, and
//     its locks with it (FATAL 57P01 at its next statement); a session's
//     own end (its client closes the connection) releases them too;
//   - a server restart: every session ends.
//
// Not modelled: shared advisory locks, transaction-level advisory locks,
// the two-int4 key form, blocking pg_advisory_lock, lock waits. Statements
// take no virtual time; only Sleep moves the clock.
package postgressim

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The errors a statement on a session that ended gets, as PostgreSQL's
// SQLSTATEs.
var (
	// ErrTerminated: pg_terminate_backend or a restart ended the session
	// (57P01, admin_shutdown).
	ErrTerminated = errors.New("pgsim: terminating connection due to administrator command (SQLSTATE 57P01)")
	// ErrIdle: the session idled past its idle_session_timeout (57P05).
	ErrIdle = errors.New("pgsim: terminating connection due to idle-session timeout (SQLSTATE 57P05)")
	// ErrClosed: the client closed the session itself.
	ErrClosed = errors.New("pgsim: the session is closed")
)

// A Server is one simulated PostgreSQL server. Its zero value is not
// ready: use New. It is not safe for concurrent use (a simulation runs
// one step at a time).
type Server struct {
	now      time.Duration
	sessions []*session // by pid - firstPID
	holders  map[int64]int
}

// firstPID is the first session's pid: pids are allocated in order.
const firstPID = 1000

type session struct {
	pid    int
	idle   time.Duration // idle_session_timeout; 0: none
	last   time.Duration // when its last statement ended
	ended  error         // why it ended; nil while it lives
	counts map[int64]int // the keys it holds, each how many times
}

// New returns a server with no session, at virtual time 0.
func New() *Server { return &Server{holders: map[int64]int{}} }

// Now is the server's virtual time.
func (s *Server) Now() time.Duration { return s.now }

// Open opens a session with idle_session_timeout idle (0: none) and
// returns its pid.
func (s *Server) Open(idle time.Duration) int {
	ss := &session{pid: firstPID + len(s.sessions), idle: idle, last: s.now, counts: map[int64]int{}}
	s.sessions = append(s.sessions, ss)
	return ss.pid
}

// Sleep lets d of virtual time pass: the sessions idle past their
// timeout meanwhile end, in the order their timeouts fire.
func (s *Server) Sleep(d time.Duration) {
	s.now += d
	var due []*session
	for _, ss := range s.sessions {
		if ss.ended == nil && ss.idle > 0 && s.now-ss.last > ss.idle {
			due = append(due, ss)
		}
	}
	slices.SortStableFunc(due, func(a, b *session) int { return int((a.last + a.idle) - (b.last + b.idle)) })
	for _, ss := range due {
		s.end(ss, ErrIdle)
	}
}

// session returns the live session pid for a statement, or why it cannot
// run one.
func (s *Server) session(pid int) (*session, error) {
	i := pid - firstPID
	if i < 0 || i >= len(s.sessions) {
		return nil, fmt.Errorf("pgsim: no session %d", pid)
	}
	ss := s.sessions[i]
	if ss.ended != nil {
		return nil, ss.ended
	}
	ss.last = s.now
	return ss, nil
}

// end ends a session, releasing its locks.
func (s *Server) end(ss *session, why error) {
	if ss.ended != nil {
		return
	}
	ss.ended = why
	for k := range ss.counts {
		delete(s.holders, k)
	}
	ss.counts = nil
}

// TryLock is pg_try_advisory_lock(key) on session pid.
func (s *Server) TryLock(pid int, key int64) (bool, error) {
	ss, err := s.session(pid)
	if err != nil {
		return false, err
	}
	if h, ok := s.holders[key]; ok && h != pid {
		return false, nil
	}
	s.holders[key] = pid
	ss.counts[key]++
	return true, nil
}

// Unlock is pg_advisory_unlock(key) on session pid.
func (s *Server) Unlock(pid int, key int64) (bool, error) {
	ss, err := s.session(pid)
	if err != nil {
		return false, err
	}
	if ss.counts[key] == 0 {
		return false, nil // WARNING: you don't own a lock of type ExclusiveLock
	}
	if ss.counts[key]--; ss.counts[key] == 0 {
		delete(ss.counts, key)
		delete(s.holders, key)
	}
	return true, nil
}

// Holds says whether session pid holds key, as pg_locks says it to the
// session itself.
func (s *Server) Holds(pid int, key int64) (bool, error) {
	ss, err := s.session(pid)
	if err != nil {
		return false, err
	}
	return ss.counts[key] > 0, nil
}

// Terminate is pg_terminate_backend(target) run on session by: true if
// target was a live session, which ends.
func (s *Server) Terminate(by, target int) (bool, error) {
	if _, err := s.session(by); err != nil {
		return false, err
	}
	i := target - firstPID
	if i < 0 || i >= len(s.sessions) || s.sessions[i].ended != nil {
		return false, nil
	}
	s.end(s.sessions[i], ErrTerminated)
	return true, nil
}

// Close ends session pid from its client's side (its connection closes).
func (s *Server) Close(pid int) {
	if i := pid - firstPID; i >= 0 && i < len(s.sessions) {
		s.end(s.sessions[i], ErrClosed)
	}
}

// Restart ends every session, as a fast shutdown does.
func (s *Server) Restart() {
	for _, ss := range s.sessions {
		s.end(ss, ErrTerminated)
	}
}

// Holder is the pid of the session that holds key, 0 if none.
func (s *Server) Holder(key int64) int { return s.holders[key] }

// alive says whether session pid lives.
func (s *Server) alive(pid int) bool {
	i := pid - firstPID
	return i >= 0 && i < len(s.sessions) && s.sessions[i].ended == nil
}

// terminate ends session pid as pg_terminate_backend does.
func (s *Server) terminate(pid int) {
	if i := pid - firstPID; i >= 0 && i < len(s.sessions) {
		s.end(s.sessions[i], ErrTerminated)
	}
}
