// Package dbsem is the reference implementation of the database counting
// semaphore (after zimingd/database-semaphore): at most max holders of a
// key at a time, each holding a lease that expires unless refreshed, kept in
// MariaDB or MySQL tables through database/sql and
// github.com/go-sql-driver/mysql.
//
// Acquire never waits for a slot: it grants a lease or answers ErrFull.
// Refresh extends a live lease; Release ends one. Both answer ErrExpired for
// a lease whose deadline has passed, whether or not anyone has taken its
// slot since (upstream revives such a lease instead).
//
// Expiry is judged by the database's clock: every deadline is written and
// compared as UTC_TIMESTAMP(6) of the session that runs the statement, read
// at the statement's start (NOW(6) in UTC, so that sessions with different
// time_zone settings agree), to the microsecond. A lease is live while its
// deadline is later than that clock. A session's clock follows SET
// @@timestamp: after SET @@timestamp = X it stands still at X until SET
// @@timestamp = DEFAULT. That is how clock faults reach the semaphore: give
// a client its own *sql.DB limited to one connection (SetMaxOpenConns(1)),
// set @@timestamp on that connection, and every statement of that client's
// Semaphore runs on it. A session whose clock is ahead takes leases that
// others still see live. One whose clock is behind writes deadlines that
// others already see passed, and still refreshes (and releases) leases whose
// deadline has passed by the true clock. A new connection (after a lost one)
// starts with the true clock.
//
// Tokens are random UUIDs; with Options.Fencing a lease also carries a
// fence, a per-key counter that increases in the order grants took effect.
// The limit is agreed: the first acquire of a key records its max and the
// design, and an acquire that disagrees fails with ErrMismatch.
//
// Each acquire runs on one dedicated connection, its grant in one READ
// COMMITTED transaction; refresh and release are single autocommit
// statements. sql.go lists every statement. Options.Defects switches on
// deliberate bugs, for the prover's mutants.
package dbsem

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Errors an operation may return. Any other error from Refresh or Release
// leaves their outcome unknown; an acquire's other errors mean it was not
// granted, except ErrUnknownOutcome.
var (
	// ErrFull: max leases of the key were live when acquire looked.
	ErrFull = errors.New("dbsem: every slot is held")
	// ErrExpired: the lease's deadline had passed (or it was released, or
	// never granted), so refresh or release did nothing.
	ErrExpired = errors.New("dbsem: the lease has expired")
	// ErrMismatch: the acquire's max (or the semaphore's design) is not the
	// one the key was set up with; the message names both.
	ErrMismatch = errors.New("dbsem: the key was set up differently")
	// ErrUnknownOutcome: the acquire's COMMIT was sent but its reply did
	// not arrive, so the lease may or may not have been granted. The Lease
	// returned with it is the one that would have been granted: Release its
	// token to free the slot if it was; otherwise the slot is free again at
	// the lease's deadline.
	ErrUnknownOutcome = errors.New("dbsem: the acquire's COMMIT got no reply: granted or not, unknown")
)

// A Lease is a granted slot.
type Lease struct {
	// Token identifies the lease to Refresh and Release: a random UUID,
	// which with the row-per-slot design follows its slot's number and a
	// colon ("2:1b4e28ba-2fa1-41d2-883f-0016d3cca427").
	Token string
	// Fence is the key's fencing token with Options.Fencing (1, 2, ... in
	// the order grants took effect), 0 without.
	Fence int64
}

// A Semaphore is a handle on the semaphores kept in one set of tables: one
// semaphore per key. It holds no state of its own besides its options, and
// is safe for concurrent use.
type Semaphore struct {
	db     *sql.DB
	o      Options
	tables *strings.Replacer

	// pause, if set (by tests), is called at named points of an acquire
	// so that a test can interleave two of them exactly.
	pause func(point string)
}

// Open returns a Semaphore on the database db names, creating its tables
// if they do not exist yet (CREATE TABLE IF NOT EXISTS: opening again, from
// any client, is harmless). It does not close db.
func Open(ctx context.Context, db *sql.DB, o Options) (*Semaphore, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	p := o.prefix()
	s := &Semaphore{db: db, o: o, tables: strings.NewReplacer(
		"{keys}", "`"+p+"keys`", "{tokens}", "`"+p+"tokens`", "{slots}", "`"+p+"slots`")}
	table := createTokens
	if o.Design == RowPerSlot {
		table = createSlots
	}
	for _, q := range []string{createKeys, table} {
		q, _ := s.stmt(q)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("dbsem: create tables: %w", err)
		}
	}
	return s, nil
}

// Drop removes every table of the semaphore's prefix (keys, tokens and
// slots, whichever exist), and with them every key and lease.
func (s *Semaphore) Drop(ctx context.Context) error {
	q, _ := s.stmt(dropAll)
	if _, err := s.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("dbsem: drop tables: %w", err)
	}
	return nil
}

// Acquire grants a lease on key for ttl (whole milliseconds, at least one)
// if fewer than max leases of key are live, and answers ErrFull otherwise;
// it never waits for a slot. The first acquire of a key sets its max; one
// that asks for another max fails with ErrMismatch. An error other than
// these and ErrUnknownOutcome means the lease was not granted.
func (s *Semaphore) Acquire(ctx context.Context, key string, ttl time.Duration, max int) (Lease, error) {
	if err := checkKey(key); err != nil {
		return Lease{}, err
	}
	us, err := micros(ttl)
	if err != nil {
		return Lease{}, err
	}
	if max < 1 || max > MaxSlots {
		return Lease{}, fmt.Errorf("dbsem: max %d: must be 1 to %d", max, MaxSlots)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return Lease{}, fmt.Errorf("dbsem: acquire: %w", err)
	}
	defer func() {
		if conn != nil { // nil when the defect's second connection could not be had
			conn.Close()
		}
	}()
	if err := s.agree(ctx, conn, key, max); err != nil {
		return Lease{}, err
	}
	lease, err := s.grant(ctx, conn, key, us, max)
	if errors.Is(err, ErrUnknownOutcome) && s.o.Defects.AmbiguousCommitRetry {
		// The defect: take the lost reply for a failure and try again.
		conn.Close()
		if conn, err = s.db.Conn(ctx); err != nil {
			return Lease{}, fmt.Errorf("dbsem: acquire: %w", err)
		}
		lease, err = s.grant(ctx, conn, key, us, max)
	}
	return lease, err
}

// Refresh moves a live lease's deadline to ttl from now (the database's
// now). It answers ErrExpired if the lease's deadline has passed, even if
// nobody has taken its slot since, or if it was released.
func (s *Semaphore) Refresh(ctx context.Context, key, token string, ttl time.Duration) error {
	if err := checkKey(key); err != nil {
		return err
	}
	us, err := micros(ttl)
	if err != nil {
		return err
	}
	row, ok := s.row(key, token)
	if !ok {
		return ErrExpired
	}
	q := s.design(refreshToken, refreshSlot)
	args := append([]any{now, us}, row...)
	if s.o.Defects.RefreshRevivesExpired {
		q = s.design(refreshTokenAE, refreshSlotAE)
	} else {
		args = append(args, now)
	}
	return s.change(ctx, "refresh", q, args)
}

// Release ends a live lease, freeing its slot. It answers ErrExpired if
// the lease's deadline has passed, even if nobody has taken its slot since
// (the slot is free already), or if it was released.
func (s *Semaphore) Release(ctx context.Context, key, token string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	row, ok := s.row(key, token)
	if !ok {
		return ErrExpired
	}
	q, args := s.design(releaseToken, releaseSlot), row
	if s.o.Defects.ReleaseAfterExpirySucceeds {
		q = s.design(releaseTokenAE, releaseSlotAE)
	} else {
		args = append(args, now)
	}
	return s.change(ctx, "release", q, args)
}

// design picks the statement of the semaphore's design.
func (s *Semaphore) design(masterRow, rowPerSlot string) string {
	if s.o.Design == RowPerSlot {
		return rowPerSlot
	}
	return masterRow
}

// row is the primary key of token's row, and the token: (key, token) for
// master-row, (key, slot, token) for row-per-slot, whose tokens start with
// their slot's number. A token that cannot be one is not ok.
func (s *Semaphore) row(key, token string) ([]any, bool) {
	if s.o.Design == MasterRow {
		return []any{key, token}, true
	}
	n, _, ok := strings.Cut(token, ":")
	num, err := strconv.Atoi(n)
	if !ok || err != nil || num < 0 || num >= MaxSlots {
		return nil, false
	}
	return []any{key, num, token}, true
}

// change runs refresh's or release's one statement: one row changed is
// success, none is ErrExpired. (Refresh always changes a row it matches: it
// counts refreshes, so that a refresh under a stopped clock, which sets the
// same deadline again, is not taken for a miss.)
func (s *Semaphore) change(ctx context.Context, op, q string, args []any) error {
	q, args = s.stmt(q, args...)
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("dbsem: %s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("dbsem: %s: %w", op, err)
	}
	if n == 0 {
		return ErrExpired
	}
	return nil
}

func checkKey(key string) error {
	if len(key) < 1 || len(key) > 255 {
		return fmt.Errorf("dbsem: key of %d bytes: must be 1 to 255", len(key))
	}
	return nil
}

// micros is ttl in microseconds, truncated to whole milliseconds.
func micros(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("dbsem: ttl %v: must be at least 1ms", ttl)
	}
	return ttl.Milliseconds() * 1000, nil
}

// newToken is a random (version 4) UUID, its bits from random (nil:
// crypto/rand).
func newToken(random io.Reader) string {
	var b [16]byte
	if random == nil {
		random = rand.Reader
	}
	io.ReadFull(random, b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// uuidFence is Defects.FenceFromUUID's fence: the token's first 15 hex
// digits with the lowest bit set, a positive number in no particular order.
func uuidFence(token string) int64 {
	_, uuid, _ := strings.Cut(token, ":")
	if uuid == "" {
		uuid = token
	}
	n, _ := strconv.ParseInt(strings.ReplaceAll(uuid, "-", "")[:15], 16, 64)
	return n | 1
}
