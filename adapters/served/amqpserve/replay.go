package amqpserve

import (
	"time"
)

// replay takes the step the log has next, ok; or, where the
// implementation does something else, notes it and stops replaying (ok
// false unless what it did is a step to take: a frame the log did not
// have next is taken, never dropped).
func (p *Process) replay(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) (step, event, bool) {
	want := p.script[0]
	at := p.s.Steps(p.name) + 1
	switch want {
	case "idle":
		p.script = p.script[1:]
		return stepIdle, event{}, true
	case "ready":
		return p.replayReady(ready, expired, done, at)
	}
	late := time.NewTimer(p.s.o.Late)
	defer late.Stop()
	for {
		if e, ok := p.live(); ok {
			if got := e.fingerprint(); got != want {
				p.diverge(at, want, "sent "+got)
			} else {
				p.script = p.script[1:]
			}
			return stepEvent, e, true
		}
		select {
		case <-p.more:
		case <-expired:
			return stepExpired, event{}, true
		case <-done:
			return stepDone, event{}, true
		case <-late.C:
			p.diverge(at, want, "sent nothing in "+p.s.o.Late.String())
			return 0, event{}, false
		}
	}
}

// replayReady waits for the process's answer, which the log has next,
// holding any frame that comes first.
func (p *Process) replayReady(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}, at int) (step, event, bool) {
	late := time.NewTimer(p.s.o.Late)
	defer late.Stop()
	select {
	case <-ready:
		p.script = p.script[1:]
		return stepReady, event{}, true
	case <-expired:
		return stepExpired, event{}, true
	case <-done:
		return stepDone, event{}, true
	case <-late.C:
		p.diverge(at, "ready", "did not answer in "+p.s.o.Late.String())
		return 0, event{}, false
	}
}

// diverge notes where the implementation left its log, and makes the
// process record from there.
func (p *Process) diverge(at int, want, did string) {
	p.s.Diverge("replay: %s's step %d in the log is %s; the implementation %s: from there the run is a new one", p.name, at, want, did)
	p.script = nil
}
