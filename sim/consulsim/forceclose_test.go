package consulsim

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A force-close fails the call a client waits for with a reset, there
// and then: a wait for a change the server holds ends (on Consul with
// the reset; etcd's Backend waits out the wait's max, as consulsem's
// Etcd does with a watch that failed); a write a
// partition holds on its way is lost (the heal lets nothing through),
// and the client's next call, on a new connection, takes effect. An idle
// client's session lives on (it is not tied to the connection). A
// force-close strikes a live client only.
func TestForceClose(t *testing.T) {
	for _, k := range []Kind{Consul, Etcd} {
		var trace bytes.Buffer
		w := world(t, Options{Kind: k, Trace: &trace})
		var errWait, errHeld, errAfter error
		var waitEnded, heldEnded int64
		w.Go("waiter", func(p *Process) {
			b := p.Backend()
			l := must(b.List(bg, "w", false)) // nothing else writes under w/
			errWait = b.WaitChange(bg, "w", l.Index, time.Second)
			waitEnded = p.Now()
		})
		w.Go("cut", func(p *Process) {
			p.w.Partition("cut")
			_, errHeld = p.Backend().PutContender(bg, "p/held", "", false)
			heldEnded = p.Now()
			until(p, 300*ms)
			_, errAfter = p.Backend().PutContender(bg, "p/after", "", false)
		})
		var holder string
		w.Go("holder", func(p *Process) {
			holder, _ = contender(p.Backend(), 10*time.Second, false)
			p.Sleep(time.Second)
		})
		var struck []bool
		var sessions []string
		watches := -1
		w.Go("nemesis", func(p *Process) {
			p.Sleep(100 * ms)
			struck = append(struck, p.w.ForceClose("waiter"), p.w.ForceClose("cut"), p.w.ForceClose("holder"), p.w.ForceClose("nobody"))
			watches = len(p.w.srv.watches)
			p.Sleep(100 * ms)
			p.w.Heal("cut")
			p.Sleep(50 * ms)
			sessions = p.w.Sessions()
		})
		runWorld(t, w)
		reset := func(err error) bool { return errors.Is(err, errReset) }
		if !strings.Contains(trace.String(), "100000000 server -> waiter: wait for a change of w/ after") {
			t.Errorf("%s: the force-close did not cut the wait at 100 ms:\n%s", k, trace.String())
		}
		if watches != 0 {
			t.Errorf("%s: the server holds %d waits after the force-close, want the waiter's gone", k, watches)
		}
		if k == Consul && (!reset(errWait) || waitEnded != int64(100*ms)) || k == Etcd && (errWait != nil || waitEnded != int64(1001*ms)) {
			t.Errorf("%s: the wait ended at %v with %v, want a reset at the force-close (100 ms) on Consul, its max on etcd", k, time.Duration(waitEnded), errWait)
		}
		if !reset(errHeld) || heldEnded != int64(100*ms) || errAfter != nil {
			t.Errorf("%s: the held write ended at %v with %v, want a reset at 100 ms; the next write: %v", k, time.Duration(heldEnded), errHeld, errAfter)
		}
		if !slices.Equal(struck, []bool{true, true, true, false}) {
			t.Errorf("%s: struck %v, want each live client, not a name of none", k, struck)
		}
		if !slices.Contains(sessions, holder) {
			t.Errorf("%s: sessions %v after the force-close, want the holder's %s", k, sessions, holder)
		}
		keys := w.Keys()
		if slices.ContainsFunc(keys, func(s string) bool { return s == "p/held=" }) || !slices.Contains(keys, "p/after=") {
			t.Errorf("%s: keys %v: want the write held at the force-close lost, the one after it written", k, keys)
		}
	}
}
