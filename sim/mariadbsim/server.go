package mariadbsim

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Virtual time a statement, a connection and a refused connection take.
// Their values matter only relative to leases' ttls and lock waits.
const (
	statementTime = 100 * time.Microsecond
	connectTime   = time.Millisecond
	refusedTime   = 100 * time.Microsecond
)

// epoch is what UTC_TIMESTAMP(6) and Process.Now read at virtual time 0.
var epoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

type isolation uint8

const (
	repeatableRead isolation = iota // the server's default: autocommit statements
	readCommitted                   // what dbsem sets for its transactions
)

// A session is the server's side of one connection.
type session struct {
	id         int64
	name       string // "<process>#<n>"
	p          *Process
	c          *conn
	trx        *trx      // the explicit transaction, if one is open
	nextISO    isolation // SET TRANSACTION's level for the next transaction
	setISO     bool
	run        *stmtRun // the statement in progress (waiting for a lock)
	closed     bool
	clientGone bool // the client closed its socket while a statement ran
	slot       int  // its trx_t's place in InnoDB's pool (see World.attach); 0: none yet
}

// attach gives s its InnoDB transaction object, at its first statement
// that reaches InnoDB (check_trx_exists), if it has none: InnoDB takes the
// free one of lowest address from its pool (ut0pool.h's Pool::get), and
// the connection keeps it until it closes. Here the address is a slot
// number, the lowest free one; its order is the order in which a deadlock
// check takes up the waiting transactions it was given (World.toCheck).
func (w *World) attach(s *session) {
	if s.slot > 0 {
		return
	}
	i := slices.Index(w.slots, false)
	if i < 0 {
		i = len(w.slots)
		w.slots = append(w.slots, false)
	}
	w.slots[i] = true
	s.slot = i + 1
}

// clock is the session's UTC_TIMESTAMP(6): virtual time plus the server's
// and the owning process's offsets, in microseconds since the Unix epoch.
func (s *session) clock(w *World) int64 {
	ns := w.now + int64(w.serverSkew) + int64(w.skews[s.p.Name()])
	return epoch.UnixMicro() + floorDiv(ns, 1000)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// takeISO is the isolation level of a transaction starting now.
func (s *session) takeISO() isolation {
	if s.setISO {
		s.setISO = false
		return s.nextISO
	}
	return repeatableRead
}

// A trx is an InnoDB transaction: an explicit one, or the one an
// autocommit statement runs in.
type trx struct {
	id      int64
	s       *session
	iso     isolation
	auto    bool
	locks   []*lockQueue // the queues it holds locks in
	undo    []undoRec
	touched []*row
	wait    *waiter
	ended   bool

	// InnoDB's lock structs, which weigh in the choice of a deadlock's
	// victim (see weight) and are released last first (see releaseAll).
	structs []lockStruct    // its record lock structs, in the order made
	tables  []*table        // those it holds IX on
	similar []similarStruct // the record lock structs it can add a record to
}

// A lockStruct is one of a transaction's record lock structs: its place
// in the lock lists (seq: InnoDB appends a new struct to its page's list,
// and keeps it there until the transaction ends or, for a wait, until the
// wait is cancelled) and its table (its page: dbsem's tables take a page
// or so).
type lockStruct struct {
	seq uint64
	tb  *table
}

// A similarStruct is t's first struct of a kind: the one a lock of that
// kind goes into (lock_rec_find_similar_on_page finds the first in the
// list).
type similarStruct struct {
	kind simLock
	seq  uint64
}

// A simLock is a kind of record lock struct: InnoDB adds a record to a
// struct of its transaction, table (page: dbsem's tables take a page or
// so), mode and gap-ness, rather than make one more; the gap locks a new
// record copies go into structs of their own (checked against MariaDB
// 10.11).
type simLock struct {
	tb       *table
	mode     lockMode
	gap      bool
	onInsert bool
}

// weight is how InnoDB compares deadlock victims (TRX_WEIGHT): undo
// records plus lock structs; the lighter transaction is rolled back, the
// one whose check found the cycle on a tie (see World.report). The
// structs are an IX table lock on each table a locking statement used
// (found rows or not), and record lock structs: one for every wait, and
// one for every kind of lock (simLock) the transaction took without
// waiting on each table (later locks of that kind go into it, unless a
// request waits on their record: see World.structFor); a lock given up
// under READ COMMITTED keeps its struct; a row's insert locks it
// implicitly, without a struct, until another transaction asks for a
// lock on it (checked against MariaDB 10.11's SHOW ENGINE INNODB STATUS).
func (t *trx) weight() int { return len(t.undo) + len(t.structs) + len(t.tables) }

// intend notes t's IX lock on tb.
func (t *trx) intend(tb *table) {
	if !slices.Contains(t.tables, tb) {
		t.tables = append(t.tables, tb)
	}
}

// similarSeq returns the place of t's first struct of kind k, if it has
// one.
func (t *trx) similarSeq(k simLock) (uint64, bool) {
	for _, s := range t.similar {
		if s.kind == k {
			return s.seq, true
		}
	}
	return 0, false
}

// took notes that t has a struct of kind k at seq (a new one, or the one
// a wait made, which becomes a granted lock's): the first of its kind is
// where later locks of that kind go.
func (t *trx) took(k simLock, seq uint64) {
	if _, ok := t.similarSeq(k); !ok {
		t.similar = append(t.similar, similarStruct{kind: k, seq: seq})
	}
}

// dropStruct forgets t's struct at seq: a cancelled wait's, which InnoDB
// takes back.
func (t *trx) dropStruct(seq uint64) {
	for i, s := range t.structs {
		if s.seq == seq {
			t.structs = slices.Delete(t.structs, i, i+1)
			return
		}
	}
}

// hold notes that t has a lock in q; unhold, that it has none left there.
func (t *trx) hold(q *lockQueue) {
	if !slices.Contains(t.locks, q) {
		t.locks = append(t.locks, q)
	}
}

func (t *trx) unhold(q *lockQueue) {
	if i := slices.Index(t.locks, q); i >= 0 {
		t.locks = slices.Delete(t.locks, i, i+1)
	}
}

// waitsFor is the transaction t waits for (InnoDB's trx->lock.wait_trx):
// the one that holds or asked for the first lock in t's way; nil when t
// does not wait.
func (t *trx) waitsFor() *trx {
	if t.wait == nil {
		return nil
	}
	return t.wait.blocker
}

type undoRec struct {
	r         *row
	hadWriter bool
	prev      *rowVal
}

func (w *World) newTrx(s *session, iso isolation, auto bool) *trx {
	w.trxID++
	return &trx{id: w.trxID, s: s, iso: iso, auto: auto}
}

// write makes v (nil: deletion) t's version of r; t holds r's X lock.
func (w *World) write(t *trx, r *row, v *rowVal) {
	t.undo = append(t.undo, undoRec{r: r, hadWriter: r.writer == t, prev: r.next})
	if r.writer != t {
		r.writer = t
		t.touched = append(t.touched, r)
	}
	r.next = v
}

// undoTo rolls t's changes back to its first mark undo records: a
// statement's rollback. The statement's locks stay, as in InnoDB.
func (w *World) undoTo(t *trx, mark int) {
	for i := len(t.undo) - 1; i >= mark; i-- {
		u := t.undo[i]
		w.restore(u)
		if !u.hadWriter {
			u.r.writer, u.r.next = nil, nil
			if u.r.cur == nil {
				w.undone(u.r)
			}
		}
	}
	t.undo = t.undo[:mark]
}

// restore puts back the version of u's row that u's write replaced, as
// InnoDB's rollback does record by record: putting back a version of
// another size rebuilds the record (see rebuilt).
func (w *World) restore(u undoRec) {
	back := u.prev
	if back == nil && !u.hadWriter {
		back = u.r.cur
	}
	if u.r.next != nil && back != nil && !u.r.next.sameSize(back) {
		w.rebuilt(u.r.tb, u.r.k)
	}
	u.r.next = u.prev
}

// undone is a row none of whose versions is left after a rollback: an
// insert's record goes at once, and its locks with it (see vanish); a
// ghost stays a ghost (see purge).
func (w *World) undone(r *row) {
	if r.fresh {
		r.fresh = false
		r.tb.remove(r)
		w.vanish(r.tb, r.k)
		return
	}
	w.purge(r)
}

// purge removes a ghost, a deleted row's record, once no transaction
// holds or waits for a lock on it, unless Options.HoldPurge keeps it.
// (InnoDB keeps a deleted row's record until purge, which runs in the
// background and which a read view older than the delete holds off, and
// the record is locked and waited for like any other.)
func (w *World) purge(r *row) {
	if !w.holdPurge && r.cur == nil && r.writer == nil && w.locks[lockID{tb: r.tb, k: r.k}] == nil {
		r.tb.remove(r)
		n := r.tb.next(r.k)
		q := w.locks[lockID{tb: r.tb, k: r.k, gap: true}]
		w.inherit(q, r.tb, n)
		w.drop(q)
	}
}

func (w *World) commit(t *trx) {
	if t.ended {
		return
	}
	t.ended = true
	var ghosts []*row
	for _, r := range t.touched {
		if r.writer == t {
			r.cur, r.next, r.writer, r.fresh = r.next, nil, nil, false
			if r.cur == nil {
				ghosts = append(ghosts, r)
			}
		}
	}
	t.touched, t.undo = nil, nil
	w.releaseAll(t)
	for _, r := range ghosts {
		w.purge(r)
	}
}

func (w *World) rollback(t *trx) {
	if t.ended {
		return
	}
	t.ended = true
	if t.wait != nil {
		w.abandon(t.wait)
	}
	for i := len(t.undo) - 1; i >= 0; i-- {
		w.restore(t.undo[i])
	}
	var ghosts []*row
	for i := len(t.touched) - 1; i >= 0; i-- {
		r := t.touched[i]
		if r.writer == t {
			r.next, r.writer = nil, nil
			if r.cur == nil {
				w.undone(r)
				ghosts = append(ghosts, r)
			}
		}
	}
	t.touched, t.undo = nil, nil
	w.releaseAll(t)
	for _, r := range ghosts {
		w.purge(r)
	}
}

// A stmtRun is one statement on its way through the server: bound, then
// run until it finishes or waits for a lock (then run again, from where
// it stopped, once the lock is granted).
type stmtRun struct {
	w      *World
	s      *session
	p      *Process // whom to answer; nil once the client has gone
	c      *conn
	v      *variant
	parsed *parsed
	prefix string
	b      binding
	clock  int64 // the session clock when the statement started, µs
	num    int   // its number among the process's statements
	t      *trx
	auto   bool
	mark   int
	fresh  []freshLock
	wait   *waiter
	done   bool

	// Where a scan or a multi-row INSERT stopped to wait.
	pos pkey
	how resume
	idx int

	affected, lastID int64
	cols             []string
	rows             [][]driver.Value
	err              error
	lostReply        bool
}

// A freshLock is a lock a statement took (or strengthened from had);
// under READ COMMITTED the ones on rows it did not keep (return, change,
// or find a duplicate at) are given up when it ends, unless it had to
// wait for them.
type freshLock struct {
	q    *lockQueue
	had  lockMode
	kept bool
}

// keep marks the statement's lock on a record as one to hold.
func (r *stmtRun) keep(tb *table, k pkey) {
	id := lockID{tb: tb, k: k}
	for i := range r.fresh {
		if r.fresh[i].q.id == id {
			r.fresh[i].kept = true
		}
	}
}

// letGo releases the statement's fresh lock on a record it looked at and
// does not keep (READ COMMITTED only: REPEATABLE READ holds it).
func (r *stmtRun) letGo(tb *table, k pkey) {
	if r.t.iso != readCommitted {
		return
	}
	id := lockID{tb: tb, k: k}
	for i := range r.fresh {
		f := &r.fresh[i]
		if f.q.id == id && !f.kept && f.q.held(r.t) > f.had {
			r.w.downgrade(r.t, f.q, f.had)
		}
	}
}

// now is the statement's i-th {now}: the session clock at its start, or
// the client's value with Defects.ClientClockExpiry.
func (r *stmtRun) now(i int) int64 {
	if r.v.clientClock {
		return r.b.now[i]
	}
	return r.clock
}

// execute runs r until it finishes or waits.
func (w *World) execute(r *stmtRun) {
	if r.done {
		return
	}
	blocked, err := r.v.tpl.exec(r)
	if err != nil {
		r.err = err
		w.finish(r)
		return
	}
	if blocked {
		// (A deadlock check its wait set off may have ended it already.)
		if !r.done {
			r.s.run = r
		}
		return
	}
	w.finish(r)
}

// finish ends r: its transaction's part (commit or roll back an
// autocommit statement, roll a failed statement back, the whole
// transaction after a deadlock), the trace, and the answer.
func (w *World) finish(r *stmtRun) {
	if r.done {
		return
	}
	r.done = true
	s := r.s
	if s.run == r {
		s.run = nil
	}
	if t := r.t; t != nil && !t.ended {
		switch {
		case r.err != nil && isDeadlock(r.err):
			w.rollback(t)
		case r.err != nil:
			w.undoTo(t, r.mark)
			w.sweep(r)
			if r.auto {
				w.rollback(t)
			}
		default:
			w.sweep(r)
			if r.auto {
				w.commit(t)
			}
		}
	}
	if s.trx != nil && s.trx.ended {
		s.trx = nil
	}
	if r.lostReply {
		r.err = mysql.ErrInvalidConn
	}
	if w.trace != nil {
		w.tracef("%s %s -> %s", s.name, r.describe(), r.outcome())
	}
	switch {
	case s.clientGone:
		w.closeSession(s, "its client went away during the statement")
		return
	case r.lostReply:
		w.closeSession(s, "the COMMIT's reply was lost")
	}
	w.answer(r.p, r.c, r.num, reply{err: r.err, affected: r.affected, lastID: r.lastID, cols: r.cols, rows: r.rows})
}

// sweep releases, under READ COMMITTED, the locks the statement took on
// rows it did not keep.
func (w *World) sweep(r *stmtRun) {
	if r.t.iso != readCommitted {
		return
	}
	for _, f := range r.fresh {
		if !f.kept && f.q.held(r.t) > f.had {
			w.downgrade(r.t, f.q, f.had)
		}
	}
}

// answer gives p (if it still listens) the reply to its statement num
// and arms the hooks that statement fires.
func (w *World) answer(p *Process, c *conn, num int, rep reply) {
	if rep.err == mysql.ErrInvalidConn && c != nil {
		c.broken = true
	}
	if p == nil || p.proc.Ended() {
		return
	}
	if p.proc.Link().Cut() {
		if w.trace != nil {
			w.tracef("%s: a reply waits for the partition to heal", p.Name())
		}
		p.proc.Link().Hold(func() { w.answer(p, c, num, rep) })
		return
	}
	p.proc.Deliver(rep)
	w.fireHooks(p, num)
}

// closeSession ends a session on the server: its transaction rolls back
// and its locks go.
func (w *World) closeSession(s *session, why string) {
	if s.closed {
		return
	}
	s.closed = true
	if s.trx != nil {
		w.rollback(s.trx)
		s.trx = nil
	}
	if s.slot > 0 {
		w.slots[s.slot-1] = false
		s.slot = 0
	}
	if w.trace != nil {
		w.tracef("%s closed: %s", s.name, why)
	}
}

// killSession is KILL CONNECTION (and a server's shutdown): a statement in
// progress ends (its client reads EOF: "invalid connection"), the
// transaction rolls back, the connection closes.
func (w *World) killSession(s *session, why string) {
	if s.closed {
		return
	}
	if r := s.run; r != nil && !r.done {
		if r.wait != nil {
			// The kill cancels the wait (lock_sys_t::cancel), then checks
			// for the deadlocks that leaves.
			w.abandon(r.wait)
			w.deadlockCheck()
		}
		r.err = mysql.ErrInvalidConn
		w.finish(r)
	}
	w.closeSession(s, why)
}

// clientClose is the client closing its end (database/sql discarding the
// connection, or the process ending). A statement waiting for a lock
// does not notice: MariaDB finds out only when it answers, so the session
// and its locks live on until the wait ends.
func (w *World) clientClose(s *session) {
	if s.closed || s.clientGone {
		return
	}
	if r := s.run; r != nil && !r.done {
		s.clientGone = true
		r.p = nil
		if w.trace != nil {
			w.tracef("%s: its client went away; the server will notice when %s ends", s.name, r.v.tpl.name)
		}
		return
	}
	w.closeSession(s, "closed by its client")
}

// describe is the statement as the trace shows it: its name in dbsem's
// sql.go, the table prefix and the arguments.
func (r *stmtRun) describe() string {
	var b strings.Builder
	b.WriteString(r.v.tpl.name)
	if r.prefix != "" {
		b.WriteString("(")
		b.WriteString(r.prefix)
		b.WriteString(")")
	}
	for _, a := range r.b.raw {
		b.WriteString(" ")
		b.WriteString(argText(a))
	}
	return b.String()
}

func (r *stmtRun) outcome() string {
	switch {
	case r.lostReply:
		return "ok, reply lost"
	case r.err != nil:
		return r.err.Error()
	case r.cols != nil:
		var b strings.Builder
		fmt.Fprintf(&b, "%d rows", len(r.rows))
		for _, row := range r.rows {
			b.WriteString(" [")
			for i, v := range row {
				if i > 0 {
					b.WriteString(" ")
				}
				b.WriteString(argText(v))
			}
			b.WriteString("]")
		}
		return b.String()
	case r.lastID != 0:
		return fmt.Sprintf("ok n=%d id=%d", r.affected, r.lastID)
	}
	return fmt.Sprintf("ok n=%d", r.affected)
}

func argText(v driver.Value) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []byte:
		return fmt.Sprintf("%q", v)
	case time.Time:
		return v.UTC().Format("2006-01-02T15:04:05.000000Z")
	case nil:
		return "NULL"
	}
	return fmt.Sprint(v)
}

// MariaDB's errors, as go-sql-driver/mysql reports them.

func mysqlError(n uint16, state, msg string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: n, Message: msg}
	copy(e.SQLState[:], state)
	return e
}

func errLockWait() error {
	return mysqlError(1205, "HY000", "Lock wait timeout exceeded; try restarting transaction")
}

func errDeadlock() error {
	return mysqlError(1213, "40001", "Deadlock found when trying to get lock; try restarting transaction")
}

func errDuplicate(tb *table, k pkey) error {
	return mysqlError(1062, "23000", fmt.Sprintf("Duplicate entry '%s' for key 'PRIMARY'", k.entry(tb.shape)))
}

func errNoTable(name string) error {
	return mysqlError(1146, "42S02", fmt.Sprintf("Table 'test.%s' doesn't exist", name))
}

func errTxCharacteristics() error {
	return mysqlError(1568, "25001", "Transaction characteristics can't be changed while a transaction is in progress")
}

func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}
