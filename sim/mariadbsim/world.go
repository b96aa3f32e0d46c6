package mariadbsim

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
	"github.com/lockprover/lockprover/sim/simworld"
)

// Options configure a World. The zero value is MariaDB's defaults with
// every choice given to the first runnable process.
type Options struct {
	// Decide picks which of n (at least 2) runnable processes moves next;
	// nil always picks the first (in the order they were registered).
	Decide func(n int) int
	// KeepInputs makes each process keep what it was handed each time
	// it moved (sched.Config.KeepInputs): for an exhaustive search's
	// fingerprint of the state (Unseen says what it must leave out).
	KeepInputs bool
	// Trace, if set, receives one line per scheduling event and statement:
	// the virtual time in nanoseconds, then what happened.
	Trace io.Writer
	// LockWaitTimeout is innodb_lock_wait_timeout, how long a statement
	// waits for a row lock before error 1205; 0 means MariaDB's 50 s.
	LockWaitTimeout time.Duration
	// HoldPurge holds InnoDB's purge off, as a read view older than the
	// deletes (a long transaction anywhere on the server) does: a deleted
	// row's record stays, delete-marked, until the World ends, and a
	// statement that comes across it locks it (and waits for it) as it
	// would a live row. Without it, the record goes once no transaction
	// holds or waits for its lock. (adapters/conform's differential holds
	// a read view open on MariaDB, since when purge runs is real time.)
	HoldPurge bool
	// Wake picks which of n (at least 2) statements granted their locks
	// by one event (a COMMIT or ROLLBACK freeing a row two waited on) runs
	// first; nil runs them in the order InnoDB granted them. On MariaDB
	// such statements go on at once and either may finish first: the
	// differential asks for the other orders where MariaDB's run raced.
	Wake func(n int) int
	// Version is the MariaDB whose behaviour the World models, as
	// adapters/servers/versions names it: "" or "10.11" (the default, Debian 12's
	// 10.11), or "11.8" (Debian 13's), which adds the lock bypass
	// (MDEV-34877; see conflictNew). Versions lists them; New panics on
	// another (check it with KnownVersion first).
	Version string
}

// Versions are the MariaDB versions a World models, oldest first: each
// differs from the one before in what its doc says.
var Versions = []string{"10.11", "11.8"}

// KnownVersion says whether a World can model version ("" is the
// default, 10.11).
func KnownVersion(version string) bool { return version == "" || slices.Contains(Versions, version) }

// ModelOf is the version a World models for a MariaDB server's VERSION()
// ("11.8.9-MariaDB-0+deb13u1"): the newest of Versions not newer than
// it, "" (the default, 10.11) for an older one or one that cannot be
// read.
func ModelOf(serverVersion string) string {
	major, minor, ok := majorMinor(serverVersion)
	if !ok {
		return ""
	}
	model := ""
	for _, v := range Versions {
		if vm, vn, _ := majorMinor(v); major > vm || major == vm && minor >= vn {
			model = v
		}
	}
	if model == Versions[0] {
		return ""
	}
	return model
}

// majorMinor reads "11.8" from "11.8.9-MariaDB..." or "11.8".
func majorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	digits := func(s string) string {
		return strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(digits(parts[1]))
	return major, minor, err1 == nil && err2 == nil
}

// A World is one simulated MariaDB server and the processes that use it.
// Its methods must be called from the goroutine that calls Run, from a
// process while it runs, from a timer or hook, or when no Run is in
// progress.
type World struct {
	trace     io.Writer
	lockWait  time.Duration
	holdPurge bool
	bypass    bool            // the lock bypass of MariaDB 11.8 (Options.Version)
	wakeFirst func(n int) int // Options.Wake

	now   int64
	sched sched.Scheduler[*Process, reply]
	// base runs the processes: by name, their sleeps and faults, the
	// trace and the first failure.
	base      simworld.Base[*Process, reply]
	dueHooks  []func()
	pending   map[string][]hook // hooks for processes not registered yet
	wake      []*stmtRun        // statements granted a lock, to run again
	afterStep func()            // tests: called after every scheduling step

	// The server.
	tables     map[string]*table
	tableOrder []*table
	locks      map[lockID]*lockQueue
	sessions   []*session
	connID     int64
	connSeq    map[string]int
	trxID      int64
	lockSeq    uint64    // the last lock struct's place (lockStruct.seq)
	waiters    []*waiter // every waiting request, in its struct's place's order
	toCheck    []toCheck // InnoDB's Deadlock::to_check, in slot order
	slots      []bool    // the trx_t slots in use (see attach)
	down       bool
	upGen      int
	serverSkew time.Duration
	skews      map[string]time.Duration
}

// New returns a World with an empty server, up, at virtual time 0.
func New(o Options) *World {
	w := &World{
		trace:     o.Trace,
		lockWait:  o.LockWaitTimeout,
		holdPurge: o.HoldPurge,
		wakeFirst: o.Wake,
		pending:   map[string][]hook{},
		tables:    map[string]*table{},
		locks:     map[lockID]*lockQueue{},
		connSeq:   map[string]int{},
		skews:     map[string]time.Duration{},
	}
	if w.lockWait <= 0 {
		w.lockWait = defaultLockWait
	}
	if !KnownVersion(o.Version) {
		panic(fmt.Sprintf("mariadbsim: no model of MariaDB %q (models: %s)", o.Version, strings.Join(Versions, ", ")))
	}
	w.bypass = o.Version == "11.8"
	w.base.Init(&w.sched, simworld.Config[*Process, reply]{
		Name: "sqlsim", Clock: &w.now, Trace: o.Trace, Decide: o.Decide, KeepInputs: o.KeepInputs,
		Proc: procOf, Serve: w.serve, Exit: w.endProcess, Settle: w.settle,
		Stepped: func() {
			if w.afterStep != nil {
				w.afterStep()
			}
		},
	})
	return w
}

// procOf is the simworld.Proc that p holds.
func procOf(p *Process) *simworld.Proc[*Process, reply] { return &p.proc }

// Now returns the virtual time in nanoseconds since New.
func (w *World) Now() int64 { return w.now }

// Keep says, while the Decider picks which process moves, which of its
// choices keeps the process that moved last moving; -1 if none does, or
// while it makes any other choice (an exhaustive search's bound on
// preemptions).
func (w *World) Keep() int { return w.base.Keep() }

// A Process is one client program: a coroutine that moves only when the
// scheduler lets it, with its own connection pool to the server.
type Process struct {
	w    *World
	proc simworld.Proc[*Process, reply] // with its Link to the server

	dropCommit bool
	req        request
	db         *sql.DB
	conns      []*conn
	counters   Counters
	sent       int
	hooks      []hook
}

type hook struct {
	n int
	f func()
}

// Name returns the name the process was registered with.
func (p *Process) Name() string { return p.proc.Name() }

// Now is the process's own clock: a fixed date (2025-01-01 00:00 UTC) plus
// the virtual time, plus the offset SkewClock gave its name. Pass it as
// dbsem's Defects.Now so that a client-clock defect reads virtual time.
func (p *Process) Now() time.Time {
	return epoch.Add(time.Duration(p.w.now) + p.w.skews[p.Name()])
}

// DB returns the process's connection pool to the server (one per
// process, opened on first use; its connections are named after the
// process, "<name>#1", "<name>#2", ...). database/sql runs it from the
// process's goroutine only as long as no call waits for a free connection:
// leave MaxOpenConns unlimited (or at least the number of connections the
// process uses at once), and use contexts that are not cancelled while a
// statement runs (a cancelled transaction is rolled back from a goroutine
// of database/sql's own).
func (p *Process) DB() *sql.DB {
	if p.db == nil {
		p.db = sql.OpenDB(&connector{p: p})
	}
	return p.db
}

// Sleep lets d of virtual time pass for the process; with d <= 0 it only
// yields (the process stays runnable, and Decide may let another move).
func (p *Process) Sleep(d time.Duration) { p.w.base.Sleep(p, d) }

// Go registers a process named name that will run fn. It may be called
// before Run, or during Run from a process, a timer or a hook (a client
// restarted after a kill, say); a name may be reused once its process has
// ended. Processes are offered to Decide in the order they were
// registered.
func (w *World) Go(name string, fn func(p *Process)) {
	p := &Process{w: w}
	w.base.Go(p, name, fn)
	p.hooks = w.pending[name]
	delete(w.pending, name)
}

// live returns the process named name unless it has ended.
func (w *World) live(name string) *Process { return w.base.Live(name) }

// Run runs every process until all have ended and no timer is pending; a
// process that can never move again (paused for good) is then killed. It
// returns the first panic of a process, or the first statement the server
// did not know, as an error.
func (w *World) Run() error { return w.base.Run() }

// settle lets the server finish what an event set off: statements granted
// a lock run again, and hooks armed by finished statements run.
func (w *World) settle() {
	for {
		switch {
		case len(w.wake) > 0:
			i := 0
			if len(w.wake) > 1 && w.wakeFirst != nil {
				i = w.wakeFirst(len(w.wake))
			}
			r := w.wake[i]
			w.wake = slices.Delete(w.wake, i, i+1)
			w.execute(r)
		case len(w.dueHooks) > 0:
			f := w.dueHooks[0]
			w.dueHooks[0] = nil
			w.dueHooks = w.dueHooks[1:]
			f()
		default:
			return
		}
	}
}

// serve handles p's posted connect or statement (its sleeps and faults
// are the Base's). A reply ready at once is handed over at once (the
// process goes on to its next request in the same step), unless a hook
// paused or killed the process meanwhile.
func (w *World) serve(p *Process) {
	r := p.req
	p.req = request{}
	p.proc.Block()
	if p.proc.Link().Cut() {
		w.hold(p, r)
	} else {
		w.send(p, r)
	}
	w.sched.Continue(&p.proc.Proc)
}

// hold keeps p's connect or statement until the partition heals. (A
// function of its own so that only a held request, which its closure
// keeps, goes to the heap: serve's copy of every request did.)
func (w *World) hold(p *Process, r request) {
	if w.trace != nil {
		w.tracef("%s: its %s waits for the partition to heal", p.Name(), shortText(r))
	}
	p.proc.Link().Hold(func() { w.send(p, r) })
}

// send serves p's connect or statement, as it reaches the server.
func (w *World) send(p *Process, r request) {
	if r.kind == reqConnect {
		w.connect(p)
		return
	}
	w.statement(p, r)
	w.settle()
}

// statement serves one statement of p.
func (w *World) statement(p *Process, rq request) {
	c := rq.c
	p.sent++
	num := p.sent
	k := kOther
	if rq.parsed != nil {
		k = rq.parsed.v.tpl.kind
	}
	p.counters.count(k)
	s := c.s
	switch {
	case s.closed:
		// The server closed the connection: the client writes its
		// command, then reads EOF.
		if w.trace != nil {
			w.tracef("%s %s -> invalid connection (the server had closed it)", s.name, shortText(rq))
		}
		w.answer(p, c, num, reply{err: errInvalidConn})
	case rq.err != nil:
		if w.trace != nil {
			w.tracef("%s %v", s.name, rq.err)
		}
		w.base.Fail(rq.err)
		w.answer(p, c, num, reply{err: rq.err})
	default:
		r := &stmtRun{w: w, s: s, p: p, c: c, v: rq.parsed.v, parsed: rq.parsed, prefix: rq.parsed.prefix, b: rq.b, clock: s.clock(w), num: num}
		if r.v.tpl.txn {
			if s.trx != nil {
				r.t = s.trx
			} else {
				r.t, r.auto = w.newTrx(s, s.takeISO(), true), true
			}
			r.mark = len(r.t.undo)
		}
		w.execute(r)
	}
	w.now += int64(statementTime)
}

func shortText(rq request) string {
	if rq.parsed != nil {
		return rq.parsed.v.tpl.name
	}
	return "statement"
}

// connect opens a connection for p, unless the server is down.
func (w *World) connect(p *Process) {
	if w.down {
		w.now += int64(refusedTime)
		if w.trace != nil {
			w.tracef("%s connect: refused (server down)", p.Name())
		}
		p.proc.Deliver(reply{err: errRefused()})
		return
	}
	w.connID++
	w.connSeq[p.Name()]++
	s := &session{id: w.connID, name: fmt.Sprintf("%s#%d", p.Name(), w.connSeq[p.Name()]), p: p}
	c := &conn{p: p, s: s}
	s.c = c
	if len(w.sessions) >= 64 && len(w.sessions)&(len(w.sessions)-1) == 0 {
		w.sessions = dropClosed(w.sessions, func(s *session) bool { return s.closed })
	}
	w.sessions = append(w.sessions, s)
	p.conns = dropClosed(p.conns, func(c *conn) bool { return c.clientClosed && c.s.closed })
	p.conns = append(p.conns, c)
	p.counters.Connections++
	if w.trace != nil {
		w.tracef("%s connects: %s (id %d)", p.Name(), s.name, s.id)
	}
	w.now += int64(connectTime)
	p.proc.Deliver(reply{conn: c})
}

// dropClosed removes, in place and in order, the elements that are gone.
func dropClosed[T any](xs []T, gone func(T) bool) []T {
	j := 0
	for _, x := range xs {
		if !gone(x) {
			xs[j] = x
			j++
		}
	}
	clear(xs[j:])
	return xs[:j]
}

// endProcess is the end of a process's program: its sockets close (the
// server rolls back what they had open) and its pool is closed.
func (w *World) endProcess(p *Process) {
	for _, c := range p.conns {
		c.clientClosed, c.broken = true, true
		w.clientClose(c.s)
	}
	p.conns = nil
	p.hooks = nil
	if p.db != nil {
		p.db.Close()
	}
}

// call posts r, gives control back to the scheduler and returns the
// reply.
//
// A killed process stops with Proc.Stop (a panic its coroutine recovers
// at its top, running its deferred functions as runtime.Goexit would), but
// only at a safe call:
// one that database/sql makes with every lock it holds released by a
// deferred function (Exec, a query's first Rows.Next, dialling, closing a
// connection), or one made outside database/sql (Sleep, a fault). Were it
// to stop inside BeginTx, Commit or Rollback (or a query, were queries
// run in QueryContext), database/sql would skip the release of the
// transaction's or the connection's lock, and the deferred Rollback or
// Close of the caller (dbsem has both) would wait for it forever. So a
// killed process's unsafe call fails with driver.ErrBadConn instead, and
// database/sql, discarding the connection, closes it: the process stops
// there. Once it is unwinding, every call fails at once.
func (p *Process) call(r request, safe bool) reply {
	p.req = r
	rep, ok := p.w.base.Call(p, safe)
	if !ok {
		return reply{err: driver.ErrBadConn}
	}
	return rep
}

type reqKind uint8

const (
	reqStmt reqKind = iota
	reqConnect
)

type request struct {
	kind   reqKind
	c      *conn
	parsed *parsed
	b      binding
	err    error // the statement could not be recognised or bound
}

type reply struct {
	err      error
	conn     *conn
	affected int64
	lastID   int64
	cols     []string
	rows     [][]driver.Value
}

// Hooks.

// AfterStatements arranges for f to run right after the n-th statement of
// the process named name (counting every statement it sent, on all its
// connections, whatever became of it) was handled by the server, before
// the process hears the reply: a fault aimed at the middle of an
// operation. f runs in the scheduler and may call the World's faults. If
// no process is named name yet, the hook waits for the next one that is.
func (w *World) AfterStatements(name string, n int, f func()) {
	if p := w.live(name); p != nil {
		p.hooks = append(p.hooks, hook{n, f})
		return
	}
	w.pending[name] = append(w.pending[name], hook{n, f})
}

// fireHooks arms p's hooks due at its statement num.
func (w *World) fireHooks(p *Process, num int) {
	j := 0
	for _, h := range p.hooks {
		if h.n <= num {
			w.dueHooks = append(w.dueHooks, h.f)
		} else {
			p.hooks[j] = h
			j++
		}
	}
	clear(p.hooks[j:])
	p.hooks = p.hooks[:j]
}

// Timers.

// After runs f in the scheduler once d of virtual time has passed; f may
// call the World's faults.
func (w *World) After(d time.Duration, f func()) { w.after(d, f) }

// A timer is a sched.Timer, as the lock waits keep it.
type timer sched.Timer

func (t *timer) cancel() { (*sched.Timer)(t).Cancel() }

func (w *World) after(d time.Duration, fn func()) *timer {
	return (*timer)(w.sched.After(d, fn))
}

// tracef writes a line of the trace, if there is one. Callers that pass
// arguments look at w.trace first: boxing them for the call would cost an
// allocation each, trace or not.
func (w *World) tracef(format string, args ...any) { w.base.Tracef(format, args...) }

// Counters are what a process sent: statements by kind (every statement,
// whether or not the server could run it), and the connections it
// opened.
type Counters struct {
	Select, Insert, Update, Delete int
	Begin, Commit, Rollback        int // START TRANSACTION, COMMIT, ROLLBACK
	Other                          int // SET TRANSACTION, CREATE, DROP, unknown statements
	Connections                    int
}

// Statements is the number of statements counted.
func (c Counters) Statements() int {
	return c.Select + c.Insert + c.Update + c.Delete + c.Begin + c.Commit + c.Rollback + c.Other
}

func (c *Counters) count(k kind) {
	switch k {
	case kSelect:
		c.Select++
	case kInsert:
		c.Insert++
	case kUpdate:
		c.Update++
	case kDelete:
		c.Delete++
	case kBegin:
		c.Begin++
	case kCommit:
		c.Commit++
	case kRollback:
		c.Rollback++
	default:
		c.Other++
	}
}

// Counters returns what the process named name (the latest one of that
// name) has sent so far.
func (w *World) Counters(name string) Counters {
	if p, ok := w.base.Latest(name); ok {
		return p.counters
	}
	return Counters{}
}

// Unseen are the types a fingerprint of the world (internal/statehash)
// must leave out: its scheduler's machinery (sched.Scheduler.Unseen), and
// database/sql's pool of each process, whose state is its process's
// (a function of what the process was handed, which the fingerprint
// holds) and whose structures the hash cannot walk within its stack.
func (w *World) Unseen() []reflect.Type {
	return append(w.sched.Unseen(), reflect.TypeOf(&sql.DB{}), reflect.TypeOf(&sql.Conn{}), reflect.TypeOf(&sql.Tx{}))
}
