package redissim

import (
	"fmt"
	"strings"
	"time"
)

// The servers served on the wire (adapters/served/redisserve): what a
// connection of a real client sends is a command given as words, sent
// without waiting (Process.Send), the reply handed back when it comes;
// any Lua script runs on an interpreter the server is given (Wire.Lua),
// atomically, its redis.call run against the same keyspace in the same
// step; and what the servers do not model is an error reply told to the
// served broker (Wire.Unmodelled), not a failure of Run, since there it
// says something of the implementation, not of the simulator.

// Wire is what a World served on the wire adds to it (World.Serve).
type Wire struct {
	// Lua runs the scripts the servers do not know natively (EVAL, EVALSHA
	// and SCRIPT LOAD of any source); nil leaves them unmodelled.
	Lua Lua
	// Unmodelled, if set, is told of each command, option or script a
	// server does not model (by the server's index and the command as
	// Describe shows it), which is then an error reply, as Redis words its
	// own refusal, and no failure of Run.
	Unmodelled func(server int, what string)
	// Pace, if set, is told each time the World's clock jumps to its next
	// timer, from the time before to the time after (ns), with no process
	// moving, and may wait there in real time: the served servers keep
	// their clock within a factor of the clients' real ones
	// (sched.Config.Pace). It changes no decision.
	Pace func(from, to int64)
}

// A Lua interpreter, as a server runs scripts on it.
type Lua interface {
	// Load compiles src, as SCRIPT LOAD and EVAL do before running it: its
	// syntax error as Redis replies it, nil if it compiles.
	Load(src string) error
	// Run runs src with KEYS and ARGV; call runs one command on the server
	// within the script (redis.call): nothing else runs on the server
	// meanwhile and its clock does not move. The result is the script's
	// reply, converted as Redis converts Lua values.
	Run(src string, keys, argv []string, call func(args []string) Result) Result
}

// Serve makes the World's servers serve the wire as x says. Call it before
// Run.
func (w *World) Serve(x Wire) { w.wire = &x }

// unmodelled says that server s was sent what it does not model: told to
// the wire, or a failure of Run (err).
func (s *server) unmodelled(what string, err error) {
	if s.w.wire != nil && s.w.wire.Unmodelled != nil {
		s.w.wire.Unmodelled(s.id, what)
		return
	}
	s.w.fail(err)
}

// lua is the interpreter the server runs unknown scripts on, nil if none.
func (s *server) lua() Lua {
	if s.w.wire == nil {
		return nil
	}
	return s.w.wire.Lua
}

// Send sends one command to server i without waiting for its reply (a
// scheduling point of the process, as Do is): done is called with the
// result once it comes, in the World, unless the command was abandoned
// first. A command the server does not model is an error reply (see
// Wire). The returned abandon is the connection's close: the server
// forgets the command if it is blocked (BLPOP), and done is not called;
// call it from the process.
func (p *Process) Send(i int, args []string, done func(Result)) (abandon func()) {
	return p.post(slot{server: i, args: args}, done)
}

// SendTx is Send of a transaction (MULTI, the commands of tx, EXEC), run
// atomically: done gets EXEC's answer.
func (p *Process) SendTx(i int, tx [][]string, done func(Result)) (abandon func()) {
	return p.post(slot{server: i, tx: tx}, done)
}

func (p *Process) post(sl slot, done func(Result)) func() {
	if sl.server < 0 || sl.server >= len(p.w.servers) {
		done(Result{Err: fmt.Errorf("redissim: server %d: there are %d", sl.server, len(p.w.servers))})
		return func() {}
	}
	rd := &round{p: p, async: true, slots: []slot{sl}, then: done}
	p.call(request{kind: reqPost, round: rd})
	return func() {
		if !rd.done {
			rd.done = true
			p.w.abandon(rd, 0)
		}
	}
}

// Wait blocks the process until a reply to one of its Sends comes (its
// done called), or d of virtual time has passed: whether a reply came.
// Nothing else moves the process meanwhile, so that the servers and the
// other processes do; a process that sent nothing waits d.
func (p *Process) Wait(d time.Duration) bool {
	if p.replied == nil {
		p.replied = &signal{}
	}
	deadline := int64(0)
	if d > 0 {
		deadline = p.w.now + int64(d)
	}
	return p.call(request{kind: reqAwait, await: &awaiter{p: p, sigs: []*signal{p.replied}, deadline: deadline}}).n == 0
}

// repliedTo wakes the process if it waits for its Sends' replies.
func (p *Process) repliedTo() {
	if sig := p.replied; sig != nil {
		p.replied = &signal{}
		sig.Fire()
	}
}

// Subscribe subscribes the process to channel on server i, as a
// connection's SUBSCRIBE does, without waiting (a scheduling point of the
// process): confirmed is called once the server registered it (nil) or
// could not (the connection's failure: the subscription is over), then
// message with each message published to channel on server i, through
// the process's partitions; a crash of the server ends it with failed.
// The returned unsubscribe is the connection's UNSUBSCRIBE or close (the
// server forgets it at once); the process's end ends it too. Call it from
// the process.
func (p *Process) Subscribe(i int, channel string, confirmed func(error), message func(string), failed func(error)) (unsubscribe func()) {
	if i < 0 || i >= len(p.w.servers) {
		confirmed(fmt.Errorf("redissim: server %d: there are %d", i, len(p.w.servers)))
		return func() {}
	}
	sb := &subscription{p: p, server: i, channel: channel, more: &signal{}}
	first := true
	sb.got = func(it subItem) {
		switch {
		case first:
			first = false
			confirmed(it.err)
			if it.err != nil {
				sb.end()
			}
		case it.err != nil:
			sb.end()
			failed(it.err)
		default:
			message(it.payload)
		}
	}
	p.subs = append(p.subs, sb)
	rd := &round{p: p, async: true, slots: []slot{{server: i, sub: sb}}}
	p.call(request{kind: reqPost, round: rd})
	return func() {
		if !sb.closed {
			sb.end()
		}
	}
}

// Up says whether server i takes connections, and how many times it has
// gone down so far: a connection made before the last time is one its
// crash closed.
func (w *World) Up(i int) (up bool, downs int) {
	if i < 0 || i >= len(w.servers) {
		return false, 0
	}
	s := w.servers[i]
	return !s.down, s.upGen
}

// Queueable is nil if a server models the command args names and args
// are as many as it takes; otherwise the error Redis replies when such a
// command is sent, or queued in a transaction (an unknown command; a
// wrong number of arguments).
func Queueable(args []string) error {
	if len(args) == 0 {
		return Error("ERR empty command")
	}
	name := strings.ToUpper(args[0])
	if command(name) == nil {
		return errUnknown(args)
	}
	if n := arity[name]; n > 0 && len(args) != n || n < 0 && len(args) < -n {
		return Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
	}
	return nil
}

// errUnknown is Redis 7.0's refusal of a command it does not know: its
// arguments quoted, each followed by a space, up to 128 bytes.
func errUnknown(args []string) Error {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		a = a[:min(len(a), 128-b.Len())]
		b.WriteString("'" + a + "' ")
	}
	name := args[0]
	if len(name) > 128 {
		name = name[:128]
	}
	return Error(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", name, b.String()))
}
