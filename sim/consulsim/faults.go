package consulsim

import (
	"fmt"
	"slices"
	"time"
)

// Faults. A client is named by its name (the latest process registered
// under it; a name with no live process is ignored, and said so in the
// trace). Called from a process, a fault is a scheduling point of that
// process, applied when the scheduler serves it; from a timer, or outside
// Run, it applies at once.

// fault applies f as a step of the calling process, or at once.
func (w *World) fault(f func()) { w.base.Fault(f) }

// target returns the live client named name, tracing its absence.
func (w *World) target(fault, name string) *Process { return w.base.Target(fault, name) }

// Kill ends the client named name as a crash would: it stops where it
// waits and runs no more of its own code (its deferred functions run).
// Calls it had sent still take effect; its sessions live on until their
// TTL runs out.
func (w *World) Kill(name string) { w.base.Kill(name) }

// Pause stops the client named name (SIGSTOP, a long GC pause): it is
// not scheduled until Resume, while the server's timers run on; an
// answer that arrives meanwhile waits for it.
func (w *World) Pause(name string) { w.base.Pause(name) }

// Resume continues a paused client (SIGCONT).
func (w *World) Resume(name string) { w.base.Resume(name) }

// Partition cuts the network between the client named name and the
// server both ways, as a partition does to TCP (bytes wait; nothing is
// reset): its calls reach the server only once it heals, and the
// server's answers wait too (with Options.Timeout, its calls time out
// meanwhile). The server notices nothing: the client's sessions expire
// unless renewed.
func (w *World) Partition(name string) { w.base.Partition(name, "partitioned from the server") }

// Heal ends the client's partition: what waited goes through, in the
// order it was sent (a call still takes effect, though its client may
// have stopped waiting).
func (w *World) Heal(name string) { w.base.Heal(name) }

// DropReply arms a fault on the client named name: the server applies
// its next call, but the answer is lost and the connection resets (the
// client gets an error, the outcome unknown to it).
func (w *World) DropReply(name string) {
	w.fault(func() {
		if p := w.target("drop the reply of", name); p != nil {
			p.drop = true
			w.tracef("%s: its next reply will be lost", name)
		}
	})
}

// ForceClose closes the server's side of the connections of the client
// named name, as a server (or a proxy in front of it) that cuts them
// does, and reports whether it struck (a live client of that name). The
// call the client waits for fails with a reset: one the server has
// applied (a write answered, its answer not yet arrived) took effect, its
// outcome unknown to the client; one the server holds (a wait for a
// change, an etcd renewal waiting for its lease's revocation) ends; one
// not yet at the server (not yet sent, or held on its way by a partition)
// is lost and never takes effect. The client connects again at its
// next call. Nothing else changes on the server: sessions (etcd: leases)
// are not tied to a connection, so they live on until their TTL runs out
// unless renewed; a drop-reply armed for the client stays armed (no reply
// was lost).
func (w *World) ForceClose(name string) (struck bool) {
	w.fault(func() {
		p := w.target("force-close", name)
		if p == nil {
			return
		}
		struck = true
		w.tracef("server: closes %s's connection", name)
		p.conn++
		w.srv.cut(p)
		if c := p.cur; c != nil && !c.done {
			w.tracef("server -> %s: %s fails, the connection reset", name, c.what)
			c.arrived = true // an answer on its way is lost with the connection
			w.deliver(c, result{err: errReset})
		}
	})
	return struck
}

// Restart brings the server down and up again once downtime has passed:
// every call it holds or has yet to answer fails (the connection resets),
// calls meanwhile are refused. A Consul -dev agent comes back empty (its
// indexes start again); a persistent Consul agent and etcd come back with
// every session, key and index, and every session's TTL starts again from
// when it is up (etcd: plus an election timeout). Restarting a server
// that is down brings it up after downtime from now.
func (w *World) Restart(downtime time.Duration) error {
	if downtime < 0 {
		return fmt.Errorf("consulsim: restart: downtime %v is negative", downtime)
	}
	if w.cl != nil {
		return fmt.Errorf("consulsim: restart: a cluster's nodes restart by Strike")
	}
	w.fault(func() {
		s := w.srv
		s.crash()
		gen := s.gen
		w.tracef("server: down for %v", downtime)
		w.sched.After(downtime, func() {
			if s.gen == gen && s.down {
				s.up()
			}
		})
	})
	return nil
}

// Sessions returns the ids of the server's sessions (leases), sorted:
// none while it is down.
func (w *World) Sessions() []string {
	if w.srv.down {
		return nil
	}
	var ids []string
	for id := range w.srv.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Keys returns the server's keys as key=value, and [session] for a key a
// session holds, sorted: none while it is down.
func (w *World) Keys() []string {
	if w.srv.down {
		return nil
	}
	var out []string
	for k, e := range w.srv.keys {
		s := k + "=" + string(e.value)
		if e.owner != "" {
			s += " [" + e.owner + "]"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
