package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Connect opens a session on the server at url (URL's form), as the
// family's clients and the tests do.
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, url)
}

// admin runs f on a session of its own on the server, closed after.
func (s *Server) admin(ctx context.Context, f func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", s.Addr(), err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	return f(c)
}

// Terminate ends the sessions whose backends have the given process ids
// from the server's side (pg_terminate_backend), as an administrator, a
// pooler or a server's timeout would, and returns once their backends are
// gone (at most 5 s later): each session's advisory locks are then
// released (a backend lets its locks go before it leaves
// pg_stat_activity). Its client reads "terminating connection due to
// administrator command" (SQLSTATE 57P01) at its next read, or later, if
// the bytes cannot reach it. It returns how many sessions it ended (a
// session already gone is not counted).
func (s *Server) Terminate(ctx context.Context, pids ...uint32) (int, error) {
	n := 0
	err := s.admin(ctx, func(c *pgx.Conn) error {
		var ended []int32
		for _, pid := range pids {
			var ok bool
			if err := c.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil {
				return fmt.Errorf("postgres: pg_terminate_backend(%d): %w", pid, err)
			}
			if ok {
				n++
				ended = append(ended, int32(pid))
			}
		}
		// pg_terminate_backend only signals the backend: wait for it to
		// exit, and so to release its locks.
		deadline := time.Now().Add(5 * time.Second)
		for len(ended) > 0 {
			var left int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", ended).Scan(&left); err != nil {
				return fmt.Errorf("postgres: waiting for terminated sessions %v: %w", ended, err)
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("postgres: terminated sessions %v still there after 5 s", ended)
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	return n, err
}

// AdvisoryHolders returns the process ids of the backends whose sessions
// hold the session-level or transaction-level advisory lock key (the
// one-bigint form, exclusive or shared), from pg_locks, in pid order.
// pg_locks splits a bigint key into classid (its high 32 bits) and objid
// (its low 32 bits), with objsubid 1.
func (s *Server) AdvisoryHolders(ctx context.Context, key int64) ([]uint32, error) {
	pids, err := s.pids(ctx, `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid ORDER BY pid`,
		uint64(key)>>32, uint64(key)&0xffffffff)
	if err != nil {
		return nil, fmt.Errorf("postgres: advisory holders of %d: %w", key, err)
	}
	return pids, nil
}

// Sessions returns the process ids of the client backends connected to
// database postgres, but the caller's own, in pid order.
func (s *Server) Sessions(ctx context.Context) ([]uint32, error) {
	pids, err := s.pids(ctx, `SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() ORDER BY pid`)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions: %w", err)
	}
	return pids, nil
}

// SessionsFrom returns the process ids of the client backends whose
// connections come from 127.0.0.1 on one of ports (a Proxy's
// UpstreamPorts: the sessions of one client, whatever it is), in pid
// order.
func (s *Server) SessionsFrom(ctx context.Context, ports []int) ([]uint32, error) {
	if len(ports) == 0 {
		return nil, nil
	}
	p32 := make([]int32, len(ports))
	for i, p := range ports {
		p32[i] = int32(p)
	}
	pids, err := s.pids(ctx, `SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND client_port = ANY($1) ORDER BY pid`, p32)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions from ports %v: %w", ports, err)
	}
	return pids, nil
}

// pids runs a query whose rows are one backend process id each, on an
// administrator's connection.
func (s *Server) pids(ctx context.Context, query string, args ...any) ([]uint32, error) {
	var pids []uint32
	err := s.admin(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		pids, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint32, error) {
			var pid int32
			err := r.Scan(&pid)
			return uint32(pid), err
		})
		return err
	})
	return pids, err
}
