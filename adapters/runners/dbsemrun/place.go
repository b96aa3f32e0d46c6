package dbsemrun

import (
	"context"
	"database/sql"
	"io"
	"reflect"
	"sync"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/dbsem"
	"github.com/lockprover/lockprover/sim/mariadbsim"
)

// A place is where a plan's processes run and its faults strike: the
// simulated database (simPlace) or a real MariaDB (mariadbPlace). The
// runner is the same on both.
//
// The runner's state is guarded by the place's Locker: a process holds
// it while it records and decides, and lets go of it around every call
// that may wait (a statement, a sleep). The simulator runs one process at
// a time and needs no lock (its Locker does nothing); a real place's
// processes, timers and statement hooks run at once and share a mutex.
// Callbacks (After, AfterStatements) run with the lock held.
type place interface {
	sync.Locker
	// Target is the history's clock (the time since the run began) and
	// the faults on a process (its current incarnation's name, Aim.Process):
	// kill, pause and its resume, partition and its heal; force-close,
	// its connections closed from the server's side (KILL CONNECTION:
	// run.ErrStruckNothing while the server is down for a restart, which
	// has ended those connections already); drop-reply, the reply to its
	// next COMMIT lost. And the server's: restart-broker, which refuses
	// connections for Aim.Down (run.ErrStruckNothing from a real server
	// whose restart is still under way, down or starting: two mariadbds
	// would race for its port), the runner going on meanwhile, or, with
	// Aim.Wait, returning once a real server answers again (the
	// simulator's restart is never waited out); and clock-skew, which
	// sets the database's clock offset from true time to Aim.Offset,
	// whichever clock fault moved it (the runner sums a clock-jump's, and
	// a clock-reset sets it to 0).
	run.Target
	// Go starts process name running f.
	Go(name string, f func(proc))
	// After runs f once d has passed.
	After(d time.Duration, f func())
	// AfterStatements runs f right after the n-th statement of the process
	// named name was handled by the server, before the process hears the
	// reply.
	AfterStatements(name string, n int, f func())
	// droppedReplies is how many COMMIT replies of process name were
	// dropped so far, where the place can tell (known false: the
	// simulator, whose drop always strikes the next COMMIT, which only the
	// runner's own reference sends there).
	droppedReplies(name string) (n int, known bool)
	// open opens the semaphore for client name's incarnation proc: the
	// reference with options o, or the implementation under test, told s.
	// It may wait: the runner calls it without its lock.
	open(ctx context.Context, proc proc, name string, o dbsem.Options, s Session) (Client, error)
	// stuckAfter is how long the runner waits for its clients to finish
	// before it calls the plan stuck.
	stuckAfter() time.Duration
}

// A proc is one process's view of the place.
type proc interface {
	// DB is the process's connection pool to the database.
	DB() *sql.DB
	// Sleep lets d pass for the process.
	Sleep(d time.Duration)
	// Now is true time by the process's clock (before any client clock
	// fault, which the runner adds).
	Now() time.Time
}

// simPlace is the simulated database: deterministic, in virtual time.
type simPlace struct {
	w *mariadbsim.World
}

// newSimPlace makes a simulated database that decides its schedule by
// p's Schedule, then by p's ScheduleSeed, and the state an exhaustive
// search's choices are made in, which the runner names once it exists.
func newSimPlace(p *Plan, trace io.Writer) (simPlace, func(unseen []reflect.Type, of ...any)) {
	var w *mariadbsim.World
	decide, state := p.Decider(0x6c70, func() int { return w.Keep() })
	w = mariadbsim.New(mariadbsim.Options{Decide: decide, KeepInputs: p.Searched(), Trace: trace})
	return simPlace{w}, state
}

func (simPlace) Lock()   {}
func (simPlace) Unlock() {}

func (b simPlace) Go(name string, f func(proc)) {
	b.w.Go(name, func(p *mariadbsim.Process) { f(p) })
}
func (b simPlace) Now() int64                                   { return b.w.Now() }
func (b simPlace) After(d time.Duration, f func())              { b.w.After(d, f) }
func (b simPlace) AfterStatements(name string, n int, f func()) { b.w.AfterStatements(name, n, f) }
func (b simPlace) droppedReplies(string) (int, bool)            { return 0, false }

// Strike kills, pauses or partitions the process a names, closes its
// connections or loses its next COMMIT's reply; or restarts the server
// (a restart while down is down for the downtime from then), or sets its
// clock.
func (b simPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.ForceClose:
		b.w.KillConnections(a.Process)
		return nil
	case histories.DropReply:
		b.w.DropCommitReply(a.Process)
		return nil
	case histories.RestartBroker:
		b.w.Restart(a.Down)
		return nil
	case histories.ClockSkew:
		if a.Process != "" {
			return run.CannotStrike(a) // a client's clock is its own: the runner's
		}
		b.w.SkewClock("", a.Offset)
		return nil
	}
	return run.StrikeProcess(a, b.w.Kill, b.w.Pause, b.w.Partition)
}

// End resumes or heals the process a names.
func (b simPlace) End(a run.Aim) error { return run.EndProcess(a, b.w.Resume, b.w.Heal) }

func (simPlace) stuckAfter() time.Duration { return time.Hour }

func (simPlace) open(ctx context.Context, proc proc, _ string, o dbsem.Options, _ Session) (Client, error) {
	sem, err := dbsem.Open(ctx, proc.DB(), o)
	if err != nil {
		return nil, err
	}
	return reference{sem}, nil
}
