package mariadbsim

import (
	"sort"
	"strconv"
	"strings"
)

// The three table shapes dbsem creates. A table's shape follows from the
// end of its name (dbsem's {keys}, {tokens}, {slots}); its columns are
// those of dbsem's CREATE TABLE statements, and its primary key orders its
// rows as InnoDB's clustered index does (VARBINARY byte by byte, then the
// second column).
type shape uint8

const (
	keysShape   shape = iota // (lock_key) max_count, design, fence
	tokensShape              // (lock_key, token) expires, fence, refreshes
	slotsShape               // (lock_key, lock_num) token NULL, expires NULL, fence, refreshes
)

var shapeSuffix = [...]string{keysShape: "keys", tokensShape: "tokens", slotsShape: "slots"}

// A table is one table's rows in primary-key order: committed rows, rows
// an open transaction inserted (invisible to others, but there, as InnoDB's
// index holds them), and rows it deleted (still visible to others).
type table struct {
	name    string
	shape   shape
	rows    []*row
	dropped bool
}

// A pkey is a primary key: lock_key and, by shape, the token (sub) or the
// slot's number (num); or sup, the supremum, after every record (gap
// locks after the last record are on it).
type pkey struct {
	key string
	sub string
	num int64
	sup bool
}

func (a pkey) less(b pkey) bool {
	if a.sup || b.sup {
		return !a.sup && b.sup
	}
	if a.key != b.key {
		return a.key < b.key
	}
	if a.sub != b.sub {
		return a.sub < b.sub
	}
	return a.num < b.num
}

// entry is the key as error 1062 quotes it: its parts joined by '-'.
func (k pkey) entry(s shape) string {
	switch s {
	case tokensShape:
		return k.key + "-" + k.sub
	case slotsShape:
		return k.key + "-" + strconv.FormatInt(k.num, 10)
	}
	return k.key
}

// A row is one record of the clustered index. cur is the committed
// version (nil: none, the row is an uncommitted insert, or a ghost). While
// a transaction has changed the row, writer is that transaction and next
// its version (nil: it deleted the row); row locks guarantee at most one
// writer. A committed delete leaves a ghost (no version, no writer: the
// delete-marked record) while the row's key is locked, or for good with
// Options.HoldPurge (see World.purge); a rolled-back insert's record goes
// at once (fresh), and a rolled-back insert over a ghost leaves the ghost.
type row struct {
	tb     *table
	k      pkey
	cur    *rowVal
	next   *rowVal
	writer *trx
	fresh  bool // its writer inserted it where there was no record
}

// A rowVal is a version of a row: the columns of every shape, those of
// other shapes unused. Datetimes are microseconds since the Unix epoch.
type rowVal struct {
	maxCount  int64
	design    string
	fence     int64
	token     string
	hasToken  bool // token IS NOT NULL
	expires   int64
	hasExpiry bool // expires IS NOT NULL
	refreshes int64
}

// sameSize says whether v and o take the same room in a record: the same
// NULLs, and tokens of one length (the other columns are of fixed size,
// or, as design, never updated).
func (v *rowVal) sameSize(o *rowVal) bool {
	return v.hasToken == o.hasToken && len(v.token) == len(o.token) && v.hasExpiry == o.hasExpiry
}

// visible is the version t reads: its own change if it made one, else the
// latest committed version (READ COMMITTED, and REPEATABLE READ for the
// single-statement transactions that use it here).
func (r *row) visible(t *trx) *rowVal {
	if r.writer != nil && r.writer == t {
		return r.next
	}
	return r.cur
}

// search returns the index of the first row whose key is not less than k.
func (tb *table) search(k pkey) int {
	return sort.Search(len(tb.rows), func(i int) bool { return !tb.rows[i].k.less(k) })
}

// find returns the row with key k, or nil.
func (tb *table) find(k pkey) *row {
	i := tb.search(k)
	if i < len(tb.rows) && tb.rows[i].k == k {
		return tb.rows[i]
	}
	return nil
}

// A resume says where a scan of a key's rows goes on: from the key's
// first row, at a given row (the one it stopped to wait for: a cursor
// does not go back, so rows inserted before it meanwhile are not seen),
// or after it (the row it last had).
type resume uint8

const (
	fromFirst resume = iota
	atRow
	afterRow
)

// scan returns the first row of lock_key key where the scan goes on from
// k, or nil.
func (tb *table) scan(key string, k pkey, how resume) *row {
	i := tb.search(pkey{key: key})
	if how != fromFirst {
		i = tb.search(k)
		if how == afterRow && i < len(tb.rows) && tb.rows[i].k == k {
			i++
		}
	}
	if i < len(tb.rows) && tb.rows[i].k.key == key {
		return tb.rows[i]
	}
	return nil
}

// next is the key of the first record after k (a ghost, an uncommitted
// insert: any record), or the supremum.
func (tb *table) next(k pkey) pkey {
	i := tb.search(k)
	if i < len(tb.rows) && tb.rows[i].k == k {
		i++
	}
	if i < len(tb.rows) {
		return tb.rows[i].k
	}
	return pkey{sup: true}
}

func (tb *table) insert(r *row) {
	i := tb.search(r.k)
	tb.rows = append(tb.rows, nil)
	copy(tb.rows[i+1:], tb.rows[i:])
	tb.rows[i] = r
}

// remove takes r out of the index if it is still there.
func (tb *table) remove(r *row) {
	i := tb.search(r.k)
	if i < len(tb.rows) && tb.rows[i] == r {
		copy(tb.rows[i:], tb.rows[i+1:])
		tb.rows[len(tb.rows)-1] = nil
		tb.rows = tb.rows[:len(tb.rows)-1]
	}
}

// committed counts the table's committed rows.
func (tb *table) committed() int {
	n := 0
	for _, r := range tb.rows {
		if r.cur != nil {
			n++
		}
	}
	return n
}

// tableNamed returns the table called name, or nil.
func (w *World) tableNamed(name string) *table {
	return w.tables[name]
}

// createTable creates the table name of shape s unless it exists.
func (w *World) createTable(name string, s shape) bool {
	if w.tables[name] != nil {
		return false
	}
	tb := &table{name: name, shape: s}
	w.tables[name] = tb
	w.tableOrder = append(w.tableOrder, tb)
	return true
}

// dropTable removes the table name, if it exists.
func (w *World) dropTable(name string) bool {
	tb := w.tables[name]
	if tb == nil {
		return false
	}
	tb.dropped = true
	delete(w.tables, name)
	for i, t := range w.tableOrder {
		if t == tb {
			w.tableOrder = append(w.tableOrder[:i], w.tableOrder[i+1:]...)
			break
		}
	}
	return true
}

// Rows returns the number of committed rows of every table whose name
// starts with prefix: what a run left behind, for leak checks. Rows that
// open transactions inserted but have not committed are not counted.
func (w *World) Rows(prefix string) map[string]int {
	out := map[string]int{}
	for _, tb := range w.tableOrder {
		if strings.HasPrefix(tb.name, prefix) {
			out[tb.name] = tb.committed()
		}
	}
	return out
}
