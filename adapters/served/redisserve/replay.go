package redisserve

import (
	"strings"
	"sync"
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

// drawnWords are the words a replay took as drawn anew by its client: a
// command matches its logged step where it differs only in words of at
// least minDrawn bytes, each the same length as the log's, each paired
// with one word of the log's and back, over the whole run (a lease's
// token, which a client draws at random, appears in its acquire, its
// refresh and its release). So a replay keeps the log's order of steps;
// the history, judged again, says what the values did.
type drawnWords struct {
	mu          sync.Mutex
	logged, got map[string]string
}

// minDrawn is the shortest word a replay takes as drawn: a token, not a
// number or a command's option.
const minDrawn = 8

// matches says whether got, a command's fingerprint, is want, the log's,
// but for words drawn anew, and pairs those words if so.
func (d *drawnWords) matches(want, got string) bool {
	if want == got {
		return true
	}
	ws, gs := strings.Split(want, " "), strings.Split(got, " ")
	if len(ws) != len(gs) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	pairs := map[string]string{}
	for i, w := range ws {
		g := gs[i]
		if w == g {
			continue
		}
		if len(w) < minDrawn || len(w) != len(g) || !d.pairs(w, g, pairs) {
			return false
		}
		pairs[w] = g
	}
	if d.logged == nil {
		d.logged, d.got = map[string]string{}, map[string]string{}
	}
	for w, g := range pairs {
		d.logged[w], d.got[g] = g, w
	}
	return true
}

// pairs says whether the log's word w may be the client's g: neither is
// paired with another word already, in the run or in this command.
func (d *drawnWords) pairs(w, g string, pending map[string]string) bool {
	if x, ok := pending[w]; ok {
		return x == g
	}
	for pw, pg := range pending {
		if pg == g && pw != w {
			return false
		}
	}
	if x, ok := d.logged[w]; ok && x != g {
		return false
	}
	if x, ok := d.got[g]; ok && x != w {
		return false
	}
	return true
}
