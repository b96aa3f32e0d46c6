package redissim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
	"github.com/lockprover/lockprover/sim/sched"
)

// PriorityEnv is the process's view of the World as redlock's Priority
// runs on it (redlock.NewPriorityOn): Env's, and what the priority lock
// needs beyond it. Send is Round to some servers, a transaction (Cmd.Tx)
// sent as one message that the server runs atomically. Block is a round
// of one command on a connection of its own (a BLPOP that waits on the
// server; the round's timeout abandons it). Subscribe subscribes on a
// connection of its own. Go starts a task: a process of the World, named
// after the client ("c1/3": its third), that shares the client's network
// (its partitions, its lost replies) and dies with it (when the client
// is killed, and when its program returns: a process's goroutines end
// with it). Signals and Await are waits in virtual time: a task waiting is
// a process blocked until a signal fires or its deadline's timer. Every
// method may be called from the client or from any of its tasks, and
// acts for the one that calls it; so the priority lock on it starts no
// goroutine and reads no other clock.
func (p *Process) PriorityEnv() redlock.PriorityEnv { return penv{p} }

type penv struct{ p *Process }

// cur is the process that calls: the client or one of its tasks.
func (e penv) cur() *Process {
	r := e.p.w.sched.Running()
	if r == nil || r.client() != e.p.client() {
		panic("redissim: a PriorityEnv was used outside its client and its tasks, or outside World.Run")
	}
	return r
}

func (e penv) Now() int64   { return e.p.w.now }
func (e penv) Servers() int { return len(e.p.w.servers) }
func (e penv) Close() error { return nil }

func (e penv) Round(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	return roundOf(e.cur(), ctx, timeout, cmds, false)
}

func (e penv) Send(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	return roundOf(e.cur(), ctx, timeout, cmds, true)
}

// Block sends cmd to server i alone, bounded by timeout.
func (e penv) Block(ctx context.Context, timeout time.Duration, i int, cmd redlock.Cmd) redlock.Result {
	cmds := make([]redlock.Cmd, len(e.p.w.servers))
	if i < 0 || i >= len(cmds) {
		return redlock.Result{Err: fmt.Errorf("redissim: server %d: there are %d", i, len(cmds))}
	}
	cmds[i] = cmd
	return roundOf(e.cur(), ctx, timeout, cmds, true)[i]
}

// roundOf sends cmds[i] to server i from p (skipping the zero Cmds if
// skip), a script as go-redis's Script.Run sends it, and returns the
// results in the servers' order. A context already ended sends nothing;
// one that ends meanwhile is not looked at (its deadline is real time).
func roundOf(p *Process, ctx context.Context, timeout time.Duration, cmds []redlock.Cmd, skip bool) []redlock.Result {
	out := make([]redlock.Result, len(cmds))
	if err := ctx.Err(); err != nil {
		for i := range out {
			if !skip || !zeroCmd(cmds[i]) {
				out[i].Err = err
			}
		}
		return out
	}
	rd := &round{p: p, timeout: timeout}
	for i, c := range cmds {
		if i >= len(p.w.servers) || skip && zeroCmd(c) {
			continue
		}
		rd.slots = append(rd.slots, slotOf(i, c))
	}
	rs := p.call(request{kind: reqRound, round: rd}).results
	for j, sl := range rd.slots {
		r := redlock.Result{Err: errReset}
		if j < len(rs) {
			r = redlock.Result{Val: rs[j].Val, Err: rs[j].Err}
		}
		if sl.tx != nil && r.Err == nil {
			r.Err = firstError(r.Val)
		}
		out[sl.server] = r
	}
	for i := range out {
		if i >= len(p.w.servers) {
			out[i].Err = errReset
		}
	}
	return out
}

func zeroCmd(c redlock.Cmd) bool { return c.Script == "" && len(c.Args) == 0 && len(c.Tx) == 0 }

// slotOf is server i's slot for c.
func slotOf(i int, c redlock.Cmd) slot {
	sl := slot{server: i, args: c.Args}
	switch {
	case len(c.Tx) > 0:
		sl.args, sl.tx = nil, c.Tx
	case c.Script != "":
		tail := append([]string{strconv.Itoa(len(c.Keys))}, c.Keys...)
		tail = append(tail, c.Args...)
		sl.args = append([]string{"evalsha", ScriptSHA1(c.Script)}, tail...)
		sl.fallback = append([]string{"eval", c.Script}, tail...)
	}
	return sl
}

// firstError is the first error among a transaction's replies, as
// go-redis's TxPipelined returns it.
func firstError(v any) error {
	vs, _ := v.([]any)
	for _, x := range vs {
		if err, ok := x.(error); ok {
			return err
		}
	}
	return nil
}

// Go starts f as a task of the calling process's client.
func (e penv) Go(f func()) {
	w, c := e.p.w, e.cur().client()
	c.ntasks++
	t := &Process{w: w, owner: c, cut: c.cut, drop: c.drop}
	live := c.tasks[:0]
	for _, x := range c.tasks {
		if !x.proc.Ended() {
			live = append(live, x)
		}
	}
	c.tasks = append(live, t)
	w.base.Spawn(t, fmt.Sprintf("%s/%d", c.Name(), c.ntasks), func(*Process) { f() }, false)
	if c.proc.Ended() || c.proc.Exiting() {
		w.reap = append(w.reap, t)
	}
}

// A signal is a redlock.Signal in the World: firing it makes the
// processes waiting on it runnable.
type signal struct {
	fired   bool
	waiting []*awaiter
}

func (e penv) NewSignal() redlock.Signal { return &signal{} }

func (s *signal) Fire() {
	if s.fired {
		return
	}
	s.fired = true
	waiting := s.waiting
	s.waiting = nil
	for _, a := range waiting {
		for i, x := range a.sigs {
			if x == s {
				a.resolve(i)
				break
			}
		}
	}
}

// An awaiter is a process waiting in Await.
type awaiter struct {
	p        *Process
	sigs     []*signal
	deadline int64
	timer    *sched.Timer
	done     bool
}

// Await waits in virtual time; ctx is looked at only before.
func (e penv) Await(ctx context.Context, deadline int64, sigs ...redlock.Signal) int {
	p := e.cur()
	ss := make([]*signal, len(sigs))
	for i, s := range sigs {
		ss[i] = s.(*signal)
		if ss[i].fired {
			return i
		}
	}
	if ctx.Err() != nil || deadline != 0 && deadline <= p.w.now {
		return -1
	}
	return p.call(request{kind: reqAwait, await: &awaiter{p: p, sigs: ss, deadline: deadline}}).n
}

// startAwait makes p wait as a says (p is blocked). A signal may have
// fired, or the deadline passed, since p posted the wait.
func (w *World) startAwait(p *Process, a *awaiter) {
	p.await = a
	for i, s := range a.sigs {
		if s.fired {
			a.resolve(i)
			return
		}
	}
	if a.deadline != 0 && a.deadline <= w.now {
		a.resolve(-1)
		return
	}
	for _, s := range a.sigs {
		s.waiting = append(s.waiting, a)
	}
	if a.deadline != 0 {
		a.timer = w.sched.At(a.deadline, func() { a.resolve(-1) })
		w.tracef("%s waits until %d", p.Name(), a.deadline)
	} else {
		w.tracef("%s waits", p.Name())
	}
}

func (a *awaiter) resolve(n int) {
	if a.done {
		return
	}
	a.done = true
	a.timer.Cancel()
	if a.p.await == a {
		a.p.await = nil
	}
	a.p.proc.Deliver(reply{n: n})
}

// ending is what a client's or a task's end does to the World: the
// servers forget its blocked commands, its subscriptions end, and a
// client's tasks are killed (in settle).
func (w *World) ending(p *Process) {
	if rd := p.pending; rd != nil && !rd.done {
		rd.done = true
		rd.timer.Cancel()
		for i := range rd.slots {
			if !rd.slots[i].answered {
				w.abandon(rd, i)
			}
		}
	}
	p.pending = nil
	if a := p.await; a != nil {
		a.done = true
		a.timer.Cancel()
		p.await = nil
	}
	for _, sb := range p.subs {
		sb.end()
	}
	p.subs = nil
	if p.owner == nil {
		for _, t := range p.tasks {
			if !t.proc.Ended() {
				w.reap = append(w.reap, t)
			}
		}
		p.tasks = nil
	}
}

// reapTasks kills the tasks whose client has ended.
func (w *World) reapTasks() {
	for len(w.reap) > 0 {
		t := w.reap[0]
		w.reap = w.reap[1:]
		if !t.proc.Ended() {
			w.tracef("%s killed: %s ended", t.Name(), t.owner.Name())
			w.sched.Kill(&t.proc.Proc, nil)
		}
	}
}
