package redissim

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
)

// A Result is a server's answer to one command: Val is an int64, a
// string, a []any of those, or nil for Redis's nil reply; Err is an error
// reply (an Error) or the failure to get any answer (a refused connection,
// a reset one, a timeout).
type Result struct {
	Val any
	Err error
}

func (r Result) String() string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	return valText(r.Val)
}

func valText(v any) string {
	switch v := v.(type) {
	case nil:
		return "(nil)"
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = valText(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v)
}

// An Error is an error reply of Redis, its text as Redis sends it
// ("ERR ...", "NOSCRIPT ...", "WRONGTYPE ...").
type Error string

func (e Error) Error() string { return string(e) }

// netError is the failure to get an answer.
type netError struct {
	msg     string
	timeout bool
}

func (e *netError) Error() string { return "redissim: " + e.msg }

// Timeout says whether the answer did not come in time, as net.Error.
func (e *netError) Timeout() bool { return e.timeout }

var (
	errRefused = &netError{msg: "dial tcp: connect: connection refused (server down)"}
	errReset   = &netError{msg: "read: connection reset by peer"}
	errTimeout = &netError{msg: "i/o timeout", timeout: true}
)

// A round is what a client sent at once: one command to each of some
// servers, each answered or timed out on its own; the client hears of it
// when every one has.
type round struct {
	p       *Process
	timeout time.Duration
	slots   []slot
	left    int
	timer   *sched.Timer
	done    bool
	async   bool         // its process does not wait for it (a SUBSCRIBE, Send)
	then    func(Result) // Send's: given the result
}

type slot struct {
	server   int
	args     []string
	fallback []string      // EVAL for an EVALSHA, sent if the server has no such script
	tx       [][]string    // a transaction, instead of args
	sub      *subscription // a SUBSCRIBE, instead of args
	res      Result
	answered bool
}

// send posts each slot of rd to its server and starts its timeout.
func (w *World) send(rd *round) {
	rd.left = len(rd.slots)
	if !rd.async {
		rd.p.pending = rd
	}
	if rd.left == 0 {
		w.finish(rd)
		return
	}
	if rd.timeout > 0 {
		rd.timer = w.sched.After(rd.timeout, func() { w.expire(rd) })
	}
	for i := range rd.slots {
		w.post(rd, i)
	}
}

// post sends slot i of rd to its server: held by a partition, refused by
// a server that is down, or queued for it.
func (w *World) post(rd *round, i int) {
	p, s, sl := rd.p, w.servers[rd.slots[i].server], &rd.slots[i]
	m := &msg{rd: rd, slot: i, args: sl.args, tx: sl.tx, sub: sl.sub}
	if c := p.client(); c.cut[s.id] {
		w.tracef("%s -> %s: %s waits for the partition to heal", p.Name(), s.name, m.describe())
		c.held = append(c.held, held{server: s.id, f: func() { w.post(rd, i) }})
		return
	}
	if s.down {
		w.now += int64(refusedTime)
		w.tracef("%s -> %s: connection refused (server down)", p.Name(), s.name)
		w.deliver(rd, i, Result{Err: errRefused})
		return
	}
	s.inbox = append(s.inbox, m)
	s.wake()
}

// answer sends server s's result for slot i of rd back to the client: an
// EVALSHA the server lacks is sent again as EVAL (go-redis's Script.Run),
// if the client still waits for it (a slot timed out was given up on:
// Script.Run has returned, and sends nothing more); a reply the fault
// lost resets the connection; a partition holds it. A NOSCRIPT a client
// on the wire reads (it sends the EVAL itself) is not the reply a lost
// reply loses, as the real servers' proxy does not lose it: it changed
// nothing, and the fault waits for the EVAL's.
func (w *World) answer(rd *round, i int, s *server, res Result) {
	p, sl := rd.p, &rd.slots[i]
	if e, ok := res.Err.(Error); ok && strings.HasPrefix(string(e), "NOSCRIPT") && sl.fallback != nil && !rd.done && !sl.answered {
		sl.args, sl.fallback = sl.fallback, nil
		w.post(rd, i)
		return
	}
	c := p.client()
	if c.drop[s.id] && !(sl.fallback == nil && isNoScript(res)) {
		delete(c.drop, s.id)
		w.tracef("%s -> %s: the reply is lost, the connection reset", s.name, p.Name())
		res = Result{Err: errReset}
		if w.onDrop != nil {
			w.onDrop(c.Name(), s.id)
		}
	}
	if c.cut[s.id] {
		c.held = append(c.held, held{server: s.id, f: func() { w.deliver(rd, i, res) }})
		return
	}
	w.deliver(rd, i, res)
}

// isNoScript says whether res is Redis's NOSCRIPT error.
func isNoScript(res Result) bool {
	e, ok := res.Err.(Error)
	return ok && strings.HasPrefix(string(e), "NOSCRIPT")
}

// deliver records slot i's result; the client hears of the round once
// every slot has its result.
func (w *World) deliver(rd *round, i int, res Result) {
	sl := &rd.slots[i]
	if rd.done || sl.answered {
		return
	}
	sl.res, sl.answered = res, true
	rd.left--
	if rd.left == 0 {
		w.finish(rd)
	}
}

// expire times out the slots of rd still unanswered.
func (w *World) expire(rd *round) {
	if rd.done {
		return
	}
	for i := range rd.slots {
		if !rd.slots[i].answered {
			w.tracef("%s: %s timed out after %v", rd.p.Name(), w.servers[rd.slots[i].server].name, rd.timeout)
			w.deliver(rd, i, Result{Err: errTimeout})
			w.abandon(rd, i)
		}
	}
}

func (w *World) finish(rd *round) {
	rd.done = true
	rd.timer.Cancel()
	if rd.async {
		if rd.then != nil {
			rd.then(rd.slots[0].res)
			rd.p.repliedTo()
			return
		}
		w.subscribed(rd)
		return
	}
	if rd.p.pending == rd {
		rd.p.pending = nil
	}
	out := make([]Result, len(rd.slots))
	for i, sl := range rd.slots {
		out[i] = sl.res
	}
	rd.p.proc.Deliver(reply{results: out})
}

// held is what a partition between a client and a server holds back: a
// command or a reply.
type held struct {
	server int
	f      func()
}

// Do sends one command to server i and returns its result, waiting as
// long as it takes (a paused server, a partition); a command or script
// the server does not model is an error reply, and makes Run fail.
func (p *Process) Do(i int, args ...string) Result {
	if i < 0 || i >= len(p.w.servers) {
		return Result{Err: fmt.Errorf("redissim: server %d: there are %d", i, len(p.w.servers))}
	}
	rs := p.Round(0, map[int][]string{i: args})
	if rs == nil {
		return Result{Err: errReset}
	}
	return rs[0]
}

// Tx sends a transaction to server i (MULTI, the commands of tx, EXEC, as
// go-redis's TxPipelined sends them: one message, run atomically) and
// returns EXEC's answer, waiting as long as it takes. The differential
// (adapters/conform/redisconform) sends the priority lock's pushes so, as
// the reference's Env does within a round.
func (p *Process) Tx(i int, tx [][]string) Result {
	if i < 0 || i >= len(p.w.servers) {
		return Result{Err: fmt.Errorf("redissim: server %d: there are %d", i, len(p.w.servers))}
	}
	rd := &round{p: p, slots: []slot{{server: i, tx: tx}}}
	rs := p.call(request{kind: reqRound, round: rd}).results
	if len(rs) == 0 {
		return Result{Err: errReset}
	}
	return rs[0]
}

// Round sends cmds[i] to server i, for each i in cmds, all at once, and
// returns their results in the servers' order once each has answered or
// (with timeout > 0) timed out. A command "EVALSHA sha ..." whose script
// the server lacks is not sent again: see Process.Env for go-redis's
// fallback to EVAL.
func (p *Process) Round(timeout time.Duration, cmds map[int][]string) []Result {
	rd := &round{p: p, timeout: timeout}
	for i := range p.w.servers {
		if args, ok := cmds[i]; ok {
			rd.slots = append(rd.slots, slot{server: i, args: args})
		}
	}
	return p.call(request{kind: reqRound, round: rd}).results
}
