package redissim

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// plock is the reference priority lock on p's view of the World, its
// tokens drawn from a source seeded with p's name.
func plock(p *Process, o redlock.Options) *redlock.Priority {
	if o.Random == nil {
		var seed [32]byte
		copy(seed[:], p.Name())
		o.Random = rand.NewChaCha8(seed)
	}
	l, err := redlock.NewPriorityOn(p.PriorityEnv(), o)
	if err != nil {
		panic(err)
	}
	return l
}

// losses records what OnLost is told, and when; slow, if set, is how long
// the victim's watcher then takes before it acknowledges.
type losses struct {
	w    *World
	slow time.Duration
	lost []redlock.Lost
}

func (l *losses) on(x redlock.Lost) {
	l.lost = append(l.lost, x)
	if l.slow > 0 {
		l.w.sched.Running().Sleep(l.slow)
	}
}

func (l *losses) of(token string) (redlock.Lost, bool) {
	for _, x := range l.lost {
		if x.Token == token {
			return x, true
		}
	}
	return redlock.Lost{}, false
}

func pttl(p *Process, i int, key string) time.Duration {
	n, _ := p.Do(i, "PTTL", key).Val.(int64)
	return time.Duration(n) * ms
}

// stealCase is a victim holding k with priority 1 and ttl vttl, and a
// thief taking it with priority 2, on n servers; it returns what the test
// checks.
type stealCase struct {
	victim, thief redlock.Lease
	returned      int64 // when the thief's acquire returned
	err           error
	ls            *losses
	w             *World
}

func runSteal(t *testing.T, n int, vttl, tttl, slow time.Duration, dead bool, o redlock.Options) stealCase {
	t.Helper()
	w := world(t, Options{Servers: n})
	c := stealCase{w: w, ls: &losses{w: w, slow: slow}}
	acquired := false
	w.Go("v", func(p *Process) {
		vo := o
		vo.OnLost = c.ls.on
		l := plock(p, vo)
		var err error
		if c.victim, err = l.Acquire(bg, "k", vttl, 1); err != nil {
			t.Errorf("victim's acquire: %v", err)
		}
		acquired = true
		if dead {
			w.Kill("v")
		}
		p.Sleep(vttl + time.Second) // keeps its watchers alive
	})
	w.Go("t", func(p *Process) {
		for !acquired {
			p.Sleep(ms)
		}
		c.thief, c.err = plock(p, o).Acquire(bg, "k", tttl, 2)
		c.returned = p.Now()
	})
	run(t, w)
	return c
}

// A higher priority steals; the victim is told before the thief's
// acquire returns; the key keeps the victim's deadline; on one server and
// on three.
func TestPriorityStealOnSimulator(t *testing.T) {
	for _, n := range []int{1, 3} {
		w := world(t, Options{Servers: n})
		ls := &losses{w: w}
		var v, th redlock.Lease
		w.Go("v", func(p *Process) {
			l := plock(p, redlock.Options{OnLost: ls.on})
			var err error
			if v, err = l.Acquire(bg, "k", 10*time.Second, 1); err != nil {
				t.Errorf("victim's acquire: %v", err)
				return
			}
			p.Sleep(time.Second)
			if ok, _ := l.Verify(bg, v); ok {
				t.Error("the victim still verifies")
			}
			if _, err := l.Refresh(bg, v, time.Second); !errors.Is(err, redlock.ErrStolen) {
				t.Errorf("victim's refresh: %v", err)
			}
			if err := l.Release(bg, v); !errors.Is(err, redlock.ErrStolen) {
				t.Errorf("victim's release: %v", err)
			}
		})
		w.Go("t", func(p *Process) {
			p.Sleep(100 * ms)
			l := plock(p, redlock.Options{})
			var err error
			if th, err = l.Acquire(bg, "k", 3*time.Second, 2); err != nil {
				t.Errorf("thief's acquire: %v", err)
				return
			}
			lost, ok := ls.of(v.Token)
			if !ok || lost.At >= p.Now() || lost.Thief != th.Token {
				t.Errorf("n=%d: lost %+v (%v), thief returned at %d", n, lost, ok, p.Now())
			}
			if th.Fence <= v.Fence {
				t.Errorf("thief's fence %d, victim's %d", th.Fence, v.Fence)
			}
			for i := range n {
				if d := pttl(p, i, "{k}:lock"); d <= 3*time.Second {
					t.Errorf("server %d: PTTL %v: the victim's deadline was not kept", i, d)
				}
			}
			if ok, err := l.Verify(bg, th); !ok || err != nil {
				t.Errorf("thief's verify: %v %v", ok, err)
			}
			p.Sleep(2 * time.Second)
			if err := l.Release(bg, th); err != nil {
				t.Errorf("thief's release: %v", err)
			}
		})
		run(t, w)
		for i := range n {
			ks, _ := w.Keys(i)
			if len(ks) != 1 || !strings.HasPrefix(ks[0], "{k}:fence=") {
				t.Errorf("n=%d: server %d keeps %v", n, i, ks)
			}
		}
	}
}

// Equal or lower priority never steals: ErrHeld, naming the holder's.
func TestPriorityEqualNeverStealsOnSimulator(t *testing.T) {
	for _, d := range []redlock.Defects{{}, {EqualSteals: true}} {
		w := world(t, Options{Servers: 3})
		w.Go("c", func(p *Process) {
			a := plock(p, redlock.Options{})
			b := plock(p, redlock.Options{Defects: d, Random: rand.NewChaCha8([32]byte{1})})
			if _, err := a.Acquire(bg, "k", 5*time.Second, 3); err != nil {
				t.Errorf("acquire: %v", err)
				return
			}
			for _, prio := range []int64{3, 2} {
				_, err := b.Acquire(bg, "k", time.Second, prio)
				steals := d.EqualSteals && prio == 3
				if steals != (err == nil) || !steals && (!errors.Is(err, redlock.ErrHeld) || !strings.Contains(err.Error(), "by priority 3 ")) {
					t.Errorf("%+v: priority %d against 3: %v", d, prio, err)
				}
			}
			a.Close()
			b.Close()
		})
		run(t, w)
	}
}

// The thief acts only after the victim's acknowledgement: a victim whose
// watcher takes 300 ms to acknowledge holds it back that long.
func TestPrioritySlowVictimOnSimulator(t *testing.T) {
	c := runSteal(t, 3, 5*time.Second, 5*time.Second, 300*ms, false, redlock.Options{})
	lost, ok := c.ls.of(c.victim.Token)
	if c.err != nil || !ok || lost.At >= c.returned {
		t.Fatalf("thief: %v at %d; victim told %v at %d", c.err, c.returned, ok, lost.At)
	}
	if took := time.Duration(c.returned - lost.At); took < 300*ms {
		t.Errorf("the thief returned %v after the loss, before the acknowledgement", took)
	}
}

// A dead victim never acknowledges: the thief proceeds once the victim's
// lease can have ended, and not before.
func TestPriorityDeadVictimOnSimulator(t *testing.T) {
	c := runSteal(t, 3, 600*ms, 5*time.Second, 0, true, redlock.Options{})
	if c.err != nil || c.returned < c.victim.ValidUntil {
		t.Fatalf("thief: %v, returned %v before the dead victim's validity ended", c.err, time.Duration(c.victim.ValidUntil-c.returned))
	}
	if _, ok := c.ls.of(c.victim.Token); ok {
		t.Error("a dead victim was told")
	}
	if late := time.Duration(c.returned - c.victim.ValidUntil); late > 50*ms {
		t.Errorf("the thief returned %v after the victim's validity", late)
	}
}

// The defects that let the thief act before the victim knows do so on
// the simulator too (the victim, partitioned, hears of the theft a second
// late).
func TestPriorityDefectsThiefAheadOnSimulator(t *testing.T) {
	for _, c := range []struct {
		d     redlock.Defects
		ahead bool
	}{
		{redlock.Defects{}, false},
		{redlock.Defects{NoAckWait: true}, true},
		{redlock.Defects{ProceedOnAckTimeout: true}, true},
		{redlock.Defects{AckBeforeLost: true}, true},
	} {
		w := world(t, Options{Servers: 3})
		ls := &losses{w: w}
		var v redlock.Lease
		var returned int64
		w.Go("v", func(p *Process) {
			l := plock(p, redlock.Options{OnLost: ls.on, Defects: c.d})
			var err error
			if v, err = l.Acquire(bg, "k", 2*time.Second, 1); err != nil {
				t.Errorf("victim's acquire: %v", err)
				return
			}
			p.Sleep(5 * time.Second)
		})
		w.Go("t", func(p *Process) {
			p.Sleep(10 * ms)
			if _, err := plock(p, redlock.Options{Defects: c.d}).Acquire(bg, "k", 5*time.Second, 2); err != nil {
				t.Errorf("%+v: thief: %v", c.d, err)
			}
			returned = p.Now()
		})
		// The victim hears of the theft a second late, and its
		// acknowledgement waits 200 ms more for the third server.
		w.Go("slow", func(p *Process) {
			p.Sleep(5 * ms)
			for _, i := range []int{0, 1, 2} {
				w.Partition("v", i)
			}
			p.Sleep(time.Second)
			w.Heal("v", 0)
			w.Heal("v", 1)
			p.Sleep(500 * ms)
			w.Heal("v", 2)
		})
		run(t, w)
		lost, ok := ls.of(v.Token)
		if ahead := !ok || lost.At > returned; ahead != c.ahead {
			t.Errorf("%+v: the thief returned (%d) before the victim knew (%v, %d): %v, want %v", c.d, returned, ok, lost.At, ahead, c.ahead)
		}
	}
}

func TestPriorityTasksAreNamed(t *testing.T) {
	var b strings.Builder
	w := world(t, Options{Servers: 1, Trace: &b})
	w.Go("c", func(p *Process) {
		l := plock(p, redlock.Options{})
		x, err := l.Acquire(bg, "k", time.Second, 1)
		if err != nil {
			t.Error(err)
			return
		}
		l.Release(bg, x)
	})
	run(t, w)
	if !strings.Contains(b.String(), "c/1 registered") || !strings.Contains(b.String(), "c/1 ended") {
		t.Errorf("trace:\n%s", b.String())
	}
}

// Every command and script the priority lock sends, in each of its
// variants (the defects that send others: PUBLISH and SUBSCRIBE), is
// modelled: an unknown one would make Run fail. A steal, a refusal, a
// failed steal undone, refreshes and releases of both.
func TestPriorityCommandsAreModelled(t *testing.T) {
	for _, d := range []redlock.Defects{{}, {PubSubNotify: true}, {StealResetsTTL: true}, {EqualSteals: true},
		{NoAckWait: true}, {ProceedOnAckTimeout: true}, {AckBeforeLost: true}, {DirectVictimOnly: true}} {
		w := world(t, Options{Servers: 3, Decide: seeded(1)})
		w.Go("v", func(p *Process) {
			l := plock(p, redlock.Options{Defects: d})
			x, err := l.Acquire(bg, "k", time.Second, 1)
			if err != nil {
				t.Errorf("%+v: victim: %v", d, err)
				return
			}
			l.Refresh(bg, x, time.Second)
			p.Sleep(500 * ms)
			l.Verify(bg, x)
			l.Release(bg, x)
			l.Close()
		})
		w.Go("t", func(p *Process) {
			p.Sleep(100 * ms)
			l := plock(p, redlock.Options{Defects: d})
			x, err := l.Acquire(bg, "k", time.Second, 2)
			if err != nil {
				t.Errorf("%+v: thief: %v", d, err)
				return
			}
			p.Do(0, "HSET", "{k}:lock", "acq", "other", "prio", "9", "fence", "1")
			p.Do(1, "HSET", "{k}:lock", "acq", "other", "prio", "9", "fence", "1")
			if _, err := l.Acquire(bg, "k", time.Second, 5); !errors.Is(err, redlock.ErrHeld) {
				t.Errorf("%+v: a steal refused by a majority: %v", d, err)
			}
			l.Refresh(bg, x, time.Second)
			l.Release(bg, x)
			l.Close()
		})
		run(t, w)
	}
}

// A steal that misses its majority is undone: the victim holds its key
// again, with its own deadline, where the thief had taken it.
func TestPriorityFailedStealUndoneOnSimulator(t *testing.T) {
	steps(t, Options{Servers: 3}, func(p *Process, w *World) {
		hold := func(i int, token, prio string) {
			p.Do(i, "HSET", "{k}:lock", "acq", token, "prio", prio, "fence", "1")
			p.Do(i, "PEXPIRE", "{k}:lock", "5000")
		}
		hold(0, "victim", "1")
		hold(1, "high", "9")
		hold(2, "high", "9")
		p.Sleep(time.Second)
		if _, err := plock(p, redlock.Options{}).Acquire(bg, "k", 10*time.Second, 5); !errors.Is(err, redlock.ErrHeld) {
			t.Errorf("a steal refused by a majority: %v", err)
		}
		want(t, "the victim again", p.Do(0, "HGET", "{k}:lock", "acq"), "victim")
		if d := pttl(p, 0, "{k}:lock"); d > 4*time.Second || d < 3900*ms {
			t.Errorf("PTTL %v, not the victim's own deadline (4 s left)", d)
		}
		want(t, "the restored hash", p.Do(0, "HLEN", "{k}:lock"), int64(3))
	})
}

// With one of three servers down, leases are granted, stolen, refreshed
// and released on the other two; with two down, nothing is granted.
func TestPriorityOneServerDownOnSimulator(t *testing.T) {
	w := world(t, Options{Servers: 3})
	ls := &losses{w: w}
	w.Crash(0)
	w.Go("v", func(p *Process) {
		l := plock(p, redlock.Options{OnLost: ls.on})
		x, err := l.Acquire(bg, "k", 5*time.Second, 1)
		if err == nil {
			_, err = l.Refresh(bg, x, 5*time.Second)
		}
		if err != nil {
			t.Errorf("victim with one server down: %v", err)
		}
		p.Sleep(time.Second)
		w.Crash(1)
		if _, err := l.Acquire(bg, "k2", 5*time.Second, 1); !errors.Is(err, redlock.ErrNoQuorum) {
			t.Errorf("acquire with two servers down: %v", err)
		}
	})
	w.Go("t", func(p *Process) {
		p.Sleep(100 * ms)
		l := plock(p, redlock.Options{})
		x, err := l.Acquire(bg, "k", 5*time.Second, 2)
		if err != nil {
			t.Errorf("thief: %v", err)
			return
		}
		if _, ok := ls.of(""); len(ls.lost) != 1 || ok {
			t.Errorf("the victim was told %d times before the thief returned", len(ls.lost))
		}
		if ok, err := l.Verify(bg, x); !ok || err != nil {
			t.Errorf("thief's verify: %v %v", ok, err)
		}
		if err := l.Release(bg, x); err != nil {
			t.Errorf("thief's release: %v", err)
		}
	})
	run(t, w)
}

// A chain: T1 steals from V (slow to acknowledge), T2 steals from T1
// while T1 waits. T2 returns only after V knows (it tells V itself, the
// key's chain naming it); T1 fails with ErrStolen.
func TestPriorityChainOnSimulator(t *testing.T) {
	w := world(t, Options{Servers: 1})
	ls := &losses{w: w}
	var v redlock.Lease
	var returned int64
	var t1err error
	w.Go("v", func(p *Process) {
		v, _ = plock(p, redlock.Options{OnLost: ls.on}).Acquire(bg, "k", 5*time.Second, 1)
		p.Sleep(10 * time.Second)
	})
	w.Go("slow", func(p *Process) { // V hears of T1's theft 500 ms late
		p.Sleep(5 * ms)
		w.Partition("v", 0)
		p.Sleep(500 * ms)
		w.Heal("v", 0)
	})
	w.Go("t1", func(p *Process) {
		p.Sleep(10 * ms)
		_, t1err = plock(p, redlock.Options{}).Acquire(bg, "k", 5*time.Second, 2)
		p.Sleep(10 * time.Second)
	})
	w.Go("t2", func(p *Process) {
		p.Sleep(50 * ms)
		if _, err := plock(p, redlock.Options{}).Acquire(bg, "k", 5*time.Second, 3); err != nil {
			t.Errorf("T2: %v", err)
		}
		returned = p.Now()
	})
	run(t, w)
	if lost, ok := ls.of(v.Token); !ok || lost.At > returned {
		t.Errorf("T2 returned (%d) before V knew (%v, %d)", returned, ok, lost.At)
	}
	if !errors.Is(t1err, redlock.ErrStolen) {
		t.Errorf("T1: %v, want ErrStolen", t1err)
	}
}

// A failed steal robbed in turn: T1 takes V's key, its answer lost (so it
// fails, and tells nobody); T2 steals the key from T1 before T1's undo.
// T2 learns of V from the key's chain, tells it and waits for it, and T1
// (which holds nothing) acknowledges at once. With DirectVictimOnly T2
// tells T1 only, and returns while V, never told, still holds.
func TestPriorityChainOfFailedStealOnSimulator(t *testing.T) {
	for _, d := range []redlock.Defects{{}, {DirectVictimOnly: true}} {
		w := world(t, Options{Servers: 1})
		ls := &losses{w: w}
		var v redlock.Lease
		var returned int64
		var t1err error
		w.Go("v", func(p *Process) {
			v, _ = plock(p, redlock.Options{OnLost: ls.on}).Acquire(bg, "k", 5*time.Second, 1)
			p.Sleep(10 * time.Second)
		})
		w.Go("t1", func(p *Process) {
			p.Sleep(10 * ms)
			w.DropReply("t1", 0)
			_, t1err = plock(p, redlock.Options{}).Acquire(bg, "k", 5*time.Second, 2)
			p.Sleep(10 * time.Second)
		})
		w.Go("t2", func(p *Process) {
			p.Sleep(10*ms + 50*time.Microsecond) // its obtain waits behind T1's, before T1's undo
			if _, err := plock(p, redlock.Options{Defects: d}).Acquire(bg, "k", 5*time.Second, 3); err != nil {
				t.Errorf("%+v: T2: %v", d, err)
			}
			returned = p.Now()
		})
		run(t, w)
		lost, told := ls.of(v.Token)
		if early := !told || lost.At > returned; early != d.DirectVictimOnly {
			t.Errorf("%+v: T2 returned (%d) before V knew (%v, %d): %v", d, returned, told, lost.At, early)
		}
		if !errors.Is(t1err, redlock.ErrLeftBehind) {
			t.Errorf("%+v: T1: %v, want ErrLeftBehind", d, t1err)
		}
	}
}

// A victim slow to subscribe (partitioned meanwhile): a note on a list
// waits for it, and it learns; a PUBLISH finds nobody subscribed and is
// lost: the victim never learns, and the thief waits out the victim's
// whole remaining time.
func TestPriorityDefectPubSubNotifyOnSimulator(t *testing.T) {
	for _, d := range []redlock.Defects{{}, {PubSubNotify: true}} {
		w := world(t, Options{Servers: 1})
		ls := &losses{w: w}
		var v redlock.Lease
		var returned int64
		w.Go("v", func(p *Process) {
			w.Partition("v", 0)
			w.Heal("v", 0)
			v, _ = plock(p, redlock.Options{OnLost: ls.on, Defects: d}).Acquire(bg, "k", 1500*ms, 1)
			w.Partition("v", 0) // its watcher's BLPOP or SUBSCRIBE waits
			p.Sleep(300 * ms)
			w.Heal("v", 0)
			p.Sleep(5 * time.Second)
		})
		w.Go("t", func(p *Process) {
			p.Sleep(100 * ms)
			if _, err := plock(p, redlock.Options{Defects: d}).Acquire(bg, "k", 5*time.Second, 2); err != nil {
				t.Errorf("%+v: thief: %v", d, err)
			}
			returned = p.Now()
		})
		run(t, w)
		_, learnt := ls.of(v.Token)
		if learnt != !d.PubSubNotify {
			t.Errorf("%+v: the victim learnt of its loss: %v", d, learnt)
		}
		if waited := returned >= v.ValidUntil; waited != d.PubSubNotify {
			t.Errorf("%+v: the thief waited out the victim's validity: %v", d, waited)
		}
	}
}
