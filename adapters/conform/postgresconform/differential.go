package postgresconform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/sim/postgressim"
)

// The differential: is the simulator telling the truth about PostgreSQL?
// rapid draws sequences of the statements the pg-advisory family's
// reference and the libraries on it send, on three sessions and two keys
// (open a session with or without an idle_session_timeout, try a lock,
// unlock, ask pg_locks, terminate another session, close one, sleep), and
// each runs on a real server and on a simulated one, which must give the
// same answers step by step (true, false, or "the session has ended"),
// and, after the last step, the same holder of each key.
//
// Idleness is judged by keeping every session's fate far from its
// deadline: a session's timeout (Idle, 200 ms) outlives the short sleeps
// of a whole sequence (at most 30 of 3 ms) and its statements (Slack),
// and is over after a long sleep (450 ms). Each sleep
// lasts as long on the simulator as it took in real time; a run whose
// statements took more than Slack in all, sleeps aside, cannot be judged
// (the server may then have counted a session idle that the simulator
// did not): it runs again, up to three times, and is counted unjudged
// after that. After a close or a terminate, the real run waits for the
// session's backend to be gone (its locks are released as it exits),
// which the simulator does at once.
const (
	Idle  = 200 * time.Millisecond
	Short = 3 * time.Millisecond
	Long  = 2*Idle + 50*time.Millisecond
	Slack = 80 * time.Millisecond

	sessions = 3
	keys     = 2
)

// A Step is one step of a drawn sequence.
type Step struct {
	Op     string // open, try, unlock, holds, terminate, close, sleep
	S, T   int    // the session (slot 0..2), and terminate's target
	Key    int    // 0 or 1
	Idle   bool   // open: with idle_session_timeout Idle
	LongZz bool   // sleep: Long, not Short
}

func (s Step) String() string {
	switch s.Op {
	case "open":
		if s.Idle {
			return fmt.Sprintf("open s%d idle_session_timeout=%v", s.S, Idle)
		}
		return fmt.Sprintf("open s%d", s.S)
	case "try", "unlock", "holds":
		return fmt.Sprintf("%s s%d k%d", s.Op, s.S, s.Key)
	case "terminate":
		return fmt.Sprintf("s%d terminates s%d", s.S, s.T)
	case "close":
		return fmt.Sprintf("close s%d", s.S)
	case "sleep":
		if s.LongZz {
			return fmt.Sprintf("sleep %v", Long)
		}
		return fmt.Sprintf("sleep %v", Short)
	}
	return s.Op
}

// Steps draws a sequence of 1 to 30 steps. Half of the steps are on
// session 0 and key 0, so that one session takes a key several times and
// lets it go as often (re-entrance) before it closes.
func Steps() *rapid.Generator[[]Step] {
	slot := rapid.OneOf(rapid.Just(0), rapid.IntRange(0, sessions-1))
	key := rapid.OneOf(rapid.Just(0), rapid.IntRange(0, keys-1))
	step := rapid.Custom(func(t *rapid.T) Step {
		s := Step{Op: rapid.SampledFrom([]string{"open", "try", "try", "try", "unlock", "unlock", "holds", "holds", "terminate", "close", "sleep", "sleep"}).Draw(t, "op"),
			S: slot.Draw(t, "s")}
		switch s.Op {
		case "open":
			s.Idle = rapid.Bool().Draw(t, "idle")
		case "try", "unlock", "holds":
			s.Key = key.Draw(t, "key")
		case "terminate":
			s.T = (s.S + rapid.IntRange(1, sessions-1).Draw(t, "target")) % sessions
		case "sleep":
			s.LongZz = rapid.IntRange(0, 5).Draw(t, "long") == 0
		}
		return s
	})
	return rapid.SliceOfN(step, 1, 30)
}

// An Outcome is how a differential run of one sequence ended.
type Outcome int

const (
	Agreed   Outcome = iota // the simulator answered as the server did
	Unjudged                // the statements took too long, three times
)

// A Divergence is a step where the simulator and the server disagreed.
type Divergence struct {
	Steps     []Step
	At        int // the step, or len(Steps) for the holders after the last
	Real, Sim string
}

func (d *Divergence) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pgsim: the simulator diverges from PostgreSQL at step %d: PostgreSQL %s, simulator %s\nsequence:\n", d.At, d.Real, d.Sim)
	for i, s := range d.Steps {
		mark := "  "
		if i == d.At {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%d. %v\n", mark, i, s)
	}
	return b.String()
}

// Differential runs steps on the server at url (as a superuser, for
// pg_terminate_backend) with keys key0 and key0+1, and on a fresh
// simulated server, and compares them: a *Divergence if they disagree,
// another error if the server could not be used.
func Differential(ctx context.Context, url string, key0 int64, steps []Step) (Outcome, error) {
	for range 3 {
		ok, err := differentialOnce(ctx, url, key0, steps)
		if err != nil || ok {
			return Agreed, err
		}
	}
	return Unjudged, nil
}

// slot is one session of a run, on both sides.
type slot struct {
	conn *pgx.Conn // nil: none open
	pid  int       // the simulator's
	open bool      // opened and not closed by the client
}

// differentialOnce runs steps once: false if the run cannot be judged
// (Slack exceeded).
func differentialOnce(ctx context.Context, url string, key0 int64, steps []Step) (judged bool, err error) {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return false, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	d := &diffRun{ctx: ctx, url: url, key0: key0, admin: admin, sim: postgressim.New()}
	defer d.closeAll()
	for i, st := range steps {
		start := time.Now()
		switch st.Op {
		case "open", "sleep", "close":
			if err := d.session(st, start); err != nil {
				return false, err
			}
			continue
		}
		real, simAns, sent := d.statement(st)
		if !sent {
			continue
		}
		d.busy += time.Since(start)
		if d.busy > Slack {
			return false, nil
		}
		if real != simAns {
			return true, &Divergence{Steps: steps, At: i, Real: real, Sim: simAns}
		}
	}
	if d.busy > Slack {
		return false, nil
	}
	return d.holders(steps)
}

// diffRun is one run of a sequence on both sides: the server's admin
// session, the simulated server, the sessions, and the statements' time
// so far.
type diffRun struct {
	ctx   context.Context
	url   string
	key0  int64
	admin *pgx.Conn
	sim   *postgressim.Server
	slots [sessions]slot
	busy  time.Duration // the statements' time, sleeps aside
}

// closeAll closes every session still open on the server, once its
// backend is gone.
func (d *diffRun) closeAll() {
	for _, s := range d.slots {
		if s.conn != nil {
			s.conn.Close(context.WithoutCancel(d.ctx))
			gone(d.ctx, d.admin, s.conn.PgConn().PID())
		}
	}
}

// session runs a step on a session itself, begun at start: an open (a
// session already in the slot closed first), a close, or a sleep, which
// lasts as long on the simulator as it took.
func (d *diffRun) session(st Step, start time.Time) error {
	sl := &d.slots[st.S]
	switch st.Op {
	case "open":
		if sl.conn != nil {
			closeSlot(d.ctx, d.admin, d.sim, sl)
		}
		cfg, err := pgx.ParseConfig(d.url)
		if err != nil {
			return err
		}
		idle := time.Duration(0)
		if st.Idle {
			idle = Idle
			cfg.RuntimeParams["idle_session_timeout"] = fmt.Sprint(Idle.Milliseconds())
		}
		if sl.conn, err = pgx.ConnectConfig(d.ctx, cfg); err != nil {
			return err
		}
		sl.pid, sl.open = d.sim.Open(idle), true
		d.busy += time.Since(start)
	case "sleep":
		dur := Short
		if st.LongZz {
			dur = Long
		}
		time.Sleep(dur)
		d.sim.Sleep(time.Since(start))
	case "close":
		if sl.conn != nil {
			closeSlot(d.ctx, d.admin, d.sim, sl)
		}
		d.busy += time.Since(start)
	}
	return nil
}

// statement sends a step's statement on both sides and returns their
// answers; sent is false where there was nothing to send: no session in
// the step's slot, or a terminate of one never opened or closed by its
// client (whose backend may still be exiting).
func (d *diffRun) statement(st Step) (real, simAns string, sent bool) {
	ctx, sim, sl := d.ctx, d.sim, &d.slots[st.S]
	if sl.conn == nil {
		return "", "", false
	}
	key := d.key0 + int64(st.Key)
	switch st.Op {
	case "try":
		real = answer(sl.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key))
		simAns = simAnswer(sim.TryLock(sl.pid, key))
	case "unlock":
		real = answer(sl.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", key))
		simAns = simAnswer(sim.Unlock(sl.pid, key))
	case "holds":
		real = answer(sl.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() AND objsubid = 1
			AND classid = $1::bigint::oid AND objid = $2::bigint::oid)`, uint64(key)>>32, uint64(key)&0xffffffff))
		simAns = simAnswer(sim.Holds(sl.pid, key))
	case "terminate":
		tg := &d.slots[st.T]
		if tg.conn == nil || !tg.open {
			return "", "", false
		}
		real = answer(sl.conn.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(tg.conn.PgConn().PID())))
		simAns = simAnswer(sim.Terminate(sl.pid, tg.pid))
		if real == "true" {
			gone(ctx, d.admin, tg.conn.PgConn().PID())
		}
	}
	return real, simAns, true
}

// holders compares, after the last of steps, who holds each key on both
// sides: a *Divergence if they disagree.
func (d *diffRun) holders(steps []Step) (judged bool, err error) {
	for k := range keys {
		key := d.key0 + int64(k)
		var pids []int32
		rows, err := d.admin.Query(d.ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
			AND classid = $1::bigint::oid AND objid = $2::bigint::oid`, uint64(key)>>32, uint64(key)&0xffffffff)
		if err != nil {
			return false, err
		}
		if pids, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
			return false, err
		}
		real, simAns := "nobody", "nobody"
		for i, s := range d.slots {
			if s.conn != nil && len(pids) == 1 && int32(s.conn.PgConn().PID()) == pids[0] {
				real = fmt.Sprintf("s%d", i)
			}
			if s.conn != nil && d.sim.Holder(key) == s.pid {
				simAns = fmt.Sprintf("s%d", i)
			}
		}
		if len(pids) > 1 || (len(pids) == 1 && real == "nobody") {
			real = fmt.Sprintf("pids %v", pids)
		}
		if real != simAns {
			return true, &Divergence{Steps: steps, At: len(steps), Real: "k" + fmt.Sprint(k) + " held by " + real, Sim: "k" + fmt.Sprint(k) + " held by " + simAns}
		}
	}
	return true, nil
}

// closeSlot closes a slot's session on both sides, the real one once its
// backend is gone.
func closeSlot(ctx context.Context, admin *pgx.Conn, sim *postgressim.Server, sl *slot) {
	pid := sl.conn.PgConn().PID()
	sl.conn.Close(ctx)
	gone(ctx, admin, pid)
	sim.Close(sl.pid)
	sl.conn, sl.open = nil, false
}

// gone waits (up to 5 s) until no backend has pid.
func gone(ctx context.Context, admin *pgx.Conn, pid uint32) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n); err != nil || n == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// answer is a boolean statement's answer: "true", "false", or "ended"
// (any error: the session is over, whether the server said why or the
// connection was found closed).
func answer(row pgx.Row) string {
	var b bool
	if err := row.Scan(&b); err != nil {
		return "ended"
	}
	return fmt.Sprint(b)
}

func simAnswer(b bool, err error) string {
	if err != nil {
		if errors.Is(err, postgressim.ErrTerminated) || errors.Is(err, postgressim.ErrIdle) || errors.Is(err, postgressim.ErrClosed) {
			return "ended"
		}
		return "error: " + err.Error()
	}
	return fmt.Sprint(b)
}

// A Report is what Conform found.
type Report struct {
	Sequences, Agreed, Unjudged int
	// Found is the first divergence, nil if none.
	Found *Divergence
}

// Conform runs n drawn sequences (sequence i of seed is Steps' example
// seed·100000+i) through Differential on the server at url, each with
// keys of its own, writing a line per sequence that does not agree to
// out and a summary; it stops at the first divergence. An error is a
// server that could not be used, or an interrupt.
func Conform(ctx context.Context, url string, n int, seed uint64, out io.Writer) (Report, error) {
	gen := Steps()
	rng := rand.New(rand.NewPCG(seed, 0x7067))
	base := int(seed % (1 << 40))
	var rep Report
	for i := range n {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		steps := gen.Example(base*100000 + i)
		o, err := Differential(ctx, url, int64(rng.Uint64()>>2), steps)
		var d *Divergence
		if errors.As(err, &d) {
			rep.Sequences++
			rep.Found = d
			fmt.Fprintf(out, "sequence %d (seed %d): %v", i, seed, d)
			break
		}
		if err != nil {
			return rep, err
		}
		rep.Sequences++
		if o == Unjudged {
			rep.Unjudged++
			fmt.Fprintf(out, "sequence %d (seed %d): unjudged: its statements took more than %v, three times\n", i, seed, Slack)
		} else {
			rep.Agreed++
		}
	}
	fmt.Fprintf(out, "pg-advisory: %d sequences (seed %d): %d agreed, %d unjudged, %d diverged\n",
		rep.Sequences, seed, rep.Agreed, rep.Unjudged, rep.Sequences-rep.Agreed-rep.Unjudged)
	return rep, nil
}
