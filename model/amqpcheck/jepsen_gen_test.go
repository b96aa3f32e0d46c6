package amqpcheck

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// jepsenRun writes a Jepsen-style history of a mutex workload, as Jepsen
// writes history.edn: five client threads (a process whose op crashes with
// :info is retired and comes back as process+5), each acquiring, holding
// and releasing the lock; a partition nemesis that starts and stops every
// hundred-odd events; timeouts (:info) during partitions; failed acquires
// while the lock is held; and invokes stamped up to 1.1 ms before the
// event journalled ahead of them, as Jepsen does. The lock is correct,
// except that with doubleHold the acquire completing near the 1,400th event
// is granted while another client holds the lock, whose release then
// fails, as in the lease-based lock the issue describes. It returns the
// EDN and the line of the bad grant's invoke (0 if none).
func jepsenRun(seed int64, doubleHold bool) (string, int) {
	rng := rand.New(rand.NewSource(seed))
	var b strings.Builder
	line := 0
	now := int64(time.Second)
	emit := func(typ, f string, proc string, t int64, extra string) {
		line++
		fmt.Fprintf(&b, "{:type :%s, :f :%s, :value nil, :process %s, :time %d, :index %d%s}\n", typ, f, proc, t, line-1, extra)
	}
	const threads = 5
	type client struct {
		proc    int
		op      string // the op in flight, "" for none
		holds   bool
		invLine int // the line of the op in flight
	}
	cs := make([]*client, threads)
	for i := range cs {
		cs[i] = &client{proc: i}
	}
	holder := -1 // the thread holding the lock
	cheated := -1
	badLine := 0
	partitioned := false
	nextNemesis := 100
	for line < 2000 {
		now += int64(rng.Intn(3_000_000)) + 1
		if line >= nextNemesis {
			f := "start-partition"
			if partitioned {
				f = "stop-partition"
			}
			emit("info", f, ":nemesis", now, "")
			now += 1000
			emit("info", f, ":nemesis", now, ", :node \"n1\"")
			partitioned = !partitioned
			nextNemesis = line + 80 + rng.Intn(60)
			continue
		}
		c := cs[rng.Intn(threads)]
		thread := c.proc % threads
		p := fmt.Sprint(c.proc)
		if c.op == "" {
			c.op = "acquire"
			if c.holds {
				c.op = "release"
			}
			t := now
			if rng.Intn(10) == 0 {
				t -= int64(rng.Intn(1_100_000)) // stamped before the event journalled ahead of it
			}
			emit("invoke", c.op, p, t, "")
			c.invLine = line
			continue
		}
		op := c.op
		c.op = ""
		if partitioned && rng.Intn(4) == 0 {
			// A timeout: an acquire that did not take effect, or a
			// release that did. Jepsen retires the process.
			if op == "release" {
				holder, c.holds = -1, false
			}
			emit("info", op, p, now, ", :error :timeout")
			c.proc += threads
			continue
		}
		switch {
		case op == "acquire" && holder < 0:
			holder, c.holds = thread, true
			emit("ok", op, p, now, "")
		case op == "acquire" && doubleHold && cheated == -1 && line > 1400 && cs[holder].op == "":
			cheated, c.holds = holder, true
			holder = thread
			emit("ok", op, p, now, "")
			badLine = c.invLine
		case op == "acquire":
			emit("fail", op, p, now, ", :error :held")
		case thread == cheated:
			// The first holder's lease was gone: its release fails.
			c.holds, cheated = false, -2
			emit("fail", op, p, now, ", :error :not-held")
		default:
			holder, c.holds = -1, false
			emit("ok", op, p, now, "")
		}
	}
	return b.String(), badLine
}

// TestRealisticJepsenHistory checks a Jepsen-style history of about a
// thousand ops, five clients and a partition nemesis: with one real double
// hold it fails slot-exclusive, naming the two holders; without it, it
// holds. (Before Jepsen's histories were judged as Knossos judges them,
// any fault excused every later double hold, and it passed.)
func TestRealisticJepsenHistory(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		for _, bad := range []bool{false, true} {
			text, badLine := jepsenRun(seed, bad)
			h, imp, err := histories.ReadEDN(strings.NewReader(text), "run.edn")
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if bad && badLine == 0 {
				t.Fatalf("seed %d: no double hold was made", seed)
			}
			if !strings.Contains(strings.Join(imp.Notes, "\n"), "earlier than the op written before") {
				t.Errorf("seed %d: notes %q say nothing of the times moved", seed, imp.Notes)
			}
			start := time.Now()
			v := find(t, model.Check(h, model.Options{Jepsen: true, Timeout: time.Minute}), histories.JepsenLock, SlotExclusive)
			t.Logf("seed %d, double hold %v: %d events, %v in %v: %s", seed, bad, len(h), v.Status, time.Since(start), v.Detail)
			switch {
			case !bad && v.Status != verdict.Pass:
				t.Errorf("seed %d, a correct lock: %v %s", seed, v.Status, v.Detail)
			case bad && v.Status != verdict.Fail:
				t.Errorf("seed %d, a double hold at line %d: %v, want FAIL", seed, badLine, v.Status)
			case bad && !strings.Contains(v.Detail, "while p"):
				t.Errorf("seed %d: %q does not name both holders", seed, v.Detail)
			}
			if bad {
				found := false
				for _, i := range v.Ops {
					found = found || imp.Lines[i] == badLine
				}
				if !found {
					t.Errorf("seed %d: ops %v (lines %d, %d) do not name the grant at line %d", seed, v.Ops, imp.Lines[v.Ops[0]], imp.Lines[v.Ops[1]], badLine)
				}
			}
		}
	}
}
