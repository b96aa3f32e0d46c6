package dbsem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// agree checks, on conn, that key was set up with max and this design,
// setting the key up first if nobody has. With Defects.MixedMax the max is
// not compared; a row-per-slot key then gets rows 0..max-1 if it has fewer.
func (s *Semaphore) agree(ctx context.Context, conn *sql.Conn, key string, max int) error {
	var agreed int
	var design string
	for attempt := 0; ; attempt++ {
		q, args := s.stmt(selectKey, key)
		err := conn.QueryRowContext(ctx, q, args...).Scan(&agreed, &design)
		if errors.Is(err, sql.ErrNoRows) && attempt == 0 {
			if err := s.setUp(ctx, conn, key, max); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("dbsem: acquire: key %q vanished as it was set up (dropped?)", key)
		}
		if err != nil {
			return fmt.Errorf("dbsem: acquire: %w", err)
		}
		break
	}
	if design != s.o.Design.String() {
		return fmt.Errorf("%w: key %q was set up with design %s, this semaphore's is %s",
			ErrMismatch, key, design, s.o.Design)
	}
	if !s.o.Defects.MixedMax {
		if agreed != max {
			return fmt.Errorf("%w: key %q was set up with max %d, the acquire asked for max %d",
				ErrMismatch, key, agreed, max)
		}
		return nil
	}
	if s.o.Design != RowPerSlot {
		return nil
	}
	// The defect, as upstream: make sure this caller's rows exist.
	var n int
	q, args := s.stmt(countSlots, key)
	if err := conn.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return fmt.Errorf("dbsem: acquire: %w", err)
	}
	if n < max {
		q, args := s.slotRows(insertSlotsMixed, key, max)
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("dbsem: acquire: %w", err)
		}
	}
	return nil
}

// setUp records key's max and design, and (row-per-slot) creates its rows
// 0..max-1 in the same transaction, so that a key's rows exist as soon as
// its record does. If another acquire has set the key up meanwhile, it
// changes nothing.
func (s *Semaphore) setUp(ctx context.Context, conn *sql.Conn, key string, max int) error {
	q, args := s.stmt(insertKey, key, max, s.o.Design.String())
	if s.o.Design == MasterRow {
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("dbsem: acquire: set up key: %w", err)
		}
		return nil
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("dbsem: acquire: set up key: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("dbsem: acquire: set up key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("dbsem: acquire: set up key: %w", err)
	} else if n == 1 {
		q, args := s.slotRows(insertSlots, key, max)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("dbsem: acquire: set up key: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dbsem: acquire: set up key: %w", err)
	}
	return nil
}

// grant runs an acquire's transaction on conn, under READ COMMITTED. An
// error wrapping ErrUnknownOutcome comes with the lease it may have
// granted; any other means nothing was granted.
func (s *Semaphore) grant(ctx context.Context, conn *sql.Conn, key string, us int64, max int) (Lease, error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return Lease{}, fmt.Errorf("dbsem: acquire: %w", err)
	}
	defer tx.Rollback()
	var lease Lease
	var ok bool
	if s.o.Design == RowPerSlot {
		ok, err = s.takeSlot(ctx, tx, key, us, max, &lease)
	} else {
		ok, err = s.insertToken(ctx, tx, key, us, max, &lease)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("dbsem: acquire: %w", err)
	}
	if !ok {
		if s.o.Design == MasterRow {
			// Keep the expired rows' deletion; the answer stands either way.
			tx.Commit()
		}
		return Lease{}, ErrFull
	}
	if err := ctx.Err(); err != nil {
		// database/sql would roll back rather than send the COMMIT.
		return Lease{}, fmt.Errorf("dbsem: acquire: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return lease, fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	}
	return lease, nil
}

// insertToken is the master-row grant: lock the key's master row, delete
// its expired token rows, count the live ones, and insert one more if
// fewer than max are live.
func (s *Semaphore) insertToken(ctx context.Context, tx *sql.Tx, key string, us int64, max int, lease *Lease) (bool, error) {
	lock := lockMaster
	if s.o.Defects.CountWithoutLock {
		lock = readMaster
	}
	var agreed int
	q, args := s.stmt(lock, key)
	if err := tx.QueryRowContext(ctx, q, args...).Scan(&agreed); err != nil {
		return false, err
	}
	q, args = s.stmt(deleteExpired, key, now)
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return false, err
	}
	var live int
	q, args = s.stmt(countLive, key, now)
	if err := tx.QueryRowContext(ctx, q, args...).Scan(&live); err != nil {
		return false, err
	}
	s.at("decided")
	if live >= max {
		return false, nil
	}
	lease.Token = newToken(s.o.Random)
	if err := s.fence(ctx, tx, key, lease); err != nil {
		return false, err
	}
	q, args = s.stmt(insertToken, key, lease.Token, now, us, lease.Fence)
	_, err := tx.ExecContext(ctx, q, args...)
	return err == nil, err
}

// takeSlot is the row-per-slot grant: lock the key's first free (or
// expired) row that no other transaction has locked, and write the token
// into it.
func (s *Semaphore) takeSlot(ctx context.Context, tx *sql.Tx, key string, us int64, max int, lease *Lease) (bool, error) {
	d := s.o.Defects
	var q string
	var args []any
	switch {
	case d.NoSkipLocked && d.MixedMax:
		q, args = s.stmt(peekSlotMixed, key, max, now)
	case d.NoSkipLocked:
		q, args = s.stmt(peekSlot, key, now)
	case d.MixedMax:
		q, args = s.stmt(pickSlotMixed, key, max, now)
	default:
		q, args = s.stmt(pickSlot, key, now)
	}
	var num int
	err := tx.QueryRowContext(ctx, q, args...).Scan(&num)
	if errors.Is(err, sql.ErrNoRows) {
		s.at("decided")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.at("decided")
	lease.Token = strconv.Itoa(num) + ":" + newToken(s.o.Random)
	if err := s.fence(ctx, tx, key, lease); err != nil {
		return false, err
	}
	q, args = s.stmt(takeSlot, lease.Token, now, us, lease.Fence, key, num)
	_, err = tx.ExecContext(ctx, q, args...)
	return err == nil, err
}

// fence sets the lease's fence: with Options.Fencing the key's counter,
// incremented in the grant's transaction (the row stays locked until
// COMMIT, so fences follow the order in which grants commit).
func (s *Semaphore) fence(ctx context.Context, tx *sql.Tx, key string, lease *Lease) error {
	switch {
	case !s.o.Fencing:
		return nil
	case s.o.Defects.FenceFromUUID:
		lease.Fence = uuidFence(lease.Token)
		return nil
	}
	q, args := s.stmt(nextFence, key)
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	lease.Fence, err = res.LastInsertId()
	return err
}

// at lets a test stop an acquire at a named point.
func (s *Semaphore) at(point string) {
	if s.pause != nil {
		s.pause(point)
	}
}
