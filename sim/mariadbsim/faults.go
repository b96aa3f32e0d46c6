package mariadbsim

import "time"

// Faults. Each names its target process (the latest registered under the
// name; a name with no live process is ignored, and said so in the
// trace). Called from a process, a fault is a scheduling point of that
// process, applied when the scheduler serves it; from a timer or a hook,
// or outside Run, it applies at once.

// fault applies f as a step of the calling process, or at once.
func (w *World) fault(f func()) { w.base.Fault(f) }

// target returns the live process named name, tracing its absence.
func (w *World) target(fault, name string) *Process { return w.base.Target(fault, name) }

// Kill ends the process named name as a crash (or kill -9) would: its
// coroutine stops where it waits (in BeginTx, Commit or Rollback, on its
// way out of database/sql: see the package documentation) and runs no
// more of its own code, and its sockets close, so the server rolls back
// its open transactions and releases their locks, at once for a
// connection between statements. A connection waiting for a lock is the
// exception, as on MariaDB, which notices a gone client only when it
// answers: its transaction keeps its locks until the wait ends (granted
// or timed out), then rolls back.
func (w *World) Kill(name string) { w.base.Kill(name) }

// KillConnections is KILL CONNECTION on each of the process's open
// connections: a statement in progress (waiting for a lock) ends, open
// transactions roll back and release their locks, the connections close.
// The process hears of it when it next uses one: a statement on a
// connection it holds (in a transaction, or a *sql.Conn) fails with
// go-sql-driver/mysql's "invalid connection" (a waiting statement at
// once), and a pooled connection fails database/sql's check before reuse
// (driver.ErrBadConn), so that database/sql dials a new one.
func (w *World) KillConnections(name string) {
	w.fault(func() {
		p := w.target("kill connections of", name)
		if p == nil {
			return
		}
		if w.trace != nil {
			w.tracef("KILL CONNECTION of every connection of %s", name)
		}
		for _, c := range p.conns {
			w.killSession(c.s, "KILL CONNECTION")
		}
	})
}

// Pause stops scheduling the process (SIGSTOP); virtual time goes on. A
// statement it is blocked in still completes, or times out, on the
// server; the process sees the outcome once resumed.
func (w *World) Pause(name string) { w.base.Pause(name) }

// Resume schedules a paused process again (SIGCONT).
func (w *World) Resume(name string) { w.base.Resume(name) }

// Partition cuts the network between the process named name and the
// server both ways, as a partition does to TCP (bytes wait; nothing is
// reset): its statements, and its connects, reach the server only once
// it heals, and the server's replies to it wait too. The process runs
// on (its Sleeps end, its clock reads), and the server notices nothing:
// a transaction of the process keeps its locks, a statement of it that
// waits for a lock still gets it, or times out.
func (w *World) Partition(name string) { w.base.Partition(name, "partitioned") }

// Heal ends the process's partition: what waited on either side goes
// through, in the order it was sent.
func (w *World) Heal(name string) { w.base.Heal(name) }

// SkewClock sets, from now on, the clock offset of the host the process
// named name runs on: UTC_TIMESTAMP(6) in its sessions and its
// Process.Now read the true time plus offset. With name "" it sets the
// server's own clock offset instead, which every session reads (on top
// of its process's offset) and no Process.Now does. An offset of 0 puts a
// clock right. The offset belongs to the name: a process registered
// again under it (a restarted client) keeps it.
func (w *World) SkewClock(name string, offset time.Duration) {
	w.fault(func() {
		if name == "" {
			w.serverSkew = offset
			if w.trace != nil {
				w.tracef("server clock offset %v", offset)
			}
			return
		}
		if offset == 0 {
			delete(w.skews, name)
		} else {
			w.skews[name] = offset
		}
		if w.trace != nil {
			w.tracef("%s clock offset %v", name, offset)
		}
	})
}

// DropCommitReply arms a fault on the process: the server applies its
// next COMMIT, but the reply is lost and the connection breaks; the
// client gets "invalid connection" (dbsem's ErrUnknownOutcome).
func (w *World) DropCommitReply(name string) {
	w.fault(func() {
		if p := w.target("drop the commit reply of", name); p != nil {
			p.dropCommit = true
			if w.trace != nil {
				w.tracef("%s: its next COMMIT's reply will be lost", name)
			}
		}
	})
}

// Restart restarts the server: every connection is killed (statements in
// progress fail with "invalid connection"), uncommitted work rolls back,
// committed rows stay (InnoDB is durable), and connections are refused
// until downtime has passed.
func (w *World) Restart(downtime time.Duration) {
	w.fault(func() {
		if w.trace != nil {
			w.tracef("server restarts, down for %v", downtime)
		}
		// Down first: the shutdown's rollbacks resolve no deadlocks (see
		// deadlockCheck); every waiter is killed anyway.
		w.down = true
		sessions := w.sessions
		w.sessions = nil
		for _, s := range sessions {
			w.killSession(s, "server shutdown")
		}
		w.upGen++
		gen := w.upGen
		w.after(downtime, func() {
			if w.upGen == gen {
				w.down = false
				w.tracef("server up")
			}
		})
	})
}
