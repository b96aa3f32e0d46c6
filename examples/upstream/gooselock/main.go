// Command gooselock serves lockprover's process protocol for PostgreSQL
// advisory locks (docs/protocol.md, "PostgreSQL advisory locks") with
// the session locker of github.com/pressly/goose/v3 (go.mod's version):
// lock.NewPostgresSessionLocker, called through its public API and
// unchanged, on a connection taken as goose's Provider takes it. One
// process is one lockprover client of one key.
//
//	lockprover validate-impl --kind pg-advisory --impl 'examples/upstream/gooselock/gooselock-adapter'
//	lockprover prove --kind pg-advisory --impl 'examples/upstream/gooselock/gooselock-adapter'
//
// The mapping, as goose's Provider does it (provider_run.go, initialize):
//
//   - init: a database/sql pool on init's url with the pgx driver
//     (github.com/jackc/pgx/v5/stdlib), and a session locker on init's
//     key (lock.WithLockID). goose retries a held lock every 5 s for 5
//     minutes by default; the protocol's acquire never waits, so the
//     adapter sets the least goose allows, lock.WithLockTimeout(1, 1):
//     one retry, 1 s later (an acquire of a held lock answers after 1 s).
//     The unlock's retries are goose's defaults (every 2 s for a minute).
//   - acquire: a connection of its own from the pool (DB.Conn), and
//     SessionLock on it. nil is acquire_ok, with a token of the adapter's
//     (client-n); goose's "failed to acquire lock" (its retries spent on
//     pg_try_advisory_lock answering false) is acquire_fail held; any
//     other error is an error without definite, and the connection is
//     closed, as goose's cleanup does.
//   - refresh: goose has no call that checks or renews its lock. A goose
//     user runs its migrations on the locked connection, so a refresh is
//     what a migration's next statement is: SELECT 1 on that connection.
//     nil is refresh_ok (the session lives, and the lock with it); an
//     error is an error without definite (goose would fail the
//     migration: it never says the lock is lost).
//   - release: SessionUnlock on the connection, then Conn.Close, as
//     goose's cleanup does. nil is release_ok; an error is an error
//     without definite.
//
// A refresh or release of a token this process does not hold answers
// expired without calling goose. Each operation runs under a context of
// 20 s (lockprover waits 30 s).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lockprover/lockprover/examples/upstream/internal/serve"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3/lock"
)

const opTimeout = 20 * time.Second

func main() {
	fmt.Fprintln(os.Stderr, "gooselock adapter: github.com/pressly/goose/v3/lock (go.mod's version)")
	s := &server{}
	serve.Lines(os.Stdin, os.Stdout, func() string { return s.client }, s.handle)
	if s.conn != nil {
		s.conn.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
}

type server struct {
	client string
	db     *sql.DB
	locker lock.SessionLocker
	grants int
	// conn is the locked connection, and token its grant's; nil and ""
	// when the process holds nothing.
	conn  *sql.Conn
	token string
}

// failure is an error of unknown outcome (not definite).
func (s *server) failure(op string, err error) serve.Reply {
	return serve.Failure(s.client, "goose", op, err)
}

func (s *server) handle(typ string, req serve.Request) serve.Reply {
	if typ == "init" {
		return s.init(req)
	}
	token, _, refusal := serve.Lease(typ, req, s.db != nil, false)
	if refusal != nil {
		return refusal
	}
	if typ != "acquire" && token != s.token {
		return serve.Reply{"type": typ + "_fail", "reason": "expired"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	switch typ {
	case "acquire":
		if s.conn != nil {
			// Still holding: a second SessionLock on the same session
			// would take the re-entrant lock twice. goose's Provider
			// never does that; answer as the lock is: held.
			return map[string]any{"type": "acquire_fail", "reason": "held"}
		}
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return s.failure(typ, err)
		}
		if err := s.locker.SessionLock(ctx, conn); err != nil {
			conn.Close()
			if strings.Contains(err.Error(), "failed to acquire lock") {
				return map[string]any{"type": "acquire_fail", "reason": "held"}
			}
			return s.failure(typ, err)
		}
		s.grants++
		s.conn, s.token = conn, fmt.Sprintf("%s-%d", s.client, s.grants)
		return map[string]any{"type": "acquire_ok", "token": s.token}
	case "refresh":
		if _, err := s.conn.ExecContext(ctx, "SELECT 1"); err != nil {
			return s.failure(typ, err)
		}
		return map[string]any{"type": "refresh_ok"}
	}
	conn := s.conn
	s.conn, s.token = nil, ""
	err := errors.Join(s.locker.SessionUnlock(context.WithoutCancel(ctx), conn), conn.Close())
	if err != nil {
		return s.failure(typ, err)
	}
	return map[string]any{"type": "release_ok"}
}

func (s *server) init(req serve.Request) serve.Reply {
	if s.db != nil {
		return serve.Refuse("bad request", "init was already received")
	}
	var lockKind, url string
	var key int64
	json.Unmarshal(req["client"], &s.client)
	json.Unmarshal(req["lock"], &lockKind)
	json.Unmarshal(req["url"], &url)
	if lockKind != "pg-advisory" {
		return serve.Refuse("unsupported", fmt.Sprintf("lock kind %q: this adapter serves pg-advisory", lockKind))
	}
	if json.Unmarshal(req["key"], &key) != nil {
		return serve.Refuse("bad request", `"key" must be an integer`)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(key), lock.WithLockTimeout(1, 1))
	if err != nil {
		return serve.Refuse("bad request", err.Error())
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return serve.Refuse("bad request", err.Error())
	}
	s.db, s.locker = db, locker
	return map[string]any{"type": "init_ok"}
}
