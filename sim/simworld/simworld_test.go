package simworld_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/sim/sched"
	"github.com/lockprover/lockprover/sim/simworld"
)

// world is a minimal simulator on a Base: a process's own request is an
// echo, answered at once, or held while its Link is cut.
type world struct {
	now   int64
	sched sched.Scheduler[*proc, string]
	base  simworld.Base[*proc, string]
	trace bytes.Buffer
	log   []string
}

type proc struct {
	w    *world
	proc simworld.Proc[*proc, string]
	say  string // the posted echo
}

func newWorld(decide func(int) int, continues bool) *world {
	w := &world{}
	w.base.Init(&w.sched, simworld.Config[*proc, string]{
		Name: "toy", Clock: &w.now, Trace: &w.trace, Decide: decide,
		Proc:               func(p *proc) *simworld.Proc[*proc, string] { return &p.proc },
		Serve:              w.serve,
		Exit:               func(p *proc) { w.log = append(w.log, p.proc.Name()+" exit") },
		ZeroSleepContinues: continues,
	})
	return w
}

func (w *world) serve(p *proc) {
	say := p.say
	p.proc.Block()
	if l := p.proc.Link(); l.Cut() {
		l.Hold(func() { p.proc.Deliver(say) })
		return
	}
	p.proc.Deliver(say)
	w.sched.Continue(&p.proc.Proc)
}

func (w *world) goProc(name string, fn func(p *proc)) { w.base.Go(&proc{w: w}, name, fn) }

func (p *proc) echo(s string) string {
	p.say = s
	rep, _ := p.w.base.Call(p, true)
	return rep
}

func (p *proc) logf(s string) { p.w.log = append(p.w.log, p.proc.Name()+" "+s) }

// Sleeps, kills (deferred functions run), pauses and partitions, with a
// trace that says so; a name is free again once its process ended.
func TestFaults(t *testing.T) {
	w := newWorld(nil, false)
	w.goProc("a", func(p *proc) {
		defer p.logf("deferred")
		p.w.base.Sleep(p, time.Second)
		p.logf(p.echo("never")) // killed meanwhile
	})
	w.goProc("b", func(p *proc) {
		p.logf(p.echo("b1")) // served in its first step
		p.w.base.Sleep(p, 2*time.Second)
		p.logf(p.echo("b2")) // held until the heal
	})
	w.goProc("n", func(p *proc) {
		p.w.base.Sleep(p, 500*time.Millisecond)
		p.w.base.Kill("a")
		p.w.base.Partition("b", "cut off")
		p.w.base.Pause("c") // no such process
		p.w.base.Sleep(p, 2*time.Second)
		p.w.base.Heal("b")
	})
	if err := w.base.Run(); err != nil {
		t.Fatal(err)
	}
	want := "b b1|a deferred|a exit|n exit|b b2|b exit"
	if got := strings.Join(w.log, "|"); got != want || w.now != int64(2500*time.Millisecond) {
		t.Errorf("log %s at %d, want %s at 2.5s", got, w.now, want)
	}
	for _, line := range []string{"a killed", "a ended (killed)", "b cut off", "pause c: no such process", "b healed", "b sleeps 2s"} {
		if !strings.Contains(w.trace.String(), line) {
			t.Errorf("trace lacks %q:\n%s", line, w.trace.String())
		}
	}
	w.goProc("a", func(p *proc) {}) // a has ended: its name is free
}

// A served Sleep of nothing leaves the process to compete again, unless
// ZeroSleepContinues: Decide picks x to start and to serve its sleep,
// then prefers y.
func TestZeroSleep(t *testing.T) {
	for _, continues := range []bool{false, true} {
		picks := 0
		w := newWorld(func(n int) int {
			if picks++; picks <= 2 {
				return 0
			}
			return n - 1
		}, continues)
		w.goProc("x", func(p *proc) {
			p.w.base.Sleep(p, 0)
			p.logf("after")
		})
		w.goProc("y", func(p *proc) { p.logf("runs") })
		if err := w.base.Run(); err != nil {
			t.Fatal(err)
		}
		want := "x after|x exit|y runs|y exit"
		if !continues {
			want = "y runs|y exit|x after|x exit"
		}
		if got := strings.Join(w.log, "|"); got != want {
			t.Errorf("continues %v: %s, want %s", continues, got, want)
		}
	}
}

// A panic is the run's failure; a live name cannot be taken again; a
// Decide out of range panics.
func TestFailures(t *testing.T) {
	w := newWorld(nil, false)
	w.goProc("p", func(p *proc) { panic("boom") })
	if err := w.base.Run(); err == nil || !strings.HasPrefix(err.Error(), "toy: process p panicked: boom") {
		t.Errorf("Run: %v", err)
	}
	w.goProc("q", func(p *proc) {})
	mustPanic(t, "toy: process \"q\" is still running", func() { w.goProc("q", func(p *proc) {}) })
	mustPanic(t, "toy: Decide(3) = 3", func() { newWorld(func(n int) int { return n }, false).base.Pick(3) })
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != want {
			t.Errorf("panic %v, want %q", r, want)
		}
	}()
	f()
}
