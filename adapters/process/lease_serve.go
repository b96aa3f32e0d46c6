package process

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/dbsem"
)

// LeaseServeOptions are ServeLease's choices.
type LeaseServeOptions struct {
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
}

// ServeLease speaks the protocol for lease locks (docs/protocol.md, "Lease
// locks: the database semaphore") as an implementation: it reads requests
// from r and answers on w until r ends, serving the reference, package
// dbsem, on a *sql.DB opened from init's dsn. It is what `lockprover
// serve-reference --kind db-semaphore` runs.
func ServeLease(r io.Reader, w io.Writer, o LeaseServeOptions) error {
	if o.OpTimeout <= 0 {
		o.OpTimeout = 20 * time.Second
	}
	s := &leaseServer{out: bufio.NewWriter(w), o: o}
	defer s.close()
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for in.Scan() {
		if len(in.Bytes()) == 0 {
			continue
		}
		var req map[string]json.RawMessage
		if err := json.Unmarshal(in.Bytes(), &req); err != nil || req == nil {
			s.reply(0, leaseBad("a request must be one JSON object"))
		} else {
			var id int
			var typ string
			if err := json.Unmarshal(req["id"], &id); err != nil || req["id"] == nil {
				s.reply(0, leaseBad(fmt.Sprintf("id must be an integer, got %s", orAbsent(req["id"]))))
			} else if err := json.Unmarshal(req["type"], &typ); err != nil || req["type"] == nil {
				s.reply(id, leaseBad(fmt.Sprintf("type must be a string, got %s", orAbsent(req["type"]))))
			} else {
				s.reply(id, s.handle(typ, req))
			}
		}
		if err := s.out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}

type leaseServer struct {
	out    *bufio.Writer
	o      LeaseServeOptions
	client string
	key    string
	db     *sql.DB
	sem    *dbsem.Semaphore
	fence  bool
}

func (s *leaseServer) reply(id int, m map[string]any) {
	m["id"] = id
	line, _ := json.Marshal(m)
	s.out.Write(append(line, '\n'))
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

func leaseBad(text string) map[string]any {
	return map[string]any{"type": "error", "code": "bad request", "text": text, "definite": true}
}

// leaseFailure is an error reply: definite, the operation certainly did
// nothing.
func leaseFailure(code string, err error, definite bool) map[string]any {
	m := map[string]any{"type": "error", "code": code, "text": redactLease(err.Error())}
	if definite {
		m["definite"] = true
	}
	return m
}

// fields decodes a request's fields strictly: each must be present and of
// its type.
type fields struct {
	req map[string]json.RawMessage
	bad error
}

func (f *fields) get(name string, v any) {
	if f.bad != nil {
		return
	}
	raw, ok := f.req[name]
	if !ok || string(raw) == "null" {
		f.bad = fmt.Errorf("field %q is missing", name)
		return
	}
	if err := json.Unmarshal(raw, v); err != nil {
		f.bad = fmt.Errorf("field %q: %v", name, err)
	}
}

// positive is an integer field, at least 1.
func (f *fields) positive(name string) int {
	var n int
	f.get(name, &n)
	if f.bad == nil && n < 1 {
		f.bad = fmt.Errorf("field %q is %d: must be at least 1", name, n)
	}
	return n
}

func (s *leaseServer) handle(typ string, req map[string]json.RawMessage) map[string]any {
	f := &fields{req: req}
	if typ == "init" {
		return s.init(f)
	}
	if s.sem == nil {
		return map[string]any{"type": "error", "code": "not initialised", "text": "the first request must be init", "definite": true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
	defer cancel()
	switch typ {
	case "acquire":
		max, ttl := f.positive("max"), f.positive("ttl_ms")
		if f.bad != nil {
			return leaseBad(f.bad.Error())
		}
		l, err := s.sem.Acquire(ctx, s.key, time.Duration(ttl)*time.Millisecond, max)
		switch {
		case err == nil:
			m := map[string]any{"type": "acquire_ok", "token": l.Token}
			if s.fence || l.Fence != 0 {
				m["fence"] = l.Fence
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
		f.get("token", &token)
		ttl := 0
		if typ == "refresh" {
			ttl = f.positive("ttl_ms")
		}
		if f.bad == nil && token == "" {
			f.bad = errors.New(`field "token" is empty`)
		}
		if f.bad != nil {
			return leaseBad(f.bad.Error())
		}
		var err error
		if typ == "refresh" {
			err = s.sem.Refresh(ctx, s.key, token, time.Duration(ttl)*time.Millisecond)
		} else {
			err = s.sem.Release(ctx, s.key, token)
		}
		switch {
		case err == nil:
			return map[string]any{"type": typ + "_ok"}
		case errors.Is(err, dbsem.ErrExpired):
			return map[string]any{"type": typ + "_fail", "reason": "expired"}
		}
		s.logf("%s: outcome unknown: %v", typ, err)
		return leaseFailure("database", err, false)
	}
	return map[string]any{"type": "error", "code": "unsupported", "text": "no request type " + typ, "definite": true}
}

// init opens the database and the semaphore's tables. A database out of
// reach is an error without definite (lockprover tries again with a new
// process); a request this server can never serve, a definite one.
func (s *leaseServer) init(f *fields) map[string]any {
	if s.sem != nil {
		return leaseBad("init was already received")
	}
	var lock, key, dsn, prefix, design string
	var fencing bool
	f.get("client", &s.client)
	f.get("lock", &lock)
	f.get("name", &key)
	f.get("dsn", &dsn)
	f.get("prefix", &prefix)
	f.get("design", &design)
	f.get("fencing", &fencing)
	f.positive("max")
	f.positive("ttl_ms")
	if f.bad != nil {
		return leaseBad(f.bad.Error())
	}
	if len(key) > 255 || key == "" {
		return leaseBad(fmt.Sprintf("name: a key of %d bytes: must be 1 to 255", len(key)))
	}
	if lock != LeaseDBSemaphore {
		return map[string]any{"type": "error", "code": "unsupported", "text": fmt.Sprintf("lock kind %q: this server serves %s", lock, LeaseDBSemaphore), "definite": true}
	}
	o := dbsem.Options{Prefix: prefix, Fencing: fencing, Defects: s.o.Defects}
	switch design {
	case dbsem.MasterRow.String():
		o.Design = dbsem.MasterRow
	case dbsem.RowPerSlot.String():
		o.Design = dbsem.RowPerSlot
	default:
		return map[string]any{"type": "error", "code": "unsupported", "text": fmt.Sprintf("design %q: want %s or %s", design, dbsem.MasterRow, dbsem.RowPerSlot), "definite": true}
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
