package redisserve

import (
	"time"
)

// replay takes the step the log has next, ok; or, where the client does
// something else, notes it and stops replaying (ok false). A command that
// comes before the one the log has next is held, not taken: the one the
// log has is waited for, a bounded time (Options.Late).
func (p *Process) replay(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) (step, event, bool) {
	want := p.script[0]
	at := p.s.Steps(p.name) + 1
	switch want {
	case "idle":
		p.script = p.script[1:]
		return stepIdle, event{}, true
	case "wait":
		p.script = p.script[1:]
		return stepWait, event{}, true
	}
	late := time.NewTimer(p.s.o.Late)
	defer late.Stop()
	for {
		if want != "ready" {
			if e, ok := p.takeable(want); ok {
				p.script = p.script[1:]
				return stepEvent, e, true
			}
		}
		select {
		case <-p.more:
		case <-ready:
			if want == "ready" {
				p.script = p.script[1:]
				return stepReady, event{}, true
			}
			p.diverge(at, want, "answered first")
			return stepReady, event{}, true
		case <-expired:
			return stepExpired, event{}, true
		case <-done:
			return stepDone, event{}, true
		case <-late.C:
			p.diverge(at, want, "did not do it in "+p.s.o.Late.String())
			return 0, event{}, false
		}
	}
}

// diverge notes where the client left its log, and makes the process
// record from there.
func (p *Process) diverge(at int, want, did string) {
	p.s.Diverge("replay: %s's step %d in the log is %s; the client %s: from there the run is a new one", p.name, at, want, did)
	p.script = nil
}
