package dbsem

import (
	"strconv"
	"strings"
	"time"
)

// Every statement the semaphore sends, in one place. {keys}, {tokens} and
// {slots} are the prefixed table names; {now} is UTC_TIMESTAMP(6), the
// session's clock at the statement's start (SET @@timestamp moves it), or
// with Defects.ClientClockExpiry a parameter holding the client's clock.
// Lock keys and tokens are VARBINARY: compared byte for byte.
//
// Every statement finds its rows by primary key, and no table has another
// index, so that InnoDB locks primary-key records only, and a transaction
// that locks several rows takes them in one order: master row, then token
// rows; or slot row, then (fencing) the key's row. (With an index on
// (lock_key, expires), an acquire's DELETE of expired rows, which locks the
// index entry and then the row, deadlocked with a concurrent release, which
// locks the row and then the index entry: error 1213.) That is also why a
// row-per-slot token carries its slot's number.
const (
	createKeys = "CREATE TABLE IF NOT EXISTS {keys} (" +
		"lock_key VARBINARY(255) NOT NULL PRIMARY KEY, " +
		"max_count INT NOT NULL, " +
		"design VARCHAR(16) NOT NULL, " +
		"fence BIGINT NOT NULL DEFAULT 0" +
		") ENGINE=InnoDB"
	createTokens = "CREATE TABLE IF NOT EXISTS {tokens} (" +
		"lock_key VARBINARY(255) NOT NULL, " +
		"token VARBINARY(36) NOT NULL, " +
		"expires DATETIME(6) NOT NULL, " +
		"fence BIGINT NOT NULL DEFAULT 0, " +
		"refreshes BIGINT NOT NULL DEFAULT 0, " +
		"PRIMARY KEY (lock_key, token)" +
		") ENGINE=InnoDB"
	createSlots = "CREATE TABLE IF NOT EXISTS {slots} (" +
		"lock_key VARBINARY(255) NOT NULL, " +
		"lock_num INT NOT NULL, " +
		"token VARBINARY(48) NULL, " +
		"expires DATETIME(6) NULL, " +
		"fence BIGINT NOT NULL DEFAULT 0, " +
		"refreshes BIGINT NOT NULL DEFAULT 0, " +
		"PRIMARY KEY (lock_key, lock_num)" +
		") ENGINE=InnoDB"
	dropAll = "DROP TABLE IF EXISTS {keys}, {tokens}, {slots}"

	// The key's agreed max and design; setting them up.
	selectKey = "SELECT max_count, design FROM {keys} WHERE lock_key = ?"
	insertKey = "INSERT IGNORE INTO {keys} (lock_key, max_count, design, fence) VALUES (?, ?, ?, 0)"
	// insertSlots is followed by ", (?, 1), ..., (?, max-1)".
	insertSlots      = "INSERT INTO {slots} (lock_key, lock_num) VALUES (?, 0)"
	insertSlotsMixed = "INSERT IGNORE INTO {slots} (lock_key, lock_num) VALUES (?, 0)"
	countSlots       = "SELECT COUNT(*) FROM {slots} WHERE lock_key = ?"

	// The fence counter: LAST_INSERT_ID(expr) makes the OK packet carry the
	// new value, so one statement both increments and reads it.
	nextFence = "UPDATE {keys} SET fence = LAST_INSERT_ID(fence + 1) WHERE lock_key = ?"

	// Master-row acquire, under READ COMMITTED; refresh and release.
	lockMaster    = "SELECT max_count FROM {keys} WHERE lock_key = ? FOR UPDATE"
	deleteExpired = "DELETE FROM {tokens} WHERE lock_key = ? AND expires <= {now}"
	countLive     = "SELECT COUNT(*) FROM {tokens} WHERE lock_key = ? AND expires > {now}"
	insertToken   = "INSERT INTO {tokens} (lock_key, token, expires, fence) VALUES (?, ?, {now} + INTERVAL ? MICROSECOND, ?)"
	refreshToken  = "UPDATE {tokens} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND token = ? AND expires > {now}"
	releaseToken  = "DELETE FROM {tokens} WHERE lock_key = ? AND token = ? AND expires > {now}"

	// Row-per-slot acquire, under READ COMMITTED; refresh and release.
	pickSlot    = "SELECT lock_num FROM {slots} WHERE lock_key = ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1 FOR UPDATE SKIP LOCKED"
	takeSlot    = "UPDATE {slots} SET token = ?, expires = {now} + INTERVAL ? MICROSECOND, fence = ?, refreshes = 0 WHERE lock_key = ? AND lock_num = ?"
	refreshSlot = "UPDATE {slots} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND lock_num = ? AND token = ? AND expires > {now}"
	releaseSlot = "UPDATE {slots} SET token = NULL, expires = NULL WHERE lock_key = ? AND lock_num = ? AND token = ? AND expires > {now}"

	// The defects' variants. CountWithoutLock:
	readMaster = "SELECT max_count FROM {keys} WHERE lock_key = ?"
	// RefreshRevivesExpired and ReleaseAfterExpirySucceeds: no expiry test.
	refreshTokenAE = "UPDATE {tokens} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND token = ?"
	releaseTokenAE = "DELETE FROM {tokens} WHERE lock_key = ? AND token = ?"
	refreshSlotAE  = "UPDATE {slots} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND lock_num = ? AND token = ?"
	releaseSlotAE  = "UPDATE {slots} SET token = NULL, expires = NULL WHERE lock_key = ? AND lock_num = ? AND token = ?"
	// MixedMax (row-per-slot): only the rows below the caller's max.
	pickSlotMixed = "SELECT lock_num FROM {slots} WHERE lock_key = ? AND lock_num < ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1 FOR UPDATE SKIP LOCKED"
	// NoSkipLocked, alone and with MixedMax: no row lock.
	peekSlot      = "SELECT lock_num FROM {slots} WHERE lock_key = ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1"
	peekSlotMixed = "SELECT lock_num FROM {slots} WHERE lock_key = ? AND lock_num < ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1"

	slotValuesMore = ", (?, "
)

// now marks, among a statement's arguments, the place of a {now}.
type nowMark struct{}

var now nowMark

// stmt fills in a statement's table names and clock. The arguments list a
// `now` wherever the text has {now}, in the same order: with the database's
// clock those are dropped; with Defects.ClientClockExpiry each becomes the
// client's clock, read once per statement.
func (s *Semaphore) stmt(q string, args ...any) (string, []any) {
	q = s.tables.Replace(q)
	if !s.o.Defects.ClientClockExpiry {
		out := args[:0:0]
		for _, a := range args {
			if a != now {
				out = append(out, a)
			}
		}
		return strings.ReplaceAll(q, "{now}", "UTC_TIMESTAMP(6)"), out
	}
	clock := time.Now
	if s.o.Defects.Now != nil {
		clock = s.o.Defects.Now
	}
	// A string, not a time.Time: the driver would convert a time.Time to
	// the DSN's loc, and UTC_TIMESTAMP is UTC whatever the DSN says.
	t := clock().UTC().Format("2006-01-02 15:04:05.000000")
	out := make([]any, len(args))
	for i, a := range args {
		if a == now {
			a = t
		}
		out[i] = a
	}
	return strings.ReplaceAll(q, "{now}", "?"), out
}

// slotRows is insertSlots (or insertSlotsMixed) for rows 0..max-1 of key.
func (s *Semaphore) slotRows(first, key string, max int) (string, []any) {
	var b strings.Builder
	b.WriteString(first)
	args := make([]any, 0, max)
	args = append(args, key)
	for i := 1; i < max; i++ {
		b.WriteString(slotValuesMore)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(")")
		args = append(args, key)
	}
	return s.stmt(b.String(), args...)
}
