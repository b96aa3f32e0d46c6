package main

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/lockprover/lockprover/families/dbsemaphore"
)

// The floors of bench --kind db-semaphore: what each operation of the
// design must send, raw, with no lock library: no agreement on the key's
// max, no token made in Go, one connection held throughout. {p} is the
// table prefix.
var leaseFloorSQL = map[string]floorStatements{
	"master-row": {
		lock:    "SELECT max_count FROM `{p}keys` WHERE lock_key = ? FOR UPDATE",
		expire:  "DELETE FROM `{p}tokens` WHERE lock_key = ? AND expires <= UTC_TIMESTAMP(6)",
		count:   "SELECT COUNT(*) FROM `{p}tokens` WHERE lock_key = ? AND expires > UTC_TIMESTAMP(6)",
		take:    "INSERT INTO `{p}tokens` (lock_key, token, expires) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL 60 SECOND)",
		refresh: "UPDATE `{p}tokens` SET expires = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE lock_key = ? AND token = ? AND expires > UTC_TIMESTAMP(6)",
		release: "DELETE FROM `{p}tokens` WHERE lock_key = ? AND token = ? AND expires > UTC_TIMESTAMP(6)",
	},
	"row-per-slot": {
		lock:    "SELECT lock_num FROM `{p}slots` WHERE lock_key = ? AND (token IS NULL OR expires <= UTC_TIMESTAMP(6)) ORDER BY lock_num LIMIT 1 FOR UPDATE SKIP LOCKED",
		take:    "UPDATE `{p}slots` SET token = ?, expires = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE lock_key = ? AND lock_num = 0",
		refresh: "UPDATE `{p}slots` SET expires = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE lock_key = ? AND lock_num = 0 AND token = ? AND expires > UTC_TIMESTAMP(6)",
		release: "UPDATE `{p}slots` SET token = NULL, expires = NULL WHERE lock_key = ? AND lock_num = 0 AND token = ? AND expires > UTC_TIMESTAMP(6)",
	},
}

// floorStatements are a design's floor statements.
type floorStatements struct{ lock, expire, count, take, refresh, release string }

// fenceSQL takes the next fence of a key, for fencing.
const fenceSQL = "UPDATE `{p}keys` SET fence = LAST_INSERT_ID(fence + 1) WHERE lock_key = ?"

// stmts are the design's floor statements, with the bench's prefix.
func (b *leaseBench) stmts() floorStatements {
	s := leaseFloorSQL[designOf(b.o)]
	r := strings.NewReplacer("{p}", b.prefix)
	return floorStatements{r.Replace(s.lock), r.Replace(s.expire), r.Replace(s.count), r.Replace(s.take), r.Replace(s.refresh), r.Replace(s.release)}
}

// designOf is the options' design.
func designOf(o dbsemaphore.Options) string {
	if o.Design == "row-per-slot" {
		return "row-per-slot"
	}
	return "master-row"
}

// floorGrant is the design's grant on key, in a READ COMMITTED
// transaction: lock (the master row, or a free slot row), delete the
// expired leases and count the live ones (master-row), take the next fence
// (fencing), take one; false when the key is full.
func (b *leaseBench) floorGrant(key, token string) (bool, error) {
	tx, err := b.db.BeginTx(b.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var n int
	err = tx.QueryRowContext(b.ctx, b.stmts().lock, key).Scan(&n)
	if designOf(b.o) == "row-per-slot" {
		if errors.Is(err, sql.ErrNoRows) {
			return false, tx.Commit()
		}
		if err != nil {
			return false, err
		}
		if err := b.floorFence(tx, key); err != nil {
			return false, err
		}
		_, err = tx.ExecContext(b.ctx, b.stmts().take, token, key)
		return err == nil, errors.Join(err, tx.Commit())
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(b.ctx, b.stmts().expire, key); err != nil {
		return false, err
	}
	var live int
	if err := tx.QueryRowContext(b.ctx, b.stmts().count, key).Scan(&live); err != nil {
		return false, err
	}
	if live >= n {
		return false, tx.Commit()
	}
	if err := b.floorFence(tx, key); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(b.ctx, b.stmts().take, key, token); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// floorFence takes key's next fence, with fencing.
func (b *leaseBench) floorFence(tx *sql.Tx, key string) error {
	if !b.o.Fencing {
		return nil
	}
	_, err := tx.ExecContext(b.ctx, strings.ReplaceAll(fenceSQL, "{p}", b.prefix), key)
	return err
}

// floorChange is the design's refresh or release of token on key, one
// autocommit statement that must change one row.
func (b *leaseBench) floorChange(q, key, token string) error {
	res, err := b.db.ExecContext(b.ctx, q, key, token)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("the floor's statement changed %d rows, want 1", n)
	}
	return nil
}

// floorAcquire (F1): the grant on the free key "floor", then, untimed,
// its release.
func (b *leaseBench) floorAcquire() error {
	if err := b.time(lfAcquire, func() error {
		ok, err := b.floorGrant("floor", "floor-token")
		if err == nil && !ok {
			err = errors.New("the floor's key was full")
		}
		return err
	}); err != nil {
		return err
	}
	return b.floorChange(b.stmts().release, "floor", "floor-token")
}

// floorFull (F2): the grant on "floor-full", which the reference holds.
func (b *leaseBench) floorFull() error {
	return b.time(lfFull, func() error {
		ok, err := b.floorGrant("floor-full", "floor-token")
		if err == nil && ok {
			err = errors.New("the floor's full key granted a lease")
		}
		return err
	})
}

// floorRefreshRelease (F3, F4): a refresh and a release of a live lease of
// the floor's own (granted untimed).
func (b *leaseBench) floorRefreshRelease() error {
	if _, err := b.floorGrant("floor", "floor-token"); err != nil {
		return err
	}
	if err := b.time(lfRefresh, func() error {
		return b.floorChange(b.stmts().refresh, "floor", "floor-token")
	}); err != nil {
		return err
	}
	return b.time(lfRelease, func() error {
		return b.floorChange(b.stmts().release, "floor", "floor-token")
	})
}

// floors describes the floors, for the report.
func (b *leaseBench) floors() [][2]string {
	if designOf(b.o) == "row-per-slot" {
		return [][2]string{
			{lfAcquire, "BEGIN (READ COMMITTED), SELECT a free slot FOR UPDATE SKIP LOCKED, (fencing: UPDATE the key's fence), UPDATE the slot, COMMIT"},
			{lfFull, "BEGIN, SELECT a free slot FOR UPDATE SKIP LOCKED (none), COMMIT"},
			{lfRefresh, "one UPDATE of the live slot row's deadline"},
			{lfRelease, "one UPDATE emptying the live slot row"},
		}
	}
	return [][2]string{
		{lfAcquire, "BEGIN (READ COMMITTED), SELECT the master row FOR UPDATE, DELETE the expired tokens, COUNT the live ones, (fencing: UPDATE the key's fence), INSERT one, COMMIT"},
		{lfFull, "BEGIN, SELECT the master row FOR UPDATE, DELETE the expired tokens, COUNT the live ones (max), COMMIT"},
		{lfRefresh, "one UPDATE of the live token row's deadline"},
		{lfRelease, "one DELETE of the live token row"},
	}
}
