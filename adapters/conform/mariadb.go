package conform

import (
	"fmt"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/sim/mariadbsim"
)

// The database semaphore's differential: is sim/mariadbsim telling the truth
// about MariaDB? rapid draws sequences of the statements dbsem sends (see
// DBSeq and DrawDBSeq), each sequence runs on a fresh mariadbsim World and on
// a real MariaDB (tables of a prefix of its own, dropped afterwards), and
// every observation must be the same on both sides: the rows a query
// returns, rows affected and LAST_INSERT_ID of the others, error numbers,
// states and messages, whether a statement waits for a row lock, and how
// and when a wait ends (granted after another connection's COMMIT or
// ROLLBACK, or error 1213 when a deadlock makes its transaction the
// victim). A divergence is shrunk (rapid shrinks the draws, then steps
// are taken out of the sequence one by one while it still diverges at the
// same statement), replayed on MariaDB, and printed with both sides'
// outcomes (DBDivergence). MariaDB and MariaDBDifferential run it; the
// statements come from mariadbsim.Statements, which mariadbsim's tests hold to
// dbsem's sql.go word for word.
//
// A sequence, step by step. A step is one statement on one of 2-4
// connections (or "begin": SET TRANSACTION ISOLATION LEVEL READ COMMITTED
// then START TRANSACTION, as database/sql sends them for dbsem). After
// each step both sides wait until every connection is idle or waiting for
// a row lock: mariadbsim lets virtual time pass (a statement takes 100 µs of
// it); on MariaDB the harness waits until every statement still running
// shows LOCK WAIT, for a lock on one of the sequence's tables, in SHOW
// ENGINE INNODB STATUS (not information_schema.INNODB_TRX, a cache that
// polling keeps stale), twice, some milliseconds apart, when two or more
// wait (the window between a wait and its deadlock check). A statement
// still running then is observed as "waits", and its outcome is collected
// when it ends, with the step it ended in: "waits; ended at 7: n=1 id=0".
// A connection sends its steps in order: a step for a connection whose
// statement waits is held back and sent as soon as that statement ends
// (so the steps print out of order). A begin inside a transaction, and a
// locking range statement outside one (below), are not sent ("skipped:
// ..."), the same way on both sides. At the end, connections in a
// transaction roll back (rounds of ROLLBACK until no statement waits: the
// steps "end1", "end2", ...), and read-only probes on connection 0 read
// what every key was left with (the steps "probe").
//
// What the sequences cover: every design (master-row: lockMaster,
// readMaster, deleteExpired, countLive, insertToken, refreshToken,
// releaseToken and the defects' variants; row-per-slot: insertSlots and
// insertSlotsMixed of 1-4 rows, a row sometimes of another key,
// countSlots, pickSlot and pickSlotMixed (FOR UPDATE SKIP LOCKED),
// peekSlot and peekSlotMixed, takeSlot, refreshSlot, releaseSlot and
// variants; for both the fencing counter nextFence, selectKey and
// insertKey (INSERT IGNORE), CREATE TABLE IF NOT EXISTS at the start and
// again later (an implicit COMMIT), explicit READ COMMITTED transactions
// ending in COMMIT or ROLLBACK, autocommit statements between them);
// each connection running dbsem's operations (an acquire's transaction,
// refresh, release, a key's set-up, reads) with stray statements between,
// interleaved; three keys, "kk" next to "k" so that range scans meet a
// neighbour; tokens that exist, do not, or are another's; expiry by a
// client clock (datetimes as string parameters, exactly on the deadline, a
// microsecond either side) or by the database's UTC_TIMESTAMP(6)
// (deadlines an hour away or an hour past, so that no outcome depends on
// how long a sequence takes); lock waits on master rows, token and slot
// rows, deleted rows, uncommitted inserts, the fence counter, duplicate
// keys, and the gap locks a rolled-back insert leaves, granted by COMMIT
// or ROLLBACK of the holder, or ended by a deadlock, whose victim InnoDB
// picks by weight.
//
// What they leave out, and why:
//
//   - Lock wait timeouts (error 1205): how long a wait lasts is real time
//     on MariaDB; innodb_lock_wait_timeout is 30 s on both sides and no
//     wait lasts that long. sim/mariadbsim's TestMariaDB checks timeouts.
//   - InnoDB's purge: when it removes a deleted row's record (which is
//     locked, and waited for, like a live row's until then) is real time.
//     A read view held open during each sequence holds it off, and mariadbsim
//     runs with Options.HoldPurge; mariadbsim's own purge (a deleted row's
//     record goes once nobody holds or waits for its lock) is not
//     compared.
//   - The order in which MariaDB runs statements that go on at once (two
//     waiters one COMMIT frees, the waiters a deadlock's victim frees
//     beside the statement that closed the cycle): real time; mariadbsim runs
//     them in one order. Where MariaDB's outcome may have depended on it
//     and differs from mariadbsim's, the sequence runs there again, up to 5
//     times, and the sides agree if one run comes out as mariadbsim's
//     (MariaDBReport.Racy counts them).
//   - DROP TABLE within a sequence: it waits for the metadata locks of
//     open transactions, which mariadbsim does not model (its DROP never
//     waits). The harness drops the tables after each sequence.
//   - Locking range statements (deleteExpired, pickSlot, pickSlotMixed,
//     insertSlots) outside an explicit transaction: dbsem sends them only
//     in its READ COMMITTED transactions, and as autocommit statements
//     they would run under REPEATABLE READ, with next-key locks mariadbsim
//     does not model. Explicit transactions are always READ COMMITTED:
//     mariadbsim models no other level for them.
//   - Faults (kill, KILL CONNECTION, pause, lost COMMIT replies, server
//     restarts, clock skew): they are the client's and the network's
//     doing, not statements; mariadbsim's fault tests cover what it makes of
//     them.
//   - Exact datetimes read back: no statement of dbsem's returns one.

// A DBSeq is a drawn sequence of statements for the database.
type DBSeq struct {
	// Design is "master-row" or "row-per-slot": which tables and
	// statements the sequence uses.
	Design string
	// ClientClock writes every {now} as a parameter: a datetime the
	// sequence chose, the same on both sides. Otherwise {now} is
	// UTC_TIMESTAMP(6), each side's own clock, and every deadline is an
	// hour away from it.
	ClientClock bool
	// Conns is how many connections the steps use (2-4).
	Conns int
	// Ops are the steps.
	Ops []DBOp
}

// A DBOp is one step: a statement on connection Conn.
type DBOp struct {
	Conn int
	// Stmt is a statement's name in mariadbsim.Statements (dbsem's name, or
	// "COMMIT", "ROLLBACK"), or "begin": SET TRANSACTION ISOLATION LEVEL
	// READ COMMITTED, then START TRANSACTION.
	Stmt string
	// Args are its parameters: strings and int64s; datetimes as
	// "2006-01-02 15:04:05.000000" strings; a multi-row INSERT's keys,
	// one per row.
	Args []any
}

// opBegin is the op that starts a READ COMMITTED transaction.
const opBegin = "begin"

// The statements dbsem sends only inside its READ COMMITTED transactions
// that lock ranges; the runners skip them outside one.
var txOnly = map[string]bool{"deleteExpired": true, "pickSlot": true, "pickSlotMixed": true, "insertSlots": true}

var dbStatements = func() map[string]mariadbsim.Statement {
	m := map[string]mariadbsim.Statement{}
	for _, s := range mariadbsim.Statements() {
		m[s.Name] = s
	}
	return m
}()

// dbEpoch is t0 of the client clock: client datetimes are dbEpoch plus a
// few seconds.
var dbEpoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

const dbTimeLayout = "2006-01-02 15:04:05.000000"

// clientTime is the client clock dbEpoch + d, as dbsem writes it.
func clientTime(d time.Duration) string { return dbEpoch.Add(d).Format(dbTimeLayout) }

// hour is the ttl, in microseconds, of a deadline far from the database's
// clock.
const hour = int64(time.Hour / time.Microsecond)

// text is the op's SQL for tables prefixed prefix (for begin, the first of
// its two statements).
func (o DBOp) text(prefix string, clientClock bool) (string, error) {
	if o.Stmt == opBegin {
		return "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", nil
	}
	return mariadbsim.StatementText(o.Stmt, prefix, clientClock, len(o.Args))
}

func (o DBOp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "c%d %s", o.Conn, o.Stmt)
	for _, a := range o.Args {
		b.WriteString(" ")
		b.WriteString(argString(a))
	}
	return b.String()
}

// argString shows an argument: a client datetime as its offset from t0.
func argString(a any) string {
	switch a := a.(type) {
	case string:
		if t, err := time.Parse(dbTimeLayout, a); err == nil && len(a) == len(dbTimeLayout) {
			if d := t.Sub(dbEpoch); d < 0 {
				return "t-" + (-d).String()
			}
			return "t+" + t.Sub(dbEpoch).String()
		}
		return fmt.Sprintf("%q", a)
	case int64:
		return fmt.Sprint(a)
	}
	return fmt.Sprint(a)
}

func (s DBSeq) String() string {
	clock := "UTC_TIMESTAMP(6), deadlines an hour away"
	if s.ClientClock {
		clock = "client clock (t = 2030-01-01 00:00 UTC)"
	}
	return fmt.Sprintf("%s, %d connections, %s", s.Design, s.Conns, clock)
}

// DrawDBSeq draws a sequence of at most about maxSteps steps, besides
// the setting up of its tables and keys.
//
// Each connection runs programs after dbsem's operations (an acquire's
// transaction, a refresh, a release, a key's set-up, a read), now and
// then with a statement of any kind in between, and the steps interleave
// them: each step is the next statement of the connection it draws. So
// acquires of one key meet (the later one's lock waits for the earlier
// one's COMMIT), duplicate tokens meet (shared locks, and the deadlocks
// of two waiting inserters), and a stray statement inside a transaction
// locks rows in another order (deadlocks).
func DrawDBSeq(t *rapid.T, maxSteps int) DBSeq {
	g := &dbGen{t: t}
	s := DBSeq{Design: "master-row"}
	if rapid.Bool().Draw(t, "row-per-slot") {
		s.Design = "row-per-slot"
	}
	s.ClientClock = !g.chance("database clock", 30)
	s.Conns = 2 + g.pick("more connections", 3)
	g.fencing = g.chance("fencing", 50)
	g.seq = &s
	g.inTx = make([]bool, s.Conns)
	g.program = make([][]DBOp, s.Conns)
	table := "createTokens"
	if s.Design == "row-per-slot" {
		table = "createSlots"
	}
	// Setting up, as dbsem's Open and its first acquire of a key do; each
	// shrinks away if the divergence does not need it.
	if g.chance("keys table", 97) {
		s.Ops = append(s.Ops, DBOp{Stmt: "createKeys"})
	}
	if g.chance("design table", 97) {
		s.Ops = append(s.Ops, DBOp{Stmt: table})
	}
	for i, key := range dbKeys {
		if g.chance("set-up of "+key, []int{95, 70, 70}[i]) {
			s.Ops = append(s.Ops, g.setUp(0, key, int64(1+g.pick("max", 3)))...)
		}
	}
	// Slice generators, so that rapid can drop steps while shrinking; one
	// for every 8 steps, because rapid's slices are short on average.
	op := rapid.Custom(func(t *rapid.T) DBOp { g.t = t; return g.op() })
	for i, left := 0, max(maxSteps, 1); left > 0; i++ {
		n, least := min(left, 8), 0
		if i == 0 {
			least = 1
		}
		g.t = t
		s.Ops = append(s.Ops, rapid.SliceOfN(op, least, n).Draw(t, fmt.Sprintf("ops %d", i))...)
		left -= n
	}
	return s
}

// dbKeys are the keys a sequence uses: "kk" sorts right after "k", so
// that a scan of k's rows meets a row of another key.
var dbKeys = []string{"k", "j", "kk"}

// dbGen draws the steps of one sequence: program holds the statements
// each connection's program has still to send, inTx whether the program
// (or a stray statement) left the connection in a transaction (a
// deadlock may have ended it: the runners decide from what happened),
// tokens those the sequence's acquires wrote.
type dbGen struct {
	t       *rapid.T
	seq     *DBSeq
	fencing bool
	inTx    []bool
	program [][]DBOp
	tokens  []string
}

// chance is true with probability p%, shrinking to false.
func (g *dbGen) chance(name string, p int) bool { return percent.Draw(g.t, name) >= 100-p }

// pick draws 0..n-1 uniformly, shrinking to 0.
func (g *dbGen) pick(name string, n int) int { return percent.Draw(g.t, name) * n / 100 }

func (g *dbGen) key() string {
	switch k := percent.Draw(g.t, "key"); {
	case k < 75:
		return "k"
	case k < 92:
		return "j"
	}
	return "kk"
}

// now is a {now}: a client datetime on a 250 ms grid, now and then a
// microsecond off it. (With the database's clock it is drawn and not
// used.)
func (g *dbGen) now() string {
	d := time.Duration(g.pick("now", 9)) * 250 * time.Millisecond
	switch e := percent.Draw(g.t, "off the grid"); {
	case e >= 95:
		d += time.Microsecond
	case e >= 90:
		d -= time.Microsecond
	}
	return clientTime(d)
}

// ttl is an INTERVAL in microseconds: 250 ms to 2 s with a client clock,
// an hour (or an hour past: already expired) with the database's.
func (g *dbGen) ttl() int64 {
	if !g.seq.ClientClock {
		if g.chance("expired", 25) {
			return -hour
		}
		return hour
	}
	return int64(1+g.pick("ttl", 8)) * 250_000
}

// clock appends a {now} argument if the sequence has a client clock.
func (g *dbGen) clock(args []any, now string) []any {
	if g.seq.ClientClock {
		return append(args, now)
	}
	return args
}

// newToken is the token of a new master-row lease: one of few, so that
// acquires collide on it.
func (g *dbGen) newToken() string {
	tok := []string{"t1", "t2", "t3"}[g.pick("token", 3)]
	g.tokens = append(g.tokens, tok)
	return tok
}

// token is a token to refresh or release: mostly one an acquire wrote.
func (g *dbGen) token() string {
	if len(g.tokens) > 0 && !g.chance("a token no acquire wrote", 25) {
		return g.tokens[g.pick("which token", len(g.tokens))]
	}
	if g.seq.Design == "row-per-slot" {
		return g.slotToken(int64(g.pick("slot", 4)))
	}
	return []string{"t1", "t2", "t3", "t4"}[g.pick("token", 4)]
}

// slotToken is a row-per-slot token: its slot's number and a name.
func (g *dbGen) slotToken(num int64) string {
	return fmt.Sprintf("%d:%s", num, []string{"a", "b"}[g.pick("token", 2)])
}

// slotOf is the slot a row-per-slot token names (now and then another).
func (g *dbGen) slotOf(tok string) int64 {
	var num int64
	fmt.Sscanf(tok, "%d:", &num)
	if g.chance("another slot", 10) {
		num = int64(g.pick("slot", 4))
	}
	return num
}

// op draws the next step: a connection, then the next statement of its
// program (a new program if it has none), or now and then a statement of
// any kind that fits whether it is in a transaction.
func (g *dbGen) op() DBOp {
	c := g.pick("connection", g.seq.Conns)
	var o DBOp
	switch {
	case g.chance("stray statement", 15):
		o = g.stray(c)
	default:
		if len(g.program[c]) == 0 {
			g.program[c] = g.newProgram(c)
		}
		o = g.program[c][0]
		g.program[c] = g.program[c][1:]
	}
	switch o.Stmt {
	case opBegin:
		g.inTx[c] = true
	case "COMMIT", "ROLLBACK", "createKeys", "createTokens", "createSlots":
		g.inTx[c] = false
	}
	return o
}

// stray is a statement of any kind for connection c: begin, COMMIT or
// ROLLBACK, CREATE TABLE again, or one of the design's statements.
func (g *dbGen) stray(c int) DBOp {
	o := DBOp{Conn: c}
	switch k := percent.Draw(g.t, "stray"); {
	case k < 10 && !g.inTx[c]:
		o.Stmt = opBegin
	case k < 10:
		o.Stmt = "COMMIT"
	case k < 15:
		o.Stmt = "ROLLBACK"
	case k < 20:
		o.Stmt = "createKeys"
		if g.chance("design table", 50) {
			o.Stmt = "createTokens"
			if g.seq.Design == "row-per-slot" {
				o.Stmt = "createSlots"
			}
		}
	default:
		o.Stmt, o.Args = g.statement(g.inTx[c])
	}
	return o
}

// newProgram draws connection c's next program: the statements of one of
// dbsem's operations.
func (g *dbGen) newProgram(c int) []DBOp {
	key := g.key()
	on := func(ops ...DBOp) []DBOp {
		for i := range ops {
			ops[i].Conn = c
		}
		return ops
	}
	if g.inTx[c] {
		// A stray begin left a transaction open: end it first.
		end := "COMMIT"
		if g.chance("rollback", 30) {
			end = "ROLLBACK"
		}
		return on(DBOp{Stmt: end})
	}
	rowPerSlot := g.seq.Design == "row-per-slot"
	switch k := percent.Draw(g.t, "program"); {
	case k < 50:
		return on(g.acquire(key)...)
	case k < 65:
		tok := g.token()
		if rowPerSlot {
			name := "refreshSlot"
			if g.chance("revives expired", 20) {
				name = "refreshSlotAE"
			}
			return on(DBOp{Stmt: name, Args: g.args(name, key, tok)})
		}
		name := "refreshToken"
		if g.chance("revives expired", 20) {
			name = "refreshTokenAE"
		}
		return on(DBOp{Stmt: name, Args: g.args(name, key, tok)})
	case k < 80:
		tok := g.token()
		name := map[bool]string{false: "releaseToken", true: "releaseSlot"}[rowPerSlot]
		if g.chance("after expiry", 20) {
			name += "AE"
		}
		return on(DBOp{Stmt: name, Args: g.args(name, key, tok)})
	case k < 90:
		max := int64(1 + g.pick("max", 3))
		if rowPerSlot && g.chance("mixed max", 30) {
			return on(DBOp{Stmt: "countSlots", Args: []any{key}}, DBOp{Stmt: "insertSlotsMixed", Args: g.rows(key, max)})
		}
		return on(append([]DBOp{{Stmt: "selectKey", Args: []any{key}}}, g.setUp(c, key, max)...)...)
	default:
		name := map[bool]string{false: "countLive", true: "peekSlot"}[rowPerSlot]
		if g.chance("selectKey", 30) {
			name = "selectKey"
		}
		return on(DBOp{Stmt: name, Args: g.args(name, key, "")})
	}
}

// setUp is dbsem's set-up of key with max on connection c.
func (g *dbGen) setUp(c int, key string, max int64) []DBOp {
	insert := DBOp{Conn: c, Stmt: "insertKey", Args: []any{key, max, g.seq.Design}}
	if g.chance("other design", 5) {
		insert.Args[2] = map[string]string{"master-row": "row-per-slot", "row-per-slot": "master-row"}[g.seq.Design]
	}
	if g.seq.Design == "master-row" {
		return []DBOp{insert}
	}
	return []DBOp{{Conn: c, Stmt: opBegin}, insert, {Conn: c, Stmt: "insertSlots", Args: g.rows(key, max)}, {Conn: c, Stmt: "COMMIT"}}
}

// rows are the keys of a multi-row INSERT of n rows, now and then one of
// another key.
func (g *dbGen) rows(key string, n int64) []any {
	if g.chance("other row count", 20) {
		n = int64(1 + g.pick("rows", 4))
	}
	rows := make([]any, n)
	for i := range rows {
		rows[i] = key
		if g.chance("row of another key", 8) {
			rows[i] = g.key()
		}
	}
	return rows
}

// acquire is an acquire's transaction, as dbsem (or one of its defects)
// sends it; it ends in COMMIT, or now and then ROLLBACK (an error
// between the statements).
func (g *dbGen) acquire(key string) []DBOp {
	ops := []DBOp{{Stmt: opBegin}}
	var tok string
	if g.seq.Design == "master-row" {
		lock := "lockMaster"
		if g.chance("count without lock", 10) {
			lock = "readMaster"
		}
		now := g.now()
		ops = append(ops,
			DBOp{Stmt: lock, Args: []any{key}},
			DBOp{Stmt: "deleteExpired", Args: g.clock([]any{key}, now)},
			DBOp{Stmt: "countLive", Args: g.clock([]any{key}, now)})
		tok = g.newToken()
	} else {
		name := "pickSlot"
		switch k := percent.Draw(g.t, "pick"); {
		case k >= 95:
			name = "peekSlotMixed"
		case k >= 90:
			name = "peekSlot"
		case k >= 80:
			name = "pickSlotMixed"
		}
		ops = append(ops, DBOp{Stmt: name, Args: g.args(name, key, "")})
		tok = g.slotToken(int64(g.pick("slot", 4)))
		g.tokens = append(g.tokens, tok)
	}
	if g.fencing {
		ops = append(ops, DBOp{Stmt: "nextFence", Args: []any{key}})
	}
	name := map[bool]string{false: "insertToken", true: "takeSlot"}[g.seq.Design == "row-per-slot"]
	ops = append(ops, DBOp{Stmt: name, Args: g.args(name, key, tok)})
	end := "COMMIT"
	if g.chance("rollback", 10) {
		end = "ROLLBACK"
	}
	return append(ops, DBOp{Stmt: end})
}

// weighted is a statement name and its weight.
type weighted struct {
	name string
	w    int
}

// The stray statements, by design and by whether the connection is in a
// transaction.
var (
	masterRowTx = []weighted{
		{"lockMaster", 16}, {"deleteExpired", 10}, {"countLive", 6}, {"insertToken", 16},
		{"nextFence", 8}, {"readMaster", 3}, {"refreshToken", 8}, {"releaseToken", 8},
		{"selectKey", 3}, {"insertKey", 5}, {"refreshTokenAE", 3}, {"releaseTokenAE", 3},
	}
	masterRowAuto = []weighted{
		{"refreshToken", 10}, {"releaseToken", 10}, {"refreshTokenAE", 4}, {"releaseTokenAE", 4},
		{"selectKey", 6}, {"insertKey", 10}, {"countLive", 6}, {"insertToken", 10},
		{"lockMaster", 6}, {"readMaster", 3}, {"nextFence", 6},
	}
	rowPerSlotTx = []weighted{
		{"pickSlot", 12}, {"takeSlot", 14}, {"nextFence", 8}, {"pickSlotMixed", 5},
		{"peekSlot", 3}, {"peekSlotMixed", 3}, {"insertSlots", 6}, {"insertKey", 5},
		{"countSlots", 3}, {"selectKey", 3}, {"refreshSlot", 8}, {"releaseSlot", 8},
		{"refreshSlotAE", 3}, {"releaseSlotAE", 3}, {"insertSlotsMixed", 4},
	}
	rowPerSlotAuto = []weighted{
		{"refreshSlot", 10}, {"releaseSlot", 10}, {"refreshSlotAE", 4}, {"releaseSlotAE", 4},
		{"selectKey", 6}, {"insertKey", 8}, {"countSlots", 6}, {"insertSlotsMixed", 8},
		{"peekSlot", 5}, {"peekSlotMixed", 3}, {"takeSlot", 10}, {"nextFence", 6},
	}
)

// statement draws a stray statement of the sequence's design.
func (g *dbGen) statement(inTx bool) (string, []any) {
	set := masterRowAuto
	switch {
	case g.seq.Design == "master-row" && inTx:
		set = masterRowTx
	case g.seq.Design == "row-per-slot" && inTx:
		set = rowPerSlotTx
	case g.seq.Design == "row-per-slot":
		set = rowPerSlotAuto
	}
	total := 0
	for _, s := range set {
		total += s.w
	}
	n := g.pick("statement", total)
	name := set[len(set)-1].name
	for _, s := range set {
		if n < s.w {
			name = s.name
			break
		}
		n -= s.w
	}
	key, tok := g.key(), ""
	switch name {
	case "insertToken":
		tok = g.newToken()
	case "takeSlot":
		tok = g.slotToken(int64(g.pick("slot", 4)))
	case "refreshToken", "refreshTokenAE", "releaseToken", "releaseTokenAE",
		"refreshSlot", "refreshSlotAE", "releaseSlot", "releaseSlotAE":
		tok = g.token()
	}
	return name, g.args(name, key, tok)
}

// args draws the arguments of statement name on key, with token tok.
func (g *dbGen) args(name, key, tok string) []any {
	switch name {
	case "selectKey", "lockMaster", "readMaster", "nextFence", "countSlots":
		return []any{key}
	case "insertKey":
		return []any{key, int64(1 + g.pick("max", 3)), g.seq.Design}
	case "insertSlots", "insertSlotsMixed":
		return g.rows(key, int64(1+g.pick("rows", 4)))
	case "deleteExpired", "countLive", "pickSlot", "peekSlot":
		return g.clock([]any{key}, g.now())
	case "pickSlotMixed", "peekSlotMixed":
		return g.clock([]any{key, int64(1 + g.pick("max", 4))}, g.now())
	}
	now := g.now()
	switch name {
	case "insertToken":
		return append(g.clock([]any{key, tok}, now), g.ttl(), int64(g.pick("fence", 4)))
	case "refreshToken":
		return g.clock(append(g.clock(nil, now), g.ttl(), key, tok), now)
	case "refreshTokenAE":
		return append(g.clock(nil, now), g.ttl(), key, tok)
	case "releaseToken":
		return g.clock([]any{key, tok}, now)
	case "releaseTokenAE":
		return []any{key, tok}
	case "takeSlot":
		return append(append([]any{tok}, g.clock(nil, now)...), g.ttl(), int64(g.pick("fence", 4)), key, g.slotOf(tok))
	case "refreshSlot":
		return g.clock(append(g.clock(nil, now), g.ttl(), key, g.slotOf(tok), tok), now)
	case "refreshSlotAE":
		return append(g.clock(nil, now), g.ttl(), key, g.slotOf(tok), tok)
	case "releaseSlot":
		return g.clock([]any{key, g.slotOf(tok), tok}, now)
	case "releaseSlotAE":
		return []any{key, g.slotOf(tok), tok}
	}
	panic("conform: no arguments for " + name)
}
