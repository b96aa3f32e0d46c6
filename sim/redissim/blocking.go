package redissim

import (
	"slices"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
)

// Blocking pops. A BLPOP that finds every list empty leaves its client
// waiting on the server (its reply withheld) until a push to one of its
// lists serves it (after the pushing command, script or transaction is
// done, in the order clients blocked), its own timeout passes on the
// server's clock (exactly: Redis's ends on its 100 ms cron, up to 100 ms
// later), or the client gives up: a round's timeout closes the connection
// and the server forgets the command (through a partition, only once it
// heals: meanwhile a push may still serve the dead connection, and the
// element is lost, as on Redis); so does a killed client's end. A crash
// resets every blocked client's connection; a paused server times none
// out until it resumes; a clock jump brings their timeouts closer.

// A blocker is a client blocked in BLPOP on a server.
type blocker struct {
	m        *msg
	keys     []string
	deadline int64 // on the server's clock, in ms; 0: for ever
	timer    *sched.Timer
}

// block makes m's client wait, as b says.
func (s *server) block(m *msg, b blockOn) {
	bl := &blocker{m: m, keys: b.keys}
	if b.timeout > 0 {
		bl.deadline = s.clock() + b.timeout
	}
	s.blocked = append(s.blocked, bl)
	s.arm(bl)
}

// arm sets bl's timeout timer for the virtual time at which the server's
// clock passes its deadline.
func (s *server) arm(bl *blocker) {
	bl.timer.Cancel()
	bl.timer = nil
	if bl.deadline == 0 {
		return
	}
	at := (bl.deadline-epochMs+1)*int64(time.Millisecond) - int64(s.skew)
	bl.timer = s.w.sched.At(at, func() { s.timeout(bl) })
}

// rearm sets every blocker's timer again (the server's clock jumped).
func (s *server) rearm() {
	for _, bl := range s.blocked {
		s.arm(bl)
	}
}

func (s *server) timeout(bl *blocker) {
	if !slices.Contains(s.blocked, bl) {
		return
	}
	if s.paused {
		s.late = append(s.late, bl)
		return
	}
	s.unblock(bl)
	s.w.tracef("%s: the BLPOP of %s times out", s.name, bl.m.rd.p.Name())
	s.w.answer(bl.m.rd, bl.m.slot, s, Result{})
}

// lateTimeouts times out the blockers whose timeout came while the server
// was paused.
func (s *server) lateTimeouts() {
	late := s.late
	s.late = nil
	for _, bl := range late {
		s.timeout(bl)
	}
}

func (s *server) unblock(bl *blocker) {
	bl.timer.Cancel()
	s.blocked = slices.DeleteFunc(s.blocked, func(x *blocker) bool { return x == bl })
}

// signalReady notes that key was pushed to, if a client waits on it.
func (s *server) signalReady(key string) {
	if slices.Contains(s.ready, key) {
		return
	}
	for _, bl := range s.blocked {
		if slices.Contains(bl.keys, key) {
			s.ready = append(s.ready, key)
			return
		}
	}
}

// serveBlocked hands the lists pushed to to the clients waiting on them,
// in the order they blocked.
func (s *server) serveBlocked() {
	for len(s.ready) > 0 {
		key := s.ready[0]
		s.ready = s.ready[1:]
		for {
			e := s.lookup(key)
			i := slices.IndexFunc(s.blocked, func(bl *blocker) bool { return slices.Contains(bl.keys, key) })
			if e == nil || e.kind() != "list" || i < 0 {
				break
			}
			bl := s.blocked[i]
			s.unblock(bl)
			v := s.pop(key, e)
			s.w.tracef("%s: the BLPOP of %s pops %q of %s", s.name, bl.m.rd.p.Name(), v, key)
			s.w.answer(bl.m.rd, bl.m.slot, s, Result{Val: []any{key, v}})
		}
	}
}

// resetBlocked resets the connections of the clients blocked on the
// server (a crash).
func (s *server) resetBlocked() {
	blocked := s.blocked
	s.blocked, s.ready, s.late = nil, nil, nil
	for _, bl := range blocked {
		bl.timer.Cancel()
		s.w.deliver(bl.m.rd, bl.m.slot, Result{Err: errReset})
	}
}

// abandon is a client's giving up slot i of rd (its timeout, its end):
// the server forgets the command if it is blocked, once the connection's
// close reaches it.
func (w *World) abandon(rd *round, i int) {
	s := w.servers[rd.slots[i].server]
	forget := func() {
		for _, bl := range s.blocked {
			if bl.m.rd == rd && bl.m.slot == i {
				s.unblock(bl)
				w.tracef("%s forgets the BLPOP of %s (its connection closed)", s.name, rd.p.Name())
				return
			}
		}
	}
	if c := rd.p.client(); c.cut[s.id] {
		c.held = append(c.held, held{server: s.id, f: forget})
		return
	}
	forget()
}
