package process

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// Warm starts n processes of run ahead of its plan, so that the plan's
// clients begin together. An implementation's start-up (an interpreter
// loading its modules: 0.3 s of CPU each for the Python examples) then
// happens before the plan's clock starts, not in it. Started inside the
// plan, three such processes on two cores set their clients' first
// operations 200 ms apart, where the plan has them at once, and a
// counterexample that needed two acquires together replayed 0 times in 3.
//
// Warm returns once each process has gone quiet (no CPU used in its
// process group for Quiet: waiting for its init, most likely), or has
// exited, or after the init timeout, or when ctx is done. It does not
// send init: the plan's processes learn their URLs, names and options
// then, as ever. Connect for run takes these processes first, in order,
// and starts new ones once they are taken (a killed client's next
// incarnation, a probe). Drain kills those no Connect took; Stop kills
// them too. A process that exited while it waited is taken all the same,
// and its exit is its start's failure, charged to run.
func (l *Launcher) Warm(ctx context.Context, run string, n int) {
	cs := l.spawn(run, n)
	deadline := time.Now().Add(l.InitTimeoutOrDefault())
	for _, c := range cs {
		waitQuiet(ctx, c, deadline)
	}
}

// Spawn is Warm that does not wait for the processes to go quiet: where
// start-up costs the plan no time (a simulator, whose clock stands still
// while a process starts), the processes only need to start side by side,
// not one after another.
func (l *Launcher) Spawn(run string, n int) { l.spawn(run, n) }

// spawn starts n processes of run ahead, and returns them.
func (l *Launcher) spawn(run string, n int) []*Client {
	var cs []*Client
	for len(cs) < n {
		c := l.reused("a process started ahead")
		if c == nil {
			break
		}
		cs = append(cs, c)
	}
	for len(cs) < n {
		c, err := start(l.Command, "a process started ahead", l.timeout())
		if err != nil {
			break // Connect will fail the same way, and say so
		}
		c.exitGrace = max(ExitGrace, l.InitTimeout)
		l.register(c)
		cs = append(cs, c)
	}
	l.mu.Lock()
	if l.spares == nil {
		l.spares = map[string][]*Client{}
	}
	l.spares[run] = append(l.spares[run], cs...)
	l.mu.Unlock()
	return cs
}

// Drain kills run's processes that Warm started and no Connect took (but
// a reused one, which goes back to the launcher's idle), and those whose
// Connect never returned (on a simulator, a process its World killed
// while it started: its coroutine dropped, not its process); and frees
// for other runs those of its processes that were reset (reuse). Call it
// once the run is over.
func (l *Launcher) Drain(run string) {
	l.mu.Lock()
	spares, connecting := l.spares[run], l.connecting[run]
	delete(l.spares, run)
	delete(l.connecting, run)
	l.mu.Unlock()
	for _, c := range spares {
		if c.pool != nil && c.sound() {
			l.mu.Lock()
			l.idle = append(l.idle, c) // reused, and no one took it: still reset
			l.mu.Unlock()
			continue
		}
		c.Kill()
	}
	for _, c := range connecting {
		c.Kill()
	}
	l.unpark(run)
}

// take is the next process Warm started for run, named name, or nil.
func (l *Launcher) take(run, name string) *Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.spares[run]
	if len(cs) == 0 {
		return nil
	}
	c := cs[0]
	if len(cs) == 1 {
		delete(l.spares, run)
	} else {
		l.spares[run] = cs[1:]
	}
	c.name = name // nothing else has it yet: no one reads the name meanwhile
	return c
}

// register puts c in Stop's reach until it is gone.
func (l *Launcher) register(c *Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone != nil {
		return // reaped already, or registered
	}
	c.gone = func() {
		l.mu.Lock()
		delete(l.procs, c)
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.procs == nil {
		l.procs = map[*Client]bool{}
	}
	l.procs[c] = true
}

// Quiet is how long a process started ahead (Warm) must use no CPU to be
// taken as waiting for its init. CPU time is counted in ticks of 10 ms,
// so a shorter span could not tell a busy process from an idle one.
const Quiet = 150 * time.Millisecond

// waitQuiet waits until c's process group has used no CPU for Quiet, with
// none of its processes running or waiting to run (a process not yet
// scheduled on a loaded machine uses no CPU either, and is not quiet), c
// has exited, deadline has passed or ctx is done. Where /proc cannot say
// (not Linux), it does not wait.
func waitQuiet(ctx context.Context, c *Client, deadline time.Time) {
	const poll = 25 * time.Millisecond
	last, _, ok := groupCPU(c.Pid())
	if !ok {
		return
	}
	still := time.Duration(0)
	for still < Quiet && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-c.exited:
			return
		case <-time.After(poll):
		}
		now, running, ok := groupCPU(c.Pid())
		if !ok {
			return
		}
		if now != last || running {
			last, still = now, 0
		} else {
			still += poll
		}
	}
}

// groupCPU is the CPU time, in clock ticks, that the processes of process
// group pgid have used, whether one of them is running or waiting to run
// (state R) or in an uninterruptible wait (D, as while it loads its
// program), and whether /proc could say.
func groupCPU(pgid int) (ticks int64, running, found bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false, false
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		// The fields after the command, which is in parentheses and may
		// hold anything: state, ppid, pgrp, ... utime (the 14th field
		// of the line, the 12th here) and stime.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
		running = running || f[0] == "R" || f[0] == "D"
		found = true
	}
	return ticks, running, found
}
