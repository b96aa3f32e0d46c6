package redissim

import (
	"fmt"
	"time"
)

// Faults. A server is named by its index, from 0; a client by its name
// (the latest process registered under it; a name with no live process is
// ignored, and said so in the trace). Called from a process, a fault is a
// scheduling point of that process, applied when the scheduler serves it;
// from a timer, or outside Run, it applies at once. A server index out of
// range is an error, and nothing happens.

// fault applies f as a step of the calling process, or at once.
func (w *World) fault(f func()) { w.base.Fault(f) }

func (w *World) serverAt(fault string, i int) (*server, error) {
	if i < 0 || i >= len(w.servers) {
		return nil, fmt.Errorf("redissim: %s of server %d: there are %d servers", fault, i, len(w.servers))
	}
	return w.servers[i], nil
}

// Crash crashes server i (SIGKILL): the commands waiting for it are lost
// and their clients' connections reset; without persistence its keys are
// gone, with Always they stay; its script cache is empty. It refuses
// connections until Restart. Crashing a server that is down does nothing.
func (w *World) Crash(i int) error {
	s, err := w.serverAt("crash", i)
	if err != nil {
		return err
	}
	w.fault(func() { s.crash() })
	return nil
}

func (s *server) crash() {
	if s.down {
		return
	}
	s.w.tracef("%s crashes (persistence %s)", s.name, s.pers)
	s.down = true
	s.upGen++
	inbox := s.inbox
	s.inbox = nil
	for _, m := range inbox {
		s.w.deliver(m.rd, m.slot, Result{Err: errReset})
	}
	s.resetBlocked()
	s.resetSubs()
	if s.pers == None {
		s.keys = map[string]*entry{}
	}
	s.scripts, s.sources = map[string]bool{}, map[string]string{}
}

// Restart brings server i down (as Crash: a clean shutdown keeps no more,
// since with Always every write was already on disk) and up again once
// downtime has passed; a server already down comes up after downtime.
// Clients' pooled connections do not fail once it is back (go-redis
// drops the connections the server closed).
func (w *World) Restart(i int, downtime time.Duration) error {
	s, err := w.serverAt("restart", i)
	if err != nil {
		return err
	}
	if downtime < 0 {
		return fmt.Errorf("redissim: restart of server %d: downtime %v is negative", i, downtime)
	}
	w.fault(func() {
		s.crash()
		gen := s.upGen
		w.tracef("%s down for %v", s.name, downtime)
		w.sched.After(downtime, func() {
			if s.upGen == gen {
				s.down = false
				w.tracef("%s up", s.name)
			}
		})
	})
	return nil
}

// Pause stops server i (SIGSTOP): commands sent to it wait, unanswered
// (their clients time out), until Resume; its clock runs on, so that keys
// whose deadline passed meanwhile are gone when it resumes.
func (w *World) Pause(i int) error {
	s, err := w.serverAt("pause", i)
	if err != nil {
		return err
	}
	w.fault(func() {
		s.paused = true
		if s.proc != nil {
			s.proc.proc.Pause()
		}
		w.tracef("%s paused", s.name)
	})
	return nil
}

// Resume continues a paused server (SIGCONT): it takes the commands that
// waited, in order.
func (w *World) Resume(i int) error {
	s, err := w.serverAt("resume", i)
	if err != nil {
		return err
	}
	w.fault(func() {
		if s.paused {
			s.paused = false
			if s.proc != nil {
				s.proc.proc.Resume()
			}
			w.tracef("%s resumed", s.name)
			s.lateTimeouts()
		}
	})
	return nil
}

// ClockJump moves server i's clock by d (forward if positive): every
// key's deadline, an absolute time on that clock, comes d closer (a key
// with no more than d left is gone at once). The server keeps the offset
// across restarts; the clients' clocks do not move.
func (w *World) ClockJump(i int, d time.Duration) error {
	s, err := w.serverAt("clock jump", i)
	if err != nil {
		return err
	}
	w.fault(func() {
		s.skew += d
		w.tracef("%s clock jumps %v (offset %v)", s.name, d, s.skew)
		s.rearm()
	})
	return nil
}

// Partition cuts the network between the client named name and server i
// both ways, as a partition does to TCP (bytes wait; nothing is reset):
// its commands reach the server only once it heals, and the server's
// replies to it wait too (its rounds time out meanwhile). The server
// notices nothing.
func (w *World) Partition(name string, i int) error {
	s, err := w.serverAt("partition", i)
	if err != nil {
		return err
	}
	w.fault(func() {
		if p := w.target("partition", name); p != nil && !p.cut[s.id] {
			p.cut[s.id] = true
			w.tracef("%s partitioned from %s", name, s.name)
		}
	})
	return nil
}

// Heal ends the partition between the client named name and server i:
// what waited goes through, in the order it was sent (a command still
// runs on the server, though its client may have stopped waiting).
func (w *World) Heal(name string, i int) error {
	s, err := w.serverAt("heal", i)
	if err != nil {
		return err
	}
	w.fault(func() {
		p := w.target("heal", name)
		if p == nil || !p.cut[s.id] {
			return
		}
		delete(p.cut, s.id)
		w.tracef("%s healed from %s", name, s.name)
		var keep, now []held
		for _, h := range p.held {
			if h.server == s.id {
				now = append(now, h)
			} else {
				keep = append(keep, h)
			}
		}
		p.held = keep
		for _, h := range now {
			h.f()
		}
	})
	return nil
}

// DropReply arms a fault between the client named name and server i: the
// server runs the client's next command there, but the reply is lost and
// the connection resets (the client gets an error at once, the outcome
// unknown to it).
func (w *World) DropReply(name string, i int) error {
	s, err := w.serverAt("drop a reply of", i)
	if err != nil {
		return err
	}
	w.fault(func() {
		if p := w.target("drop the reply of", name); p != nil {
			p.drop[s.id] = true
			w.tracef("%s: its next reply from %s will be lost", name, s.name)
		}
	})
	return nil
}

// Kill ends the client named name as a crash would: it stops where it
// waits and runs no more of its own code (its deferred functions run),
// and so do its tasks (PriorityEnv.Go). Commands it had sent still run on
// their servers, but a blocked BLPOP is forgotten (its connection closes)
// and its subscriptions end.
func (w *World) Kill(name string) { w.base.Kill(name) }

// target returns the live client named name, tracing its absence.
func (w *World) target(fault, name string) *Process { return w.base.Target(fault, name) }

// Keys returns the live keys of server i and their values, sorted by
// key, for tests and checks that a run left nothing behind (what the
// server holds now: nothing while it is down).
func (w *World) Keys(i int) ([]string, error) {
	s, err := w.serverAt("keys", i)
	if err != nil {
		return nil, err
	}
	if s.down {
		return nil, nil
	}
	var out []string
	for _, k := range s.live() {
		out = append(out, k+"="+s.keys[k].show())
	}
	return out, nil
}

func (p Persistence) String() string {
	switch p {
	case None:
		return "none"
	case Always:
		return "fsync-always"
	}
	return fmt.Sprintf("Persistence(%d)", int(p))
}
