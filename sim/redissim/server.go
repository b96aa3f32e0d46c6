package redissim

import (
	"fmt"
	"strings"
	"time"
)

// epochMs is what a server's clock reads at virtual time 0, in Unix
// milliseconds (2025-01-01 00:00 UTC).
const epochMs = 1735689600000

// A server is one simulated redis-server: its keyspace, its script cache,
// its clock (the virtual time plus the jumps it suffered), and the
// commands waiting for it. Its loop runs as a process of the scheduler,
// runnable exactly when a command waits for it, so that the Decider
// interleaves its commands with the other servers' and the clients'.
type server struct {
	w       *World
	id      int
	name    string
	pers    Persistence
	proc    *Process // its loop's current process
	keys    map[string]*entry
	scripts map[string]bool   // SHA1s of the scripts it has been sent (EVAL)
	sources map[string]string // the wire's Lua scripts it has been sent, by SHA1
	skew    time.Duration     // clock jumps so far
	down    bool
	paused  bool // SIGSTOPped
	upGen   int
	inbox   []*msg
	posted  bool // its loop has posted its wait for a command
	waiting bool // its loop waits for a command

	blocked []*blocker // clients blocked in BLPOP, in the order they blocked
	ready   []string   // lists pushed to while clients wait on them
	late    []*blocker // blockers whose timeout came while it was paused
	atomic  bool       // a script or a transaction runs: BLPOP does not block
	subs    []*subscription
}

// An entry is a key's value and its deadline, in ms of the server's clock
// (0: none): a string (Redlock's keys and counters), a hash (the priority
// lock's), a list (its notes and acknowledgements) or a sorted set (npm
// redis-semaphore's holders).
type entry struct {
	val      string
	hash     map[string]string // a hash if not nil
	list     []string          // a list if not nil (never empty: Redis deletes an empty list)
	zset     *zset             // a sorted set if not nil (never empty either)
	deadline int64
}

// kind is the entry's type, as TYPE names it.
func (e *entry) kind() string {
	switch {
	case e.hash != nil:
		return "hash"
	case e.list != nil:
		return "list"
	case e.zset != nil:
		return "zset"
	}
	return "string"
}

// A msg is a command on its way to a server, for one slot of a round.
type msg struct {
	rd   *round
	slot int
	args []string
	tx   [][]string    // a transaction, instead of args
	sub  *subscription // a SUBSCRIBE, instead of args
}

func newServer(w *World, id int, pers Persistence) *server {
	return &server{w: w, id: id, name: fmt.Sprintf("s%d", id), pers: pers,
		keys: map[string]*entry{}, scripts: map[string]bool{}, sources: map[string]string{}}
}

// spawn starts the server's loop as a process, unless it runs.
func (s *server) spawn() {
	if s.proc != nil && !s.proc.proc.Ended() {
		return
	}
	p := &Process{w: s.w, srv: s}
	s.proc, s.posted, s.waiting = p, false, false
	s.w.base.Spawn(p, s.name, s.loop, true)
	if s.paused {
		p.proc.Pause()
	}
}

// loop takes the server's commands one at a time, for ever (Run's end
// stops it).
func (s *server) loop(p *Process) {
	for {
		s.posted = true
		p.req = request{kind: reqRecv}
		if _, killed := p.proc.Yield(); killed {
			return
		}
		if m := s.next(); m != nil {
			s.handle(m)
		}
	}
}

// idle makes the loop wait for its next command.
func (s *server) idle() {
	s.posted = false
	s.proc.proc.Block()
	s.waiting = true
}

// wake makes a waiting loop runnable if a command waits for it.
func (s *server) wake() {
	if s.waiting && len(s.inbox) > 0 {
		s.waiting = false
		s.proc.proc.Deliver(reply{})
	}
}

// next takes the command the server reads next: commands of one client
// come in the order it sent them, and when several clients' commands
// wait, Decide picks whose goes first (the network's order).
func (s *server) next() *msg {
	if len(s.inbox) == 0 {
		return nil
	}
	var heads []int
	for i, m := range s.inbox {
		first := true
		for _, h := range heads {
			if s.inbox[h].rd.p == m.rd.p {
				first = false
				break
			}
		}
		if first {
			heads = append(heads, i)
		}
	}
	i := heads[s.w.base.Pick(len(heads))]
	m := s.inbox[i]
	s.inbox = append(s.inbox[:i], s.inbox[i+1:]...)
	return m
}

// handle runs one command and sends its result back.
func (s *server) handle(m *msg) {
	var res Result
	switch {
	case m.sub != nil:
		res = s.subscribe(m.sub)
	case m.tx != nil:
		res = s.execTx(m.tx)
	default:
		res = s.exec(m.args)
	}
	if b, ok := res.Val.(blockOn); ok {
		s.w.now += int64(commandTime)
		if m.rd.done || m.rd.slots[m.slot].answered {
			s.w.tracef("%s <- %s: %s -> would block, but the client is gone", s.name, m.rd.p.Name(), m.describe())
			return
		}
		s.w.tracef("%s <- %s: %s -> blocks", s.name, m.rd.p.Name(), m.describe())
		s.block(m, b)
		return
	}
	if s.w.base.Tracing() {
		s.w.tracef("%s <- %s: %s -> %s", s.name, m.rd.p.Name(), m.describe(), res)
	}
	s.w.now += int64(commandTime)
	s.w.answer(m.rd, m.slot, s, res)
	s.serveBlocked()
}

func (m *msg) describe() string {
	switch {
	case m.sub != nil:
		return "SUBSCRIBE " + m.sub.channel
	case m.tx != nil:
		return DescribeTx(m.tx)
	}
	return Describe(m.args)
}

// clock is the server's clock, in Unix milliseconds: what Redis compares
// deadlines with.
func (s *server) clock() int64 {
	return epochMs + floorDiv(s.w.now+int64(s.skew), int64(time.Millisecond))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// lookup returns key's entry, deleting it if its deadline has passed:
// Redis expires lazily on access and actively in the background, so a key
// past its deadline is gone to every command.
func (s *server) lookup(key string) *entry {
	e := s.keys[key]
	if e != nil && e.deadline != 0 && s.clock() > e.deadline {
		delete(s.keys, key)
		return nil
	}
	return e
}

// Describe is a command as the trace shows it: a script by its name
// (EVAL acquire k1 ...), not its source. Exported for the differential
// (adapters/conform/redisconform), which shows its steps as the trace does.
func Describe(args []string) string {
	if len(args) >= 2 {
		switch strings.ToUpper(args[0]) {
		case "EVAL":
			if sc := scriptBySource(args[1]); sc != nil {
				return "EVAL " + sc.name + " " + strings.Join(args[2:], " ")
			}
			return "EVAL <unknown script> " + strings.Join(args[2:], " ")
		case "EVALSHA":
			if sc := scriptBySHA(args[1]); sc != nil {
				return "EVALSHA " + sc.name + " " + strings.Join(args[2:], " ")
			}
		}
	}
	return strings.Join(args, " ")
}
