package consulserve

import (
	"time"

	"github.com/lockprover/lockprover/adapters/process"
)

// AwaitUntil is Await that also ends, Expired, once the World's virtual
// time reaches deadline (checked before each turn that lets it pass): an
// operation the agent holds is given up at the same virtual time in every
// run, not when the machine's clock says.
func (p *Process) AwaitUntil(deadline int64, ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) process.Woke {
	finished := false
	defer func() {
		if !finished {
			p.killed()
		}
	}()
	for {
		p.flush()
		st, e := p.next(ready, expired, done)
		p.moved = p.moved || st == stepReady || st == stepEvent
		switch st {
		case stepReady:
			p.s.Took(p.name, "ready")
			finished = true
			return process.Ready
		case stepExpired:
			finished = true
			return process.Expired
		case stepDone:
			finished = true
			return process.Done
		case stepIdle, stepWait:
			if p.wp.Now() >= deadline {
				finished = true
				return process.Expired
			}
		}
		p.take(st, e)
	}
}

// take takes one step into the World: an idle turn, a wait for a reply,
// or an event.
func (p *Process) take(st step, e event) {
	switch st {
	case stepIdle:
		p.s.Took(p.name, "idle")
		p.idled = true
		p.wp.Sleep(p.s.o.Idle)
	case stepWait:
		p.s.Took(p.name, "wait")
		p.waited = !p.wp.Wait(p.s.o.Idle)
	case stepEvent:
		p.s.Took(p.name, e.fingerprint())
		p.idled, p.waited = false, false
		if e.kind == evCall {
			e.call()
			p.flush()
			close(e.done)
			return
		}
		e.c.take(e.req)
	}
}

type step int

const (
	stepReady step = iota
	stepExpired
	stepDone
	stepIdle
	stepWait
	stepEvent
)

// next is the process's next step: its log's next while it replays, else
// what comes first. With requests in the World (blocking queries aside)
// it waits there for a reply (a wait), first at once, then after Quiet of
// silence.
func (p *Process) next(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) (step, event) {
	if len(p.script) > 0 {
		if st, e, ok := p.replay(ready, expired, done); ok {
			return st, e
		}
	}
	if p.answered {
		return p.settle()
	}
	if e, ok := p.takeable(""); ok {
		return stepEvent, e
	}
	if p.flight > 0 && !p.waited {
		// Requests the client sends together (a library's call and its
		// monitor's query) are taken at the same virtual time, whichever
		// the machine delivers first.
		return p.gather(ready)
	}
	timer := time.NewTimer(p.quiet())
	defer timer.Stop()
	for {
		if e, ok := p.takeable(""); ok {
			return stepEvent, e
		}
		select {
		case <-p.more:
		case <-ready:
			p.answered = true
			return p.settle()
		case <-expired:
			return stepExpired, event{}
		case <-done:
			return stepDone, event{}
		case <-timer.C:
			if p.flight > 0 {
				return stepWait, event{}
			}
			return stepIdle, event{}
		}
	}
}

// gather is the next step of a process with a request in flight: a
// request that comes within Gather is taken, an answer of the client's
// that does is its answer (settle), else a wait for the reply.
func (p *Process) gather(ready <-chan struct{}) (step, event) {
	timer := time.NewTimer(p.s.o.Gather)
	defer timer.Stop()
	for {
		if e, ok := p.takeable(""); ok {
			return stepEvent, e
		}
		select {
		case <-p.more:
		case <-ready:
			p.answered = true
			return p.settle()
		case <-timer.C:
			return stepWait, event{}
		}
	}
}

// settle is the process's next step once its client has answered: a
// request that comes within Settle of the answer (a monitor's query that
// the library sends as its call returns) is taken first, so that whether
// it is taken before the answer or at the process's next operation does
// not hang on the machine's timing; then the answer.
func (p *Process) settle() (step, event) {
	timer := time.NewTimer(p.s.o.Settle)
	defer timer.Stop()
	for {
		if e, ok := p.takeable(""); ok {
			return stepEvent, e
		}
		select {
		case <-p.more:
		case <-timer.C:
			p.answered = false
			return stepReady, event{}
		}
	}
}

// quiet is how long the process may stay silent before its next idle
// turn or wait.
func (p *Process) quiet() time.Duration {
	switch {
	case p.idled || p.waited:
		return p.s.o.Quiet
	case !p.moved:
		return p.s.o.Start
	}
	return p.s.o.Grace
}

// pace lets as much real time pass before a logged idle turn or wait as
// passed before it when it was recorded (about: the silence that made
// it), holding what comes meanwhile: a client that reads its own clock
// (consul/api's try-once acquire) then sees the run as it was.
func (p *Process) pace(expired <-chan time.Time, done <-chan struct{}) step {
	if p.flight > 0 && !p.waited {
		return stepWait
	}
	timer := time.NewTimer(p.quiet())
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-expired:
		return stepExpired
	case <-done:
		return stepDone
	}
	return stepWait
}

// replay takes the step the log has next, ok; or, where the client does
// something else, notes it and stops replaying (ok false). A request that
// comes before the one the log has next is held, not taken: the one the
// log has is waited for, a bounded time (Options.Late).
func (p *Process) replay(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) (step, event, bool) {
	want := p.script[0]
	at := p.s.Steps(p.name) + 1
	switch want {
	case "idle", "wait":
		if st := p.pace(expired, done); st != stepWait {
			return st, event{}, true
		}
		p.script = p.script[1:]
		if want == "idle" {
			return stepIdle, event{}, true
		}
		return stepWait, event{}, true
	}
	if want == "ready" && p.answered {
		p.answered = false
		p.script = p.script[1:]
		return stepReady, event{}, true
	}
	late := time.NewTimer(p.s.o.Late)
	defer late.Stop()
	// behind bounds the wait, once the client has answered, for what the
	// log has it send first: a request of its own in the background (a
	// monitor's blocking query) that may come just after the answer.
	behind := time.NewTimer(time.Hour)
	defer behind.Stop()
	if p.answered {
		ready = nil
		behind.Reset(answeredBehind)
	}
	for {
		if want != "ready" {
			if e, ok := p.takeable(want); ok {
				p.script = p.script[1:]
				if e.req != nil {
					e.req.logged = want
				}
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
			p.answered, ready = true, nil
			behind.Reset(answeredBehind)
		case <-behind.C:
			p.answered = false
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

// answeredBehind is how long a replay waits, once the client has
// answered, for a request the log has before the answer.
const answeredBehind = time.Second

// diverge notes where the client left its log, and makes the process
// record from there.
func (p *Process) diverge(at int, want, did string) {
	p.s.Diverge("replay: %s's step %d in the log is %s; the client %s: from there the run is a new one", p.name, at, want, did)
	p.script = nil
}
