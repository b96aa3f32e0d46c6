package mariadbsim

import (
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The statements the server knows: every one dbsem sends (sql.go), in each
// of its forms (the database's clock, UTC_TIMESTAMP(6), or with
// Defects.ClientClockExpiry a parameter), and the ones database/sql and
// go-sql-driver/mysql send around them (SET TRANSACTION ISOLATION LEVEL
// READ COMMITTED, START TRANSACTION, COMMIT, ROLLBACK). A statement is
// recognised by its text with whitespace collapsed and the table names'
// common prefix taken out; any other text is an error that names it.

// A kind is what Counters counts a statement as.
type kind uint8

const (
	kSelect kind = iota
	kInsert
	kUpdate
	kDelete
	kBegin
	kCommit
	kRollback
	kOther
)

// A template is one statement of dbsem's, written as sql.go writes it:
// {keys}, {tokens}, {slots} for the tables, {now} for the clock.
type template struct {
	name   string
	text   string
	params string // the names of its ? and {now}, in order
	names  []string
	kind   kind
	txn    bool     // runs in a transaction (its session's, or its own)
	intent bool     // locks rows: takes an IX lock on its table
	multi  bool     // INSERT of rows "(?, n)", as many as it lists
	cols   []string // a SELECT's columns
	exec   execFunc // carries it out
}

// A variant is a template with {now} written one way.
type variant struct {
	tpl         *template
	clientClock bool // {now} is a ?, the client's clock
	nums        []int64
	nargs       int
}

var templates = []*template{
	{name: "createKeys", kind: kOther, exec: create(keysShape), text: "CREATE TABLE IF NOT EXISTS {keys} (" +
		"lock_key VARBINARY(255) NOT NULL PRIMARY KEY, max_count INT NOT NULL, design VARCHAR(16) NOT NULL, " +
		"fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"},
	{name: "createTokens", kind: kOther, exec: create(tokensShape), text: "CREATE TABLE IF NOT EXISTS {tokens} (" +
		"lock_key VARBINARY(255) NOT NULL, token VARBINARY(36) NOT NULL, expires DATETIME(6) NOT NULL, " +
		"fence BIGINT NOT NULL DEFAULT 0, refreshes BIGINT NOT NULL DEFAULT 0, " +
		"PRIMARY KEY (lock_key, token)) ENGINE=InnoDB"},
	{name: "createSlots", kind: kOther, exec: create(slotsShape), text: "CREATE TABLE IF NOT EXISTS {slots} (" +
		"lock_key VARBINARY(255) NOT NULL, lock_num INT NOT NULL, token VARBINARY(48) NULL, " +
		"expires DATETIME(6) NULL, fence BIGINT NOT NULL DEFAULT 0, refreshes BIGINT NOT NULL DEFAULT 0, " +
		"PRIMARY KEY (lock_key, lock_num)) ENGINE=InnoDB"},
	{name: "dropAll", kind: kOther, exec: execDrop, text: "DROP TABLE IF EXISTS {keys}, {tokens}, {slots}"},

	{name: "selectKey", kind: kSelect, cols: []string{"max_count", "design"}, txn: true, exec: selectRow(keysShape, maxCountDesign), params: "key",
		text: "SELECT max_count, design FROM {keys} WHERE lock_key = ?"},
	{name: "insertKey", kind: kInsert, txn: true, exec: insertRow(keysShape, true, newKey), params: "key max design",
		text: "INSERT IGNORE INTO {keys} (lock_key, max_count, design, fence) VALUES (?, ?, ?, 0)"},
	{name: "insertSlots", kind: kInsert, txn: true, multi: true, exec: on(slotsShape, insertSlots(false)),
		text: "INSERT INTO {slots} (lock_key, lock_num) VALUES "},
	{name: "insertSlotsMixed", kind: kInsert, txn: true, multi: true, exec: on(slotsShape, insertSlots(true)),
		text: "INSERT IGNORE INTO {slots} (lock_key, lock_num) VALUES "},
	{name: "countSlots", kind: kSelect, cols: []string{"COUNT(*)"}, txn: true, exec: countRows(slotsShape, anyRow), params: "key",
		text: "SELECT COUNT(*) FROM {slots} WHERE lock_key = ?"},
	{name: "nextFence", kind: kUpdate, txn: true, exec: updateRow(keysShape, anyRow, nextFence), params: "key",
		text: "UPDATE {keys} SET fence = LAST_INSERT_ID(fence + 1) WHERE lock_key = ?"},

	{name: "lockMaster", kind: kSelect, cols: []string{"max_count"}, txn: true, exec: selectForUpdate(keysShape, maxCount), params: "key",
		text: "SELECT max_count FROM {keys} WHERE lock_key = ? FOR UPDATE"},
	{name: "readMaster", kind: kSelect, cols: []string{"max_count"}, txn: true, exec: selectRow(keysShape, maxCount), params: "key",
		text: "SELECT max_count FROM {keys} WHERE lock_key = ?"},
	{name: "deleteExpired", kind: kDelete, txn: true, exec: deleteRows(tokensShape, expiredAt(0)), params: "key now",
		text: "DELETE FROM {tokens} WHERE lock_key = ? AND expires <= {now}"},
	{name: "countLive", kind: kSelect, cols: []string{"COUNT(*)"}, txn: true, exec: countRows(tokensShape, liveAt(0)), params: "key now",
		text: "SELECT COUNT(*) FROM {tokens} WHERE lock_key = ? AND expires > {now}"},
	{name: "insertToken", kind: kInsert, txn: true, exec: insertRow(tokensShape, false, newToken), params: "key token now us fence",
		text: "INSERT INTO {tokens} (lock_key, token, expires, fence) VALUES (?, ?, {now} + INTERVAL ? MICROSECOND, ?)"},
	{name: "refreshToken", kind: kUpdate, txn: true, exec: updateRow(tokensShape, liveAt(1), refresh), params: "now us key token now",
		text: "UPDATE {tokens} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND token = ? AND expires > {now}"},
	{name: "releaseToken", kind: kDelete, txn: true, exec: deleteRow(tokensShape, liveAt(0)), params: "key token now",
		text: "DELETE FROM {tokens} WHERE lock_key = ? AND token = ? AND expires > {now}"},
	{name: "refreshTokenAE", kind: kUpdate, txn: true, exec: updateRow(tokensShape, anyRow, refresh), params: "now us key token",
		text: "UPDATE {tokens} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND token = ?"},
	{name: "releaseTokenAE", kind: kDelete, txn: true, exec: deleteRow(tokensShape, anyRow), params: "key token",
		text: "DELETE FROM {tokens} WHERE lock_key = ? AND token = ?"},

	{name: "pickSlot", kind: kSelect, cols: []string{"lock_num"}, txn: true, exec: on(slotsShape, pickSlot(false, true)), params: "key now",
		text: "SELECT lock_num FROM {slots} WHERE lock_key = ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1 FOR UPDATE SKIP LOCKED"},
	{name: "pickSlotMixed", kind: kSelect, cols: []string{"lock_num"}, txn: true, exec: on(slotsShape, pickSlot(true, true)), params: "key max now",
		text: "SELECT lock_num FROM {slots} WHERE lock_key = ? AND lock_num < ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1 FOR UPDATE SKIP LOCKED"},
	{name: "peekSlot", kind: kSelect, cols: []string{"lock_num"}, txn: true, exec: on(slotsShape, pickSlot(false, false)), params: "key now",
		text: "SELECT lock_num FROM {slots} WHERE lock_key = ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1"},
	{name: "peekSlotMixed", kind: kSelect, cols: []string{"lock_num"}, txn: true, exec: on(slotsShape, pickSlot(true, false)), params: "key max now",
		text: "SELECT lock_num FROM {slots} WHERE lock_key = ? AND lock_num < ? AND (token IS NULL OR expires <= {now}) ORDER BY lock_num LIMIT 1"},
	{name: "takeSlot", kind: kUpdate, txn: true, exec: updateRow(slotsShape, anyRow, takeSlot), params: "token now us fence key num",
		text: "UPDATE {slots} SET token = ?, expires = {now} + INTERVAL ? MICROSECOND, fence = ?, refreshes = 0 WHERE lock_key = ? AND lock_num = ?"},
	{name: "refreshSlot", kind: kUpdate, txn: true, exec: updateRow(slotsShape, liveHolder(1), refresh), params: "now us key num token now",
		text: "UPDATE {slots} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND lock_num = ? AND token = ? AND expires > {now}"},
	{name: "releaseSlot", kind: kUpdate, txn: true, exec: updateRow(slotsShape, liveHolder(0), freeSlot), params: "key num token now",
		text: "UPDATE {slots} SET token = NULL, expires = NULL WHERE lock_key = ? AND lock_num = ? AND token = ? AND expires > {now}"},
	{name: "refreshSlotAE", kind: kUpdate, txn: true, exec: updateRow(slotsShape, holder, refresh), params: "now us key num token",
		text: "UPDATE {slots} SET expires = {now} + INTERVAL ? MICROSECOND, refreshes = refreshes + 1 WHERE lock_key = ? AND lock_num = ? AND token = ?"},
	{name: "releaseSlotAE", kind: kUpdate, txn: true, exec: updateRow(slotsShape, holder, freeSlot), params: "key num token",
		text: "UPDATE {slots} SET token = NULL, expires = NULL WHERE lock_key = ? AND lock_num = ? AND token = ?"},

	// What database/sql's BeginTx (with sql.LevelReadCommitted), Commit and
	// Rollback make go-sql-driver/mysql send.
	{name: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", kind: kOther, exec: execSetISO,
		text: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"},
	{name: "START TRANSACTION", kind: kBegin, exec: execBegin, text: "START TRANSACTION"},
	{name: "COMMIT", kind: kCommit, exec: execCommit, text: "COMMIT"},
	{name: "ROLLBACK", kind: kRollback, exec: execRollback, text: "ROLLBACK"},
}

// byText maps a normalized text to its variant; multi maps the start of
// a multi-row INSERT to its template.
var (
	byText = map[string]*variant{}
	multi  []multiStart
)

type multiStart struct {
	start string
	tpl   *template
}

func init() {
	for _, t := range templates {
		t.names = strings.Fields(t.params)
		t.intent = t.txn && (t.kind != kSelect || strings.Contains(t.text, "FOR UPDATE"))
		if t.multi {
			multi = append(multi, multiStart{normalize(t.text) + " ", t})
			continue
		}
		server := strings.ReplaceAll(t.text, "{now}", "UTC_TIMESTAMP(6)")
		add(server, &variant{tpl: t, nargs: strings.Count(server, "?")})
		if strings.Contains(t.text, "{now}") {
			client := strings.ReplaceAll(t.text, "{now}", "?")
			add(client, &variant{tpl: t, clientClock: true, nargs: strings.Count(client, "?")})
		}
	}
}

func add(text string, v *variant) {
	text = normalize(text)
	if byText[text] != nil {
		panic("sqlsim: two statements read " + text)
	}
	byText[text] = v
}

// normalize collapses runs of white space into one space.
func normalize(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// A parsed statement: its variant and its tables' prefix.
type parsed struct {
	v      *variant
	prefix string
	tables [len(shapeSuffix)]string // the prefix's table of each shape
}

// table is the name of the statement's table of shape s.
func (p *parsed) table(s shape) string { return p.tables[s] }

// abstract normalizes q and replaces its backquoted table names
// `<prefix>keys` (tokens, slots) by {keys} ({tokens}, {slots}), returning
// the common prefix.
func abstract(q string) (string, string, error) {
	q = normalize(q)
	var b strings.Builder
	prefix, seen := "", false
	for {
		i := strings.IndexByte(q, '`')
		if i < 0 {
			b.WriteString(q)
			break
		}
		j := strings.IndexByte(q[i+1:], '`')
		if j < 0 {
			return "", "", fmt.Errorf("unbalanced backquote")
		}
		ident := q[i+1 : i+1+j]
		suffix := ""
		for _, s := range shapeSuffix {
			if strings.HasSuffix(ident, s) {
				suffix = s
			}
		}
		p := strings.TrimSuffix(ident, suffix)
		if suffix == "" || !validPrefix(p) || (seen && p != prefix) {
			return "", "", fmt.Errorf("table %q is not one of dbsem's", ident)
		}
		prefix, seen = p, true
		b.WriteString(q[:i])
		b.WriteString("{" + suffix + "}")
		q = q[i+2+j:]
	}
	return b.String(), prefix, nil
}

func validPrefix(p string) bool {
	if len(p) > 50 {
		return false
	}
	for _, c := range []byte(p) {
		if !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// parse recognises q, through a cache that every World shares: what a
// statement is depends on its text alone, and a parsed statement is never
// changed, while each World (each plan) would otherwise parse the same
// few statements again.
func parse(q string) (*parsed, error) {
	parses.Lock()
	p, ok := parses.m[q]
	parses.Unlock()
	if ok {
		return p, nil
	}
	norm, prefix, err := abstract(q)
	if err != nil {
		return nil, fmt.Errorf("sqlsim: unknown statement %q: %v", normalize(q), err)
	}
	v := byText[norm]
	if v == nil {
		v = parseMulti(norm)
	}
	if v == nil {
		return nil, fmt.Errorf("sqlsim: unknown statement %q (not one dbsem sends)", norm)
	}
	p = &parsed{v: v, prefix: prefix}
	for s, suffix := range shapeSuffix {
		p.tables[s] = prefix + suffix
	}
	parses.Lock()
	if len(parses.m) < 1024 {
		parses.m[q] = p
	}
	parses.Unlock()
	return p, nil
}

// parses is parse's cache, by statement text.
var parses = struct {
	sync.Mutex
	m map[string]*parsed
}{m: map[string]*parsed{}}

// parseMulti recognises insertSlots and insertSlotsMixed: their start,
// then "(?, n)" rows separated by ", ".
func parseMulti(norm string) *variant {
	for _, m := range multi {
		t := m.tpl
		rest, ok := strings.CutPrefix(norm, m.start)
		if !ok {
			continue
		}
		var nums []int64
		for i, tuple := range strings.Split(rest, ", (") {
			if i == 0 {
				tuple, ok = strings.CutPrefix(tuple, "(")
				if !ok {
					return nil
				}
			}
			n, ok := strings.CutPrefix(tuple, "?, ")
			if !ok {
				return nil
			}
			n, ok = strings.CutSuffix(n, ")")
			num, err := strconv.ParseInt(n, 10, 64)
			if !ok || err != nil {
				return nil
			}
			nums = append(nums, num)
		}
		return &variant{tpl: t, nums: nums, nargs: len(nums)}
	}
	return nil
}

// A binding is a statement's arguments by name.
type binding struct {
	raw                []driver.Value
	key, token, design string
	max, us, fence     int64
	num                int64
	now                []int64
	keys               []string
}

// bind names args after v's parameters.
func bind(v *variant, args []driver.Value) (binding, error) {
	b := binding{raw: args}
	if len(args) != v.nargs {
		return b, fmt.Errorf("takes %d arguments, got %d", v.nargs, len(args))
	}
	if v.tpl.multi {
		for _, a := range args {
			s, err := asString(a)
			if err != nil {
				return b, err
			}
			b.keys = append(b.keys, s)
		}
		return b, nil
	}
	i := 0
	for _, name := range v.tpl.names {
		if name == "now" && !v.clientClock {
			continue
		}
		a := args[i]
		i++
		var err error
		switch name {
		case "key":
			b.key, err = asString(a)
		case "token":
			b.token, err = asString(a)
		case "design":
			b.design, err = asString(a)
		case "max":
			b.max, err = asInt(a)
		case "us":
			b.us, err = asInt(a)
		case "fence":
			b.fence, err = asInt(a)
		case "num":
			b.num, err = asInt(a)
		case "now":
			var t int64
			t, err = asDatetime(a)
			b.now = append(b.now, t)
		}
		if err != nil {
			return b, fmt.Errorf("argument %d (%s): %v", i, name, err)
		}
	}
	return b, nil
}

func asString(v driver.Value) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("%T is not a string", v)
}

func asInt(v driver.Value) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	}
	return 0, fmt.Errorf("%T is not an integer", v)
}

// asDatetime reads a DATETIME(6) parameter: a string as the client clock
// defect formats it (or with fewer fractional digits), or a time.Time;
// microseconds since the Unix epoch, UTC.
func asDatetime(v driver.Value) (int64, error) {
	switch v := v.(type) {
	case time.Time:
		return v.UTC().Truncate(time.Microsecond).UnixMicro(), nil
	case string:
		t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", v, time.UTC)
		if err != nil {
			return 0, fmt.Errorf("%q is not a datetime", v)
		}
		return t.UnixMicro(), nil
	case []byte:
		return asDatetime(string(v))
	}
	return 0, fmt.Errorf("%T is not a datetime", v)
}

// Executors. A template's exec carries the statement out, and is called
// again from the start each time a lock it waits for is granted: what it
// did before the wait (its table's IX lock, the locks it holds, a scan's
// place in r.pos, a multi-row INSERT's in r.idx) is found done. Most
// statements work on one of dbsem's tables, and most of those on the one
// row their whole primary key names, so the executors are built from a
// few constructors (selectRow, selectForUpdate, insertRow, updateRow,
// deleteRow; countRows and deleteRows for a key's rows) and each template
// says only what is its own: its table, its WHERE beyond the key, its SET.

// An execFunc carries a statement out: blocked means it waits for a
// lock, err ends it.
type execFunc func(r *stmtRun) (blocked bool, err error)

// A where is a statement's condition on a row's latest version beyond
// the primary key that found it.
type where func(r *stmtRun, v *rowVal) bool

// A setter is an UPDATE's SET: the row's new columns from its old ones.
type setter func(r *stmtRun, v rowVal) rowVal

// on is a statement on the table of shape s: it finds the table (error
// 1146 if there is none) and runs f on it.
func on(s shape, f func(r *stmtRun, tb *table) (bool, error)) execFunc {
	return func(r *stmtRun) (bool, error) {
		tb, err := r.table(s)
		if err != nil {
			return false, err
		}
		return f(r, tb)
	}
}

// table is the statement's table of shape s, or error 1146. A statement
// that locks rows takes the table's IX lock.
func (r *stmtRun) table(s shape) (*table, error) {
	name := r.parsed.table(s)
	if tb := r.w.tableNamed(name); tb != nil {
		r.w.attach(r.s)
		if r.v.tpl.intent {
			r.t.intend(tb)
		}
		return tb, nil
	}
	return nil, errNoTable(name)
}

// rowKey is the primary key the statement's parameters name in a table
// of shape s: the lock_key, with the token or the slot's number.
func (r *stmtRun) rowKey(s shape) pkey {
	switch s {
	case tokensShape:
		return pkey{key: r.b.key, sub: r.b.token}
	case slotsShape:
		return pkey{key: r.b.key, num: r.b.num}
	}
	return pkey{key: r.b.key}
}

// result starts the statement's result set, empty.
func (r *stmtRun) result() {
	r.cols = r.v.tpl.cols
	r.rows = r.rows[:0:0]
}

// DDL: an implicit COMMIT, then the change. Metadata locks are not
// modelled: a DROP does not wait for transactions using the table.

func create(s shape) execFunc {
	return func(r *stmtRun) (bool, error) {
		r.implicitCommit()
		if r.w.createTable(r.prefix+shapeSuffix[s], s) {
			r.w.attach(r.s)
		}
		return false, nil
	}
}

func execDrop(r *stmtRun) (bool, error) {
	r.implicitCommit()
	for _, s := range shapeSuffix {
		if r.w.dropTable(r.prefix + s) {
			r.w.attach(r.s)
		}
	}
	return false, nil
}

func (r *stmtRun) implicitCommit() {
	if t := r.s.trx; t != nil {
		r.w.commit(t)
		r.s.trx = nil
	}
}

// Transactions.

func execSetISO(r *stmtRun) (bool, error) {
	if r.s.trx != nil {
		return false, errTxCharacteristics()
	}
	r.s.nextISO, r.s.setISO = readCommitted, true
	return false, nil
}

func execBegin(r *stmtRun) (bool, error) {
	r.implicitCommit()
	r.s.trx = r.w.newTrx(r.s, r.s.takeISO(), false)
	return false, nil
}

func execCommit(r *stmtRun) (bool, error) {
	r.implicitCommit()
	if p := r.p; p != nil && p.dropCommit {
		p.dropCommit = false
		r.lostReply = true
	}
	return false, nil
}

func execRollback(r *stmtRun) (bool, error) {
	if t := r.s.trx; t != nil {
		r.w.rollback(t)
		r.s.trx = nil
	}
	return false, nil
}

// Statements on the one row their primary key names.

// selectRow is a consistent read of the row: the latest committed
// version, or the transaction's own; cols are what it returns of it.
func selectRow(s shape, cols func(*rowVal) []driver.Value) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		r.result()
		if row := tb.find(r.rowKey(s)); row != nil {
			if v := row.visible(r.t); v != nil {
				r.rows = append(r.rows, cols(v))
			}
		}
		return false, nil
	})
}

// selectForUpdate is SELECT ... FOR UPDATE of the row: it waits for the
// row's lock, then reads its latest version.
func selectForUpdate(s shape, cols func(*rowVal) []driver.Value) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		r.result()
		_, v, blocked, err := r.claim(tb, r.rowKey(s), anyRow)
		if v != nil {
			r.rows = append(r.rows, cols(v))
		}
		return blocked, err
	})
}

// insertRow is an INSERT of the row newRow makes, at the key the
// statement names; with ignore, INSERT IGNORE.
func insertRow(s shape, ignore bool, newRow func(r *stmtRun) *rowVal) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		return r.insert(tb, r.rowKey(s), newRow(r), ignore)
	})
}

// updateRow is an UPDATE of the row where match holds. A change that
// leaves every column as it was is matched but not counted (MariaDB's
// default: affected rows are changed rows).
func updateRow(s shape, match where, set setter) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		row, v, blocked, err := r.claim(tb, r.rowKey(s), match)
		if row == nil {
			return blocked, err
		}
		if nv := set(r, *v); nv != *v {
			changed := nv // only a change is a new version
			if !v.sameSize(&changed) {
				r.w.rebuilt(tb, row.k)
			}
			r.w.write(r.t, row, &changed)
			r.affected++
		}
		return false, nil
	})
}

// deleteRow is a DELETE of the row where match holds.
func deleteRow(s shape, match where) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		row, _, blocked, err := r.claim(tb, r.rowKey(s), match)
		if row != nil {
			r.w.write(r.t, row, nil)
			r.affected++
		}
		return blocked, err
	})
}

// Statements on all the rows of the key (lock_key = ?).

// countRows is SELECT COUNT(*) of the key's rows where match holds, a
// consistent read.
func countRows(s shape, match where) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		var n int64
		for i := tb.search(pkey{key: r.b.key}); i < len(tb.rows) && tb.rows[i].k.key == r.b.key; i++ {
			if v := tb.rows[i].visible(r.t); v != nil && match(r, v) {
				n++
			}
		}
		r.result()
		r.rows = append(r.rows, []driver.Value{n})
		return false, nil
	})
}

// deleteRows is a DELETE of the key's rows where match holds: it scans
// them in primary-key order, locking each (READ COMMITTED: a DELETE waits
// even for a row it will not delete; only UPDATE reads
// semi-consistently), deleting the ones that match and releasing the
// others. After a wait it goes on at the row it waited for: rows
// inserted before that one meanwhile are not seen (MariaDB's cursor does
// not go back).
func deleteRows(s shape, match where) execFunc {
	return on(s, func(r *stmtRun, tb *table) (bool, error) {
		for {
			next := tb.scan(r.b.key, r.pos, r.how)
			if next == nil {
				return false, nil
			}
			row, _, blocked, err := r.claim(tb, next.k, match)
			if blocked || err != nil {
				r.pos, r.how = next.k, atRow
				return blocked, err
			}
			r.pos, r.how = next.k, afterRow
			if row != nil {
				r.w.write(r.t, row, nil)
				r.affected++
			}
		}
	})
}

// The rows inserted, the columns returned, the WHEREs and the SETs of
// dbsem's statements.

func newKey(r *stmtRun) *rowVal {
	return &rowVal{maxCount: r.b.max, design: r.b.design}
}

func newToken(r *stmtRun) *rowVal {
	return &rowVal{expires: r.now(0) + r.b.us, hasExpiry: true, fence: r.b.fence}
}

func maxCount(v *rowVal) []driver.Value { return []driver.Value{v.maxCount} }

func maxCountDesign(v *rowVal) []driver.Value {
	return []driver.Value{v.maxCount, []byte(v.design)}
}

// anyRow is the primary key alone.
func anyRow(*stmtRun, *rowVal) bool { return true }

// unexpired is expires > now and expired expires <= now: false for a
// NULL expires, as in SQL (only a free slot has one).
func unexpired(v *rowVal, now int64) bool { return v.hasExpiry && v.expires > now }
func expired(v *rowVal, now int64) bool   { return v.hasExpiry && v.expires <= now }

// liveAt is expires > {now}, with the statement's i-th {now}.
func liveAt(i int) where {
	return func(r *stmtRun, v *rowVal) bool { return unexpired(v, r.now(i)) }
}

// expiredAt is expires <= {now}, with the statement's i-th {now}.
func expiredAt(i int) where {
	return func(r *stmtRun, v *rowVal) bool { return expired(v, r.now(i)) }
}

// holder is a slot's token = ?: the slot is the token's.
func holder(r *stmtRun, v *rowVal) bool { return v.hasToken && v.token == r.b.token }

// liveHolder is token = ? AND expires > {now}, with the i-th {now}.
func liveHolder(i int) where {
	return func(r *stmtRun, v *rowVal) bool { return holder(r, v) && unexpired(v, r.now(i)) }
}

// nextFence is SET fence = LAST_INSERT_ID(fence + 1): the OK packet
// carries the new fence.
func nextFence(r *stmtRun, v rowVal) rowVal {
	v.fence++
	r.lastID = v.fence
	return v
}

// refresh is SET expires = {now} + INTERVAL ? MICROSECOND, refreshes =
// refreshes + 1.
func refresh(r *stmtRun, v rowVal) rowVal {
	v.expires, v.hasExpiry = r.now(0)+r.b.us, true
	v.refreshes++
	return v
}

// takeSlot is SET token = ?, expires = {now} + INTERVAL ? MICROSECOND,
// fence = ?, refreshes = 0.
func takeSlot(r *stmtRun, v rowVal) rowVal {
	v.token, v.hasToken = r.b.token, true
	v.expires, v.hasExpiry = r.now(0)+r.b.us, true
	v.fence, v.refreshes = r.b.fence, 0
	return v
}

// freeSlot is SET token = NULL, expires = NULL.
func freeSlot(_ *stmtRun, v rowVal) rowVal {
	v.token, v.hasToken, v.expires, v.hasExpiry = "", false, 0, false
	return v
}

// Row-per-slot's own scans.

// insertSlots is the INSERT (with ignore, INSERT IGNORE) of the slot
// rows "(?, n)" the statement lists, in order; after a wait it goes on
// from r.idx, the row it waited at.
func insertSlots(ignore bool) func(r *stmtRun, tb *table) (bool, error) {
	return func(r *stmtRun, tb *table) (bool, error) {
		for ; r.idx < len(r.b.keys); r.idx++ {
			k := pkey{key: r.b.keys[r.idx], num: r.v.nums[r.idx]}
			if blocked, err := r.insert(tb, k, &rowVal{}, ignore); blocked || err != nil {
				return blocked, err
			}
		}
		return false, nil
	}
}

// pickSlot is the first free or expired slot row of the key (below max,
// with mixed), in lock_num order: with lock, FOR UPDATE SKIP LOCKED (a row
// another transaction has locked is passed over; one that does not match
// is locked, looked at and released), without, a consistent read. With
// mixed (lock_num < max: a range, not only the key's prefix) a locking
// scan that finds nothing also locks the record after the range before it
// sees the range is over, and lets it go (its lock struct stays: see
// trx.weight; checked against MariaDB 10.11).
func pickSlot(mixed, lock bool) func(r *stmtRun, tb *table) (bool, error) {
	return func(r *stmtRun, tb *table) (bool, error) {
		now := r.now(0)
		r.result()
		for i := tb.search(pkey{key: r.b.key}); i < len(tb.rows); i++ {
			row := tb.rows[i]
			if row.k.key != r.b.key || mixed && row.k.num >= r.b.max {
				if mixed && lock && r.tryLock(tb, row.k, lockX) {
					r.letGo(tb, row.k)
				}
				break
			}
			if r.passes(row) {
				continue
			}
			if lock && !r.tryLock(tb, row.k, lockX) {
				continue
			}
			if v := row.visible(r.t); v == nil || v.hasToken && !expired(v, now) {
				if lock {
					r.letGo(tb, row.k)
				}
				continue
			}
			if lock {
				r.keep(tb, row.k)
			}
			r.rows = append(r.rows, []driver.Value{row.k.num})
			break
		}
		return false, nil
	}
}

// Row operations shared by the statements.

// claim is how a locking statement gets a row it names by whole primary
// key: it locks the record at k exclusively, waiting for it, then reads
// the row's latest version. A row that matches is returned, its lock
// kept to the end of the transaction; none (there is no row, no longer
// one, it does not match, or it is a record the statement passes over
// unlocked) is nil, a lock taken let go under READ COMMITTED unless the
// statement waited for it. (InnoDB's semi-consistent read, by which a
// READ COMMITTED UPDATE does not wait for a locked row whose committed
// version does not match, is for range scans only; every UPDATE of
// dbsem's finds its row by whole primary key, and waits: checked against
// MariaDB 10.11.)
func (r *stmtRun) claim(tb *table, k pkey, match where) (row *row, v *rowVal, blocked bool, err error) {
	if found := tb.find(k); found == nil || r.passes(found) {
		return nil, nil, false, nil
	}
	if ok, err := r.lock(tb, k, lockX); !ok {
		return nil, nil, err == nil, err
	}
	if row = tb.find(k); row != nil {
		v = row.visible(r.t)
	}
	if v == nil || !match(r, v) {
		r.letGo(tb, k)
		return nil, nil, false, nil
	}
	r.keep(tb, k)
	return row, v, false, nil
}

// passes says whether a locking read or change passes over row without
// locking it: under READ COMMITTED, a ghost (a delete that has committed:
// nothing can bring it back). REPEATABLE READ locks it, and waits for it,
// as it would a live row; so does a duplicate's check (checked against
// MariaDB 10.11).
func (r *stmtRun) passes(row *row) bool {
	return row.cur == nil && row.writer == nil && r.t.iso == readCommitted
}

// insert inserts v at k and counts it. A row already at k is a duplicate
// unless it is deleted: checking takes a shared lock on it (waiting for a
// transaction that holds it, such as an uncommitted insert or delete),
// kept until the transaction ends; a duplicate is error 1062, or nothing
// with ignore (INSERT IGNORE). The new row is locked exclusively.
func (r *stmtRun) insert(tb *table, k pkey, v *rowVal, ignore bool) (blocked bool, err error) {
	if tb.find(k) != nil {
		if ok, err := r.lock(tb, k, lockS); !ok {
			return err == nil, err
		}
		if row := tb.find(k); row != nil && row.visible(r.t) != nil {
			r.keep(tb, k)
			if ignore {
				return false, nil
			}
			return false, errDuplicate(tb, k)
		}
	}
	lock := r.lock
	if tb.find(k) == nil {
		if ok, err := r.insertIntention(tb, k); !ok {
			return err == nil, err
		}
		lock = func(tb *table, k pkey, _ lockMode) (bool, error) { return r.lockNew(tb, k) }
	}
	if ok, err := lock(tb, k, lockX); !ok {
		return err == nil, err
	}
	rw := tb.find(k)
	if rw == nil {
		rw = &row{tb: tb, k: k, fresh: true}
		tb.insert(rw)
		r.w.inserted(tb, k)
	}
	r.w.write(r.t, rw, v)
	r.keep(tb, k)
	r.affected++
	return false, nil
}

// keyText is a record's key for the trace.
func keyText(tb *table, k pkey) string {
	if k.sup {
		return "(supremum)"
	}
	switch tb.shape {
	case tokensShape:
		return fmt.Sprintf("(%q, %q)", k.key, k.sub)
	case slotsShape:
		return fmt.Sprintf("(%q, %d)", k.key, k.num)
	}
	return fmt.Sprintf("(%q)", k.key)
}
