package dbsemprotocol

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/model/dbsem"
)

// ServeOptions are Serve's choices.
type ServeOptions struct {
	// Defects are the reference's deliberate bugs, to serve a mutant; the
	// zero value serves the reference. A defect the init's design cannot
	// have makes init fail with a definite error.
	Defects dbsem.Defects
	// OpTimeout bounds each operation's statements; 0 means 20 s (under
	// lockprover's 30 s, so that a stuck statement is answered as an
	// error, not a killed process). The driver cancels a statement whose
	// time is up by closing its connection.
	OpTimeout time.Duration
	// Log, if set, receives one line per failed operation (stderr, say).
	Log io.Writer
	// Grain, if set, is the server's grain of lease time, as a backend
	// with whole-second deadlines has: each acquire and refresh grants
	// its ttl rounded up to a whole number of grains, and says the lease
	// it granted (ttl_ms in its _ok reply) unless Unsaid. Unsaid serves
	// as an implementation that does not say it would (database-semaphore
	// upstream), which lockprover then judges by the ttl it asked for.
	Grain  time.Duration
	Unsaid bool
}

// grant is the lease, in ms, granted for ttl ms: ttl rounded up to whole
// grains; said, whether the reply says it.
func (o ServeOptions) grant(ttl int) (granted int, said bool) {
	g := int(o.Grain.Milliseconds())
	if g <= 0 {
		return ttl, false
	}
	return (ttl + g - 1) / g * g, !o.Unsaid
}

// Serve speaks the protocol for lease locks (docs/protocol.md, "Lease
// locks: the database semaphore") as an implementation: it reads requests
// from r and answers on w until r ends, serving the reference, package
// dbsem, on a *sql.DB opened from init's dsn. It is what `lockprover
// serve-reference --kind db-semaphore` runs; the transport is the generic
// one (process.Server).
func Serve(r io.Reader, w io.Writer, o ServeOptions) error {
	if o.OpTimeout <= 0 {
		o.OpTimeout = 20 * time.Second
	}
	s := &leaseServer{o: o}
	defer s.close()
	return process.Server{Handle: s.handle}.Serve(r, w)
}

type leaseServer struct {
	o      ServeOptions
	client string
	key    string
	db     *sql.DB
	sem    *dbsem.Semaphore
	fence  bool
}

func (s *leaseServer) close() {
	if s.db != nil {
		s.db.Close()
	}
}

func (s *leaseServer) logf(format string, args ...any) {
	if s.o.Log != nil {
		fmt.Fprintf(s.o.Log, "%s: %s\n", s.client, redactLease(fmt.Sprintf(format, args...)))
	}
}

func leaseBad(text string) map[string]any { return process.Refuse("bad request", text) }

// leaseFailure is an error reply: definite, the operation certainly did
// nothing.
func leaseFailure(code string, err error, definite bool) map[string]any {
	m := map[string]any{"type": "error", "code": code, "text": redactLease(err.Error())}
	if definite {
		m["definite"] = true
	}
	return m
}

func (s *leaseServer) handle(typ string, req map[string]json.RawMessage) map[string]any {
	f := &process.Fields{Req: req}
	if typ == "init" {
		return s.init(f)
	}
	if s.sem == nil {
		return process.Refuse("not initialised", "the first request must be init")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
	defer cancel()
	switch typ {
	case "acquire":
		max, ttl := f.Positive("max"), f.Positive("ttl_ms")
		if f.Bad != nil {
			return leaseBad(f.Bad.Error())
		}
		ttl, said := s.o.grant(ttl)
		l, err := s.sem.Acquire(ctx, s.key, time.Duration(ttl)*time.Millisecond, max)
		switch {
		case err == nil:
			m := map[string]any{"type": "acquire_ok", "token": l.Token}
			if s.fence || l.Fence != 0 {
				m["fence"] = l.Fence
			}
			if said {
				m["ttl_ms"] = ttl
			}
			return m
		case errors.Is(err, dbsem.ErrFull):
			return map[string]any{"type": "acquire_fail", "reason": "full"}
		case errors.Is(err, dbsem.ErrUnknownOutcome):
			s.logf("acquire: outcome unknown: %v", err)
			return leaseFailure("database", err, false)
		case errors.Is(err, dbsem.ErrMismatch):
			return leaseFailure("mismatch", err, true)
		}
		// dbsem: any other acquire error granted nothing.
		s.logf("acquire: not granted: %v", err)
		return leaseFailure("database", err, true)
	case "refresh", "release":
		var token string
		f.Get("token", &token)
		ttl := 0
		if typ == "refresh" {
			ttl = f.Positive("ttl_ms")
		}
		if f.Bad == nil && token == "" {
			f.Bad = errors.New(`field "token" is empty`)
		}
		if f.Bad != nil {
			return leaseBad(f.Bad.Error())
		}
		var err error
		ttl, said := s.o.grant(ttl)
		if typ == "refresh" {
			err = s.sem.Refresh(ctx, s.key, token, time.Duration(ttl)*time.Millisecond)
		} else {
			err = s.sem.Release(ctx, s.key, token)
		}
		switch {
		case err == nil && typ == "refresh" && said:
			return map[string]any{"type": "refresh_ok", "ttl_ms": ttl}
		case err == nil:
			return map[string]any{"type": typ + "_ok"}
		case errors.Is(err, dbsem.ErrExpired):
			return map[string]any{"type": typ + "_fail", "reason": "expired"}
		}
		s.logf("%s: outcome unknown: %v", typ, err)
		return leaseFailure("database", err, false)
	}
	return nil // unsupported
}

// init opens the database and the semaphore's tables. A database out of
// reach is an error without definite (lockprover tries again with a new
// process); a request this server can never serve, a definite one.
func (s *leaseServer) init(f *process.Fields) map[string]any {
	if s.sem != nil {
		return leaseBad("init was already received")
	}
	var lock, key, dsn, prefix, design string
	var fencing bool
	f.Get("client", &s.client)
	f.Get("lock", &lock)
	f.Get("name", &key)
	f.Get("dsn", &dsn)
	f.Get("prefix", &prefix)
	f.Get("design", &design)
	f.Get("fencing", &fencing)
	f.Positive("max")
	f.Positive("ttl_ms")
	if f.Bad != nil {
		return leaseBad(f.Bad.Error())
	}
	if len(key) > 255 || key == "" {
		return leaseBad(fmt.Sprintf("name: a key of %d bytes: must be 1 to 255", len(key)))
	}
	if lock != dbsemrun.Kind {
		return map[string]any{"type": "error", "code": "unsupported", "text": fmt.Sprintf("lock kind %q: this server serves %s", lock, dbsemrun.Kind), "definite": true}
	}
	o := dbsem.Options{Prefix: prefix, Fencing: fencing, Defects: s.o.Defects}
	switch design {
	case dbsem.MasterRow.String():
		o.Design = dbsem.MasterRow
	case dbsem.RowPerSlot.String():
		o.Design = dbsem.RowPerSlot
	default:
		return process.Refuse("unsupported", fmt.Sprintf("design %q: want %s or %s", design, dbsem.MasterRow, dbsem.RowPerSlot))
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return leaseBad(fmt.Sprintf("dsn: %v", err))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second // dial
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return leaseBad(fmt.Sprintf("dsn: %v", err))
	}
	db := sql.OpenDB(conn)
	// One session, as a client process of the protocol has: every
	// statement of the semaphore runs on it (a session's clock is the
	// client's), and a lost connection is replaced by the next statement.
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	sem, err := dbsem.Open(ctx, db, o)
	if err != nil {
		db.Close()
		if errors.Unwrap(err) == nil {
			// Options dbsem refuses (a prefix, a defect the design has not):
			// no database was touched.
			return leaseFailure("unsupported", err, true)
		}
		s.logf("init: %v", err)
		return leaseFailure("database", err, false)
	}
	s.key, s.db, s.sem, s.fence = key, db, sem, fencing
	return map[string]any{"type": "init_ok"}
}
