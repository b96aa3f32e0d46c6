package sched_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/statehash"
	"github.com/lockprover/lockprover/sim/sched"
)

// world is a minimal simulator: processes that log, yield and sleep.
type world struct {
	now int64
	s   sched.Scheduler[*proc, int64]
	log []string
}

type proc struct {
	w     *world
	proc  sched.Proc[*proc, int64]
	name  string
	fn    func(*proc)
	sleep time.Duration // the posted request: sleep this long (0: just yield)
}

// picks is a Decider answering from a list, then 0.
type picks []int

func (p *picks) Pick(n int) int {
	if len(*p) == 0 {
		return 0
	}
	i := (*p)[0] % n
	*p = (*p)[1:]
	return i
}

func newWorld(d sched.Decider) *world {
	w := &world{}
	w.s.Init(sched.Config[*proc]{
		Clock:   &w.now,
		Decide:  d,
		Program: func(p *proc) { p.fn(p) },
		Serve: func(p *proc) {
			if p.sleep < 0 {
				p.w.s.Handoff(&p.proc, p.w.now) // on at once
				return
			}
			if p.sleep == 0 {
				p.proc.Deliver(p.w.now) // on when the Decider says
				return
			}
			p.proc.Block()
			p.w.s.DeliverAt(p.w.now+int64(p.sleep), &p.proc, p.w.now+int64(p.sleep))
		},
		Exit: func(p *proc, panicked any) {
			end := "ends"
			if p.proc.Killed() {
				end = "killed"
			}
			if panicked != nil {
				end = fmt.Sprint("panics ", panicked)
			}
			p.w.logf("%s %s", p.name, end)
		},
		Stuck: func(p *proc) { p.w.logf("%s stuck", p.name) },
	})
	return w
}

func (w *world) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%d ", w.now)+fmt.Sprintf(format, args...))
}

func (w *world) goProc(name string, fn func(*proc)) *proc {
	p := &proc{w: w, name: name, fn: fn}
	w.s.Go(&p.proc, p)
	return p
}

// wait is a scheduling point: the process sleeps d (0: it only yields;
// less: it goes on in the same step). The reply is the time it woke.
func (p *proc) wait(d time.Duration) int64 {
	if p.w.s.Running() != p {
		panic("not running")
	}
	p.sleep = d
	woke, killed := p.proc.Yield()
	if killed {
		p.proc.Stop()
	}
	return woke
}

func steps(name string, n int) func(*proc) {
	return func(p *proc) {
		for i := range n {
			p.w.logf("%s %d", name, i)
			p.wait(0)
		}
	}
}

func TestOrderFollowsTheDecider(t *testing.T) {
	run := func(d []int) string {
		ps := picks(d)
		w := newWorld(&ps)
		w.goProc("a", steps("a", 3))
		w.goProc("b", steps("b", 3))
		w.s.Run()
		return strings.Join(w.log, "\n")
	}
	first := run(nil)
	if want := "0 a 0\n0 a 1\n0 a 2\n0 a ends\n0 b 0\n0 b 1\n0 b 2\n0 b ends"; first != want {
		t.Errorf("always the first:\n%s\nwant\n%s", first, want)
	}
	mixed := []int{1, 1, 0, 1, 0, 0, 1}
	got := run(mixed)
	for range 5 {
		if again := run(mixed); again != got {
			t.Fatalf("the same decisions gave\n%s\nthen\n%s", got, again)
		}
	}
	if got == first || !strings.HasPrefix(got, "0 b 0\n") {
		t.Errorf("decisions %v did not steer the run:\n%s", mixed, got)
	}
}

func TestTimersAndSleep(t *testing.T) {
	w := newWorld(nil)
	w.goProc("a", func(p *proc) {
		woke := p.wait(30 * time.Nanosecond)
		p.w.logf("a woke, told %d", woke)
	})
	w.goProc("b", func(p *proc) {
		p.w.s.After(10, func() { p.w.logf("timer 10") })
		tm := p.w.s.After(20, func() { p.w.logf("cancelled") })
		p.w.s.At(10, func() { p.w.logf("timer at 10, set second") })
		tm.Cancel()
		if now := p.wait(-1); now != 0 {
			t.Errorf("a handoff at 0 said %d", now)
		}
		p.wait(50)
		p.w.logf("b woke")
	})
	w.s.Run()
	got := strings.Join(w.log, "\n")
	if want := "10 timer 10\n10 timer at 10, set second\n30 a woke, told 30\n30 a ends\n50 b woke\n50 b ends"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var fired []int64
	w.s.After(5, func() { fired = append(fired, w.now) })
	w.s.After(15, func() { fired = append(fired, w.now) })
	w.s.Advance(10)
	if w.now != 60 || len(fired) != 1 || fired[0] != 55 {
		t.Errorf("Advance(10) from 50: now %d, fired at %v", w.now, fired)
	}
}

func TestKillAndPause(t *testing.T) {
	w := newWorld(nil)
	victim := w.goProc("victim", func(p *proc) {
		defer p.w.logf("victim unwinds")
		for {
			p.wait(10)
			p.w.logf("victim tick")
		}
	})
	sleeper := w.goProc("sleeper", func(p *proc) { p.w.logf("sleeper runs") })
	frozen := w.goProc("frozen", func(p *proc) { p.w.logf("frozen runs") })
	never := w.goProc("never", func(p *proc) { p.w.logf("never runs") })
	// Outside Run, faults apply at once; during Run, from the scheduler
	// (a timer here; a simulator's served request).
	sleeper.proc.Pause()
	frozen.proc.Pause()
	w.s.Kill(&never.proc, func() { w.logf("never killed") })
	w.s.After(15, sleeper.proc.Resume)
	w.s.After(25, func() {
		w.s.Kill(&victim.proc, func() { w.logf("victim killed") })
		if !victim.proc.Ended() || !victim.proc.Killed() {
			t.Error("victim still going after Kill")
		}
	})
	w.s.Run()
	got := strings.Join(w.log, "\n")
	want := strings.Join([]string{
		"0 never killed",
		"0 never killed", // the Exit of a process killed before it started
		"10 victim tick",
		"15 sleeper runs",
		"15 sleeper ends",
		"20 victim tick",
		"25 victim killed",
		"25 victim unwinds",
		"25 victim killed", // its Exit
		"30 frozen stuck",  // once the victim's last sleep has run out
		"30 frozen killed",
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !frozen.proc.Ended() {
		t.Error("Run left a paused process unended")
	}
}

// TestPanicsStayInTheProcess: a process's panic, and the Stop of a killed
// process unwinding (also from its deferred functions, which call the
// simulator again), end that process only; the scheduler goes on.
func TestPanicsStayInTheProcess(t *testing.T) {
	w := newWorld(nil)
	w.goProc("boom", func(p *proc) {
		p.wait(0)
		panic("boom")
	})
	victim := w.goProc("victim", func(p *proc) {
		defer p.w.logf("victim's first defer")
		defer func() {
			p.wait(0) // killed: stops again at once
			p.w.logf("not reached")
		}()
		p.wait(100)
	})
	w.goProc("after", func(p *proc) {
		p.wait(10)
		p.w.logf("after goes on")
	})
	w.s.After(5, func() { w.s.Kill(&victim.proc, nil) })
	w.s.Run()
	got := strings.Join(w.log, "\n")
	want := strings.Join([]string{
		"0 boom panics boom",
		"5 victim's first defer",
		"5 victim killed",
		"10 after goes on",
		"10 after ends",
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSleepsAllocateNothing: once a process has slept, its sleeps (the
// timer that wakes it, the hand-offs) allocate nothing.
func TestSleepsAllocateNothing(t *testing.T) {
	const sleeps = 1000
	w := newWorld(nil)
	var allocs uint64
	w.goProc("sleeper", func(p *proc) {
		p.wait(1)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range sleeps {
			p.wait(1)
		}
		runtime.ReadMemStats(&m1)
		allocs = m1.Mallocs - m0.Mallocs
	})
	w.s.Run()
	if allocs > sleeps/10 {
		t.Errorf("%d sleeps allocated %d times", sleeps, allocs)
	}
}

// TestCoroutinesAreReused: a process that starts once another has ended
// runs on that one's coroutine, and none is left once Run returns.
func TestCoroutinesAreReused(t *testing.T) {
	before := settledGoroutines()
	w := newWorld(nil)
	var inA, inB int
	w.goProc("a", func(p *proc) { inA = runtime.NumGoroutine() })
	w.s.After(10, func() {
		w.goProc("b", func(p *proc) {
			p.wait(1)
			inB = runtime.NumGoroutine()
		})
	})
	w.s.Run()
	if inA != before+1 || inB != inA {
		t.Errorf("goroutines: %d before Run, %d in a, %d in b (started after a ended)", before, inA, inB)
	}
	if n := settledGoroutines(); n != before {
		t.Errorf("%d goroutines after Run, %d before", n, before)
	}
}

// settledGoroutines is the number of goroutines once it has stopped
// changing for 20ms (up to 2s): goroutines of the tests before this one
// may still be ending (CI once counted 3 before Run and 2 after it).
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for deadline, still := time.Now().Add(2*time.Second), 0; still < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			still++
		} else {
			n, still = m, 0
		}
	}
	return n
}

// TestPoolSharesCoroutines: worlds that share a Pool run their processes
// on the coroutines the worlds before them left, one after another and
// beside each other, and run as they would without it; a Pool keeps no
// more coroutines than it has room for.
func TestPoolSharesCoroutines(t *testing.T) {
	inside := 0 // goroutines while the last process runs
	script := func(w *world) {
		for i := range 3 {
			w.goProc(fmt.Sprint("p", i), func(p *proc) {
				p.wait(time.Duration(i + 1))
				if i == 2 {
					inside = runtime.NumGoroutine()
				}
				if i == 1 {
					p.proc.Pause()
					p.wait(0) // never scheduled again: killed once stuck
				}
			})
		}
	}
	plain := newWorld(&picks{1, 0, 1})
	script(plain)
	plain.s.Run()

	var pool sched.Pool[*proc, int64]
	run := func() *world {
		w := newWorld(&picks{1, 0, 1})
		w.s.Share(&pool)
		script(w)
		w.s.Run()
		return w
	}
	first := run()
	if strings.Join(first.log, "\n") != strings.Join(plain.log, "\n") {
		t.Fatalf("with a pool:\n%s\nwithout:\n%s", strings.Join(first.log, "\n"), strings.Join(plain.log, "\n"))
	}
	before := settledGoroutines()
	for range 5 {
		if w := run(); strings.Join(w.log, "\n") != strings.Join(plain.log, "\n") {
			t.Fatalf("a later world ran otherwise:\n%s", strings.Join(w.log, "\n"))
		}
		if inside != before {
			t.Fatalf("%d goroutines in a later world, %d before it: it made coroutines of its own", inside, before)
		}
	}
	// Worlds beside each other take what the pool has and make the rest.
	done := make(chan bool)
	for range 4 {
		go func() { run(); done <- true }()
	}
	for range 4 {
		<-done
	}
	if n := settledGoroutines(); n > before+3*3 {
		t.Errorf("%d goroutines after the worlds, %d before", n, before)
	}
}

// A world's state, as the exhaustive search fingerprints it, leaves out
// the Pool it shares: another world filling or emptying the Pool (a search
// on another CPU) changes nothing of this world's fingerprint, and is not
// read meanwhile (two searches at once once panicked hashing the Pool's
// slice as the other grew it).
func TestSharedPoolIsNotState(t *testing.T) {
	var pool sched.Pool[*proc, int64]
	w := newWorld(&picks{})
	w.s.Share(&pool)
	h := statehash.New()
	before := h.Sum(w)
	for range 3 {
		other := newWorld(&picks{})
		other.s.Share(&pool)
		for i := range 4 {
			other.goProc(fmt.Sprint("p", i), steps(fmt.Sprint("p", i), 2))
		}
		other.s.Run()
	}
	if after := h.Sum(w); after != before {
		t.Errorf("the world's fingerprint changed with the Pool another world filled: %x, then %x", before, after)
	}
}
