package process

import (
	"context"
	"encoding/json"
)

// reuses says whether an init_ok declares that its process takes another
// run once this one ends: "reuse": true (docs/protocol.md, "Ending").
func reuses(ok Reply) bool {
	var b bool
	return json.Unmarshal(ok.Fields["reuse"], &b) == nil && b
}

// reset asks a process that takes another run to forget this one (reset,
// answered reset_ok within the init timeout) and parks it with its
// launcher until its run's Drain: whether it did. A process killed,
// paused, given up on, hung or gone is never reset, nor given back if it
// does not answer reset_ok in time (it is then given up on, and Close
// ends it as any other).
func (c *Client) reset() bool {
	l := c.pool
	if l == nil || !c.sound() {
		return false
	}
	if _, err := c.Call(context.Background(), l.InitTimeoutOrDefault(), Request{"type": "reset"}, "reset_ok"); err != nil {
		return false
	}
	c.waiter, c.timeout = nil, l.timeout()
	c.rmu.Lock()
	c.notices = nil
	c.rmu.Unlock()
	c.stderr.reset()
	l.mu.Lock()
	if l.parked == nil {
		l.parked = map[string][]*Client{}
	}
	l.parked[c.run] = append(l.parked[c.run], c)
	l.mu.Unlock()
	return true
}

// unpark frees run's reset processes for other runs, once it is over:
// those still sound (a fault struck on a client after its script ended
// may have killed or paused one) go to idle, the others are killed.
func (l *Launcher) unpark(run string) {
	l.mu.Lock()
	cs := l.parked[run]
	delete(l.parked, run)
	l.mu.Unlock()
	for _, c := range cs {
		if !c.sound() {
			c.Kill()
			continue
		}
		l.mu.Lock()
		l.idle = append(l.idle, c)
		l.mu.Unlock()
	}
}

// sound says whether the process runs, and was neither killed, paused
// nor given up on: one that may be given another run.
func (c *Client) sound() bool {
	select {
	case <-c.exited:
		return false
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed == "" && !c.killed && !c.hung && !c.stopped
}

// reused is one of the processes kept for another run (idle), renamed
// name, or nil if none is.
func (l *Launcher) reused(name string) *Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.idle) == 0 {
		return nil
	}
	c := l.idle[0]
	l.idle = l.idle[1:]
	c.name = name
	return c
}

// Resets checks, for a process whose init_ok declared "reuse", that it
// answers reset with reset_ok and then takes init again with init_ok,
// which is what lockprover's next run will send it (docs/protocol.md,
// "Ending"). It says whether the process was reset and initialised again
// (false, checking nothing, for one that declared nothing), so that the
// caller can check that it serves that run too.
func (v *Checker) Resets(c *Client, init Request) bool {
	if !reuses(c.initOK) || v.Ctx.Err() != nil {
		return false
	}
	_, err := c.Call(v.Ctx, c.Timeout(), Request{"type": "reset"}, "reset_ok")
	if !v.Check(c.name+` declared "reuse": reset -> reset_ok`, err) {
		return false
	}
	again := Request{}
	for k, x := range init {
		again[k] = x
	}
	c.initOK, err = c.Call(v.Ctx, c.Timeout(), again, "init_ok")
	return v.Check(c.name+": init after reset -> init_ok", err)
}
