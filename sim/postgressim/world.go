package postgressim

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
	"github.com/lockprover/lockprover/sim/simworld"
)

// A World is one simulated PostgreSQL server (a Server) and the client
// processes that use it, on the scheduler every simulator shares
// (sim/sched, through sim/simworld): the pg-advisory family's simulator
// target. A process opens sessions (Process.Connect) and sends statements
// on them (Conn); each statement is a scheduling point, reaches the
// server at once unless a partition holds it, and takes statementTime of
// virtual time there; a connect takes connectTime. The server ends idle
// sessions by its clock, which is the World's.
//
// Faults, each on a process by name (Kill, Pause, Resume, Partition,
// Heal) or on a client's sessions (Terminate) or on the server
// (Restart):
//
//   - a killed process's connections close at once, so the server ends
//     its sessions and frees their locks, partitioned or not (as the
//     family's real runner heals a client's proxy before it kills it); a
//     process that returns leaves its sessions open, to idle;
//   - a paused process is not scheduled (SIGSTOP); its sessions idle;
//   - a partition holds what the process sends until it heals (its
//     sessions idle meanwhile, and end when their timeout passes); a
//     statement held longer than Options.Timeout fails at the client
//     (ErrTimeout, its outcome unknown), which closes the connection:
//     what was held, then the close, reach the server on the heal;
//   - Terminate is pg_terminate_backend of every live session a client's
//     processes opened (FATAL 57P01 at their next statement);
//   - Restart is a fast shutdown: every session ends, and connects are
//     refused (ErrRefused) while the server is down.
//
// Its methods must be called from the goroutine that calls Run, from a
// process while it runs, from a timer, or when no Run is in progress.
type World struct {
	now     int64
	sched   sched.Scheduler[*Process, reply]
	base    simworld.Base[*Process, reply]
	srv     *Server
	timeout time.Duration
	upAt    int64   // a restarted server refuses connects until then
	all     []*Conn // every connection opened, in order
}

// Options configure a World.
type Options struct {
	// Decide picks one of n (at least 2) runnable processes to move
	// next; nil always picks the first (in the order they were
	// registered).
	Decide func(n int) int
	// KeepInputs makes each process keep what it was handed each time
	// it moved (sched.Config.KeepInputs): for an exhaustive search's
	// fingerprint of the state (Unseen says what it must leave out).
	KeepInputs bool
	// Trace, if set, receives one line per event: the virtual time in
	// nanoseconds, then what happened.
	Trace io.Writer
	// Timeout is how long a client waits for a statement's reply (held
	// by a partition) before it gives up and closes the connection; 0
	// waits for ever.
	Timeout time.Duration
}

// Virtual time a statement and a connect take, as the client sees them.
const (
	statementTime = 100 * time.Microsecond
	connectTime   = 500 * time.Microsecond
)

// The errors a client gets besides the server's (ErrTerminated, ErrIdle).
var (
	// ErrRefused: the server is down (restarting); nothing was sent.
	ErrRefused = errors.New("pgsim: connection refused (the server is restarting)")
	// ErrTimeout: the statement's reply did not come in time; the client
	// closed the connection, and cannot tell whether the statement ran.
	ErrTimeout = errors.New("pgsim: timeout: no reply to the statement")
)

// NewWorld returns a World with an empty server, up, at virtual time 0.
func NewWorld(o Options) *World {
	w := &World{srv: New(), timeout: o.Timeout}
	w.base.Init(&w.sched, simworld.Config[*Process, reply]{
		Name: "pgsim", Clock: &w.now, Trace: o.Trace, Decide: o.Decide, KeepInputs: o.KeepInputs,
		Proc: procOf, Serve: w.serve, Exit: w.exit,
	})
	return w
}

func procOf(p *Process) *simworld.Proc[*Process, reply] { return &p.proc }

// Now returns the virtual time in nanoseconds since NewWorld.
func (w *World) Now() int64 { return w.now }

// Keep says, while the Decider picks which process moves, which of its
// choices keeps the process that moved last moving; -1 if none does.
func (w *World) Keep() int { return w.base.Keep() }

// Go registers a client process named name that will run fn. It may be
// called before Run, or during Run from a process or a timer; a name may
// be reused once its process has ended.
func (w *World) Go(name string, fn func(p *Process)) { w.base.Go(&Process{w: w}, name, fn) }

// Run runs every process until none can move and no timer is pending,
// and returns the first panic of a process as an error.
func (w *World) Run() error { return w.base.Run() }

// After runs f in the scheduler once d of virtual time has passed.
func (w *World) After(d time.Duration, f func()) { w.sched.After(d, f) }

// server is the server, its clock brought to the World's: the sessions
// idle past their timeout meanwhile have ended.
func (w *World) server() *Server {
	w.srv.Sleep(time.Duration(w.now) - w.srv.Now())
	return w.srv
}

// A Process is one client program: a coroutine that moves only when the
// scheduler lets it, with the sessions it opened.
type Process struct {
	w     *World
	proc  simworld.Proc[*Process, reply]
	req   request
	conns []*Conn
}

// Name returns the name the process was registered with.
func (p *Process) Name() string { return p.proc.Name() }

// Now is the process's clock: the virtual time, from the Unix epoch.
func (p *Process) Now() time.Time { return time.Unix(0, p.w.now) }

// Sleep lets d of virtual time pass for the process.
func (p *Process) Sleep(d time.Duration) { p.w.base.Sleep(p, d) }

// A Conn is one session, as its client holds it.
type Conn struct {
	p      *Process
	pid    int
	closed bool // by its client (Close, or a statement that timed out)
}

// PID is the session's server process id.
func (c *Conn) PID() int { return c.pid }

// Closed says whether the client closed the connection.
func (c *Conn) Closed() bool { return c.closed }

type op uint8

const (
	opConnect op = iota
	opTry
	opHolds
	opUnlock
	opClose
)

var opNames = [...]string{"connect", "pg_try_advisory_lock", "pg_locks", "pg_advisory_unlock", "close"}

type request struct {
	op   op
	c    *Conn
	key  int64
	idle time.Duration
	// waiting: the client waits for the reply (not yet given up).
	waiting bool
}

type reply struct {
	ok   bool
	conn *Conn
	err  error
}

// call posts r and returns its reply. A killed process stops here.
func (p *Process) call(r request) reply {
	p.req = r
	rep, _ := p.w.base.Call(p, true)
	return rep
}

// Connect opens a session with idle_session_timeout idle (0: none).
func (p *Process) Connect(idle time.Duration) (*Conn, error) {
	r := p.call(request{op: opConnect, idle: idle})
	return r.conn, r.err
}

func (c *Conn) statement(o op, key int64) (bool, error) {
	if c.closed {
		return false, ErrClosed
	}
	r := c.p.call(request{op: o, c: c, key: key})
	return r.ok, r.err
}

// TryLock is pg_try_advisory_lock(key).
func (c *Conn) TryLock(key int64) (bool, error) { return c.statement(opTry, key) }

// Holds is whether pg_locks shows key granted to the session.
func (c *Conn) Holds(key int64) (bool, error) { return c.statement(opHolds, key) }

// Unlock is pg_advisory_unlock(key).
func (c *Conn) Unlock(key int64) (bool, error) { return c.statement(opUnlock, key) }

// Close closes the connection: the server ends the session once the close
// reaches it (a partition holds it).
func (c *Conn) Close() {
	if c.closed {
		return
	}
	c.closed = true
	c.p.call(request{op: opClose, c: c})
}

// serve handles p's posted connect, statement or close.
func (w *World) serve(p *Process) {
	r := p.req
	p.req = request{}
	p.proc.Block()
	if r.op == opClose {
		// The client does not wait for a close; a partition holds it
		// as anything else the client sends.
		if l := p.proc.Link(); l.Cut() {
			c := r.c
			l.Hold(func() { w.end(c) })
		} else {
			w.send(p, r)
		}
		p.proc.Deliver(reply{})
		w.sched.Continue(&p.proc.Proc)
		return
	}
	r.waiting = true
	rp := &r
	if l := p.proc.Link(); l.Cut() {
		if w.base.Tracing() {
			w.base.Tracef("%s: its %s waits for the partition to heal", p.Name(), opNames[r.op])
		}
		l.Hold(func() { w.send(p, *rp); rp.waiting = false })
		if w.timeout > 0 {
			w.sched.After(w.timeout, func() {
				if !rp.waiting || p.proc.Ended() {
					return
				}
				rp.waiting = false
				w.base.Tracef("%s: no reply to its %s in %v: it closes the connection", p.Name(), opNames[r.op], w.timeout)
				if r.c != nil {
					r.c.closed = true
					l.Hold(func() { w.end(r.c) })
				}
				p.proc.Deliver(reply{err: ErrTimeout})
			})
		}
		return
	}
	w.send(p, r)
	w.sched.Continue(&p.proc.Proc)
}

// send serves r as it reaches the server, and delivers its reply unless
// the client has given up on it.
func (w *World) send(p *Process, r request) {
	var rep reply
	switch r.op {
	case opConnect:
		w.now += int64(connectTime)
		if w.now < w.upAt {
			w.base.Tracef("%s connect: refused (the server is down)", p.Name())
			rep.err = ErrRefused
			break
		}
		c := &Conn{p: p, pid: w.server().Open(r.idle)}
		p.conns = append(p.conns, c)
		w.all = append(w.all, c)
		w.base.Tracef("%s connects: session %d, idle_session_timeout %v", p.Name(), c.pid, r.idle)
		rep.conn = c
	case opClose:
		w.end(r.c)
		return
	default:
		w.now += int64(statementTime)
		s := w.server()
		switch r.op {
		case opTry:
			rep.ok, rep.err = s.TryLock(r.c.pid, r.key)
		case opHolds:
			rep.ok, rep.err = s.Holds(r.c.pid, r.key)
		case opUnlock:
			rep.ok, rep.err = s.Unlock(r.c.pid, r.key)
		}
		if rep.err != nil {
			// FATAL: the server had ended the session, and closes the
			// connection once it has said why.
			r.c.closed = true
		}
		if w.base.Tracing() {
			w.base.Tracef("%s session %d: %s(%d) -> %s", p.Name(), r.c.pid, opNames[r.op], r.key, traced(rep.ok, rep.err))
		}
	}
	if r.waiting {
		p.proc.Deliver(rep)
	}
}

// traced says a statement's outcome in the trace.
func traced(ok bool, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(ok)
}

// end ends c's session from its client's side.
func (w *World) end(c *Conn) {
	c.closed = true
	if s := w.server(); s.alive(c.pid) {
		s.Close(c.pid)
		w.base.Tracef("session %d closed by its client", c.pid)
	}
}

// exit is the end of a process: a killed one's connections close. One
// that returned leaves its sessions open (a client done with its work,
// whose session idles until the server ends it).
func (w *World) exit(p *Process) {
	if !p.proc.Killed() {
		return
	}
	for _, c := range p.conns {
		w.end(c)
	}
	p.conns = nil
}

// Faults. Called from a process, a fault is a scheduling point of that
// process; from a timer or outside Run, it applies at once.

// Kill ends the process named name as a crash would: it runs no more of
// its own code, and its connections close.
func (w *World) Kill(name string) { w.base.Kill(name) }

// Pause stops scheduling the process named name (SIGSTOP).
func (w *World) Pause(name string) { w.base.Pause(name) }

// Resume schedules a paused process again (SIGCONT).
func (w *World) Resume(name string) { w.base.Resume(name) }

// Partition holds what the process named name sends until Heal.
func (w *World) Partition(name string) { w.base.Partition(name, "partitioned from the server") }

// Heal ends the process's partition: what it held reaches the server, in
// the order sent.
func (w *World) Heal(name string) { w.base.Heal(name) }

// Terminate ends, as pg_terminate_backend does, every live session that
// the processes of client opened (client, and its incarnations client#2,
// client#3, ...), and reports how many.
func (w *World) Terminate(client string) (n int) {
	w.base.Fault(func() {
		s := w.server()
		for _, c := range w.conns(client) {
			if s.alive(c.pid) {
				s.terminate(c.pid)
				n++
				w.base.Tracef("pg_terminate_backend(%d)", c.pid)
			}
		}
	})
	return n
}

// conns are the connections of client's processes, in the order opened.
func (w *World) conns(client string) []*Conn {
	var out []*Conn
	for _, c := range w.all {
		if n := c.p.Name(); n == client || strings.HasPrefix(n, client+"#") {
			out = append(out, c)
		}
	}
	return out
}

// Restart takes the server down, as a fast shutdown does (every session
// ends), and has it refuse connects for down.
func (w *World) Restart(down time.Duration) {
	w.base.Fault(func() {
		w.server().Restart()
		w.upAt = w.now + int64(down)
		w.base.Tracef("the server restarts: down for %v", down)
	})
}

// Unseen are the types a fingerprint of the world (internal/statehash)
// must leave out: its scheduler's machinery (sched.Scheduler.Unseen).
func (w *World) Unseen() []reflect.Type { return w.sched.Unseen() }
