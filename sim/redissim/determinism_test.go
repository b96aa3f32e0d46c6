package redissim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// workload runs four clients of the reference on three servers and a
// nemesis (a client killed and started again, a server paused, a
// partition, a lost reply, a clock jump, a restart without persistence)
// under the schedule seed draws, writing the trace and every outcome to
// out.
func workload(t testing.TB, seed uint64, out *bytes.Buffer) {
	pers := []Persistence{None, Always}[seed%2]
	w := world(t, Options{Servers: 3, Persistence: pers, Decide: seeded(seed), Trace: out})
	client := func(name string, gen int) func(p *Process) {
		return func(p *Process) {
			var src [32]byte
			copy(src[:], fmt.Sprintf("%d/%s/%d", seed, name, gen))
			r := lock(p, redlock.Options{Random: rand.NewChaCha8(src), Timeout: 5 * ms})
			rng := rand.New(rand.NewPCG(seed, uint64(len(name)+gen)))
			for range 6 {
				l, err := r.Acquire(bg, "k", 30*ms)
				fmt.Fprintf(out, "%s acquire: %+v %v\n", name, l, err)
				p.Sleep(time.Duration(rng.IntN(15)) * ms)
				if err == nil {
					_, err := r.Refresh(bg, l, 30*ms)
					fmt.Fprintf(out, "%s refresh: %v\n", name, err)
					ok, err := r.Verify(bg, l)
					fmt.Fprintf(out, "%s verify: %v %v\n", name, ok, err)
					p.Sleep(time.Duration(rng.IntN(15)) * ms)
					fmt.Fprintf(out, "%s release: %v\n", name, r.Release(bg, l))
				}
			}
		}
	}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("c%d", i)
		w.Go(name, client(name, 0))
	}
	w.Go("nemesis", func(p *Process) {
		p.Sleep(10 * ms)
		w.Kill("c1")
		w.Go("c1", client("c1", 1))
		w.Pause(1)
		w.Partition("c2", 0)
		w.DropReply("c3", 2)
		p.Sleep(20 * ms)
		w.Resume(1)
		w.Heal("c2", 0)
		w.ClockJump(2, 15*ms)
		p.Sleep(10 * ms)
		w.Restart(0, 5*ms)
	})
	run(t, w)
	for i := range 3 {
		ks, _ := w.Keys(i)
		fmt.Fprintf(out, "s%d keys %v\n", i, ks)
	}
}

// The same schedule gives the same run, byte for byte: trace, outcomes,
// tokens, final keys; and different schedules give different runs.
func TestSameSeedSameRun(t *testing.T) {
	distinct := map[string]bool{}
	for seed := uint64(0); seed < 40; seed++ {
		var a, b bytes.Buffer
		workload(t, seed, &a)
		workload(t, seed, &b)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("seed %d: two runs differ:\n%s", seed, firstDiff(a.String(), b.String()))
		}
		if strings.Count(a.String(), "\n") < 150 {
			t.Fatalf("seed %d: a trace too short to mean anything:\n%s", seed, a.String())
		}
		distinct[a.String()] = true
	}
	if len(distinct) < 35 {
		t.Fatalf("only %d distinct runs in 40 seeds", len(distinct))
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("one run is longer (%d and %d lines)", len(la), len(lb))
}

// BenchmarkCycle is one client's acquire, refresh and release on three
// servers, with a second process idle.
func BenchmarkCycle(b *testing.B) {
	w := world(b, Options{Servers: 3})
	w.Go("a", func(p *Process) {
		r := lock(p, redlock.Options{})
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			l, err := r.Acquire(bg, "k", time.Second)
			if err != nil {
				panic(err)
			}
			if _, err := r.Refresh(bg, l, time.Second); err != nil {
				panic(err)
			}
			if err := r.Release(bg, l); err != nil {
				panic(err)
			}
		}
		b.StopTimer()
	})
	w.Go("idle", func(p *Process) { p.Sleep(time.Hour) })
	run(b, w)
}

// priorityWorkload is workload for the priority lock: four clients, each
// acquire of a priority drawn from 0 to 3, stealing from each other on
// three servers (c4 notifies by PUBLISH: the PubSubNotify defect), with
// the same nemesis.
func priorityWorkload(t testing.TB, seed uint64, out *bytes.Buffer) {
	pers := []Persistence{None, Always}[seed%2]
	w := world(t, Options{Servers: 3, Persistence: pers, Decide: seeded(seed), Trace: out})
	client := func(name string, gen int) func(p *Process) {
		return func(p *Process) {
			var src [32]byte
			copy(src[:], fmt.Sprintf("%d/%s/%d", seed, name, gen))
			o := redlock.Options{Random: rand.NewChaCha8(src), Timeout: 5 * ms,
				OnLost: func(x redlock.Lost) { fmt.Fprintf(out, "%s lost %+v\n", name, x) }}
			o.Defects.PubSubNotify = name == "c4"
			l := plock(p, o)
			rng := rand.New(rand.NewPCG(seed, uint64(len(name)+gen)))
			for range 5 {
				x, err := l.Acquire(bg, "k", 60*ms, int64(rng.IntN(4)))
				fmt.Fprintf(out, "%s acquire: %+v %v\n", name, x, err)
				p.Sleep(time.Duration(rng.IntN(15)) * ms)
				if err == nil {
					_, err := l.Refresh(bg, x, 60*ms)
					fmt.Fprintf(out, "%s refresh: %v\n", name, err)
					ok, err := l.Verify(bg, x)
					fmt.Fprintf(out, "%s verify: %v %v\n", name, ok, err)
					p.Sleep(time.Duration(rng.IntN(15)) * ms)
					fmt.Fprintf(out, "%s release: %v\n", name, l.Release(bg, x))
				}
			}
			l.Close()
		}
	}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("c%d", i)
		w.Go(name, client(name, 0))
	}
	w.Go("nemesis", func(p *Process) {
		p.Sleep(60 * ms)
		w.Kill("c1")
		w.Go("c1", client("c1", 1))
		w.Pause(1)
		w.Partition("c2", 0)
		w.DropReply("c3", 2)
		p.Sleep(20 * ms)
		w.Resume(1)
		w.Heal("c2", 0)
		w.ClockJump(2, 15*ms)
		p.Sleep(10 * ms)
		w.Restart(0, 5*ms)
	})
	run(t, w)
	for i := range 3 {
		ks, _ := w.Keys(i)
		fmt.Fprintf(out, "s%d keys %v\n", i, ks)
	}
}

// The same schedule gives the same run of the priority lock, byte for
// byte, its tasks, signals and blocking pops included; different
// schedules, different runs.
func TestPrioritySameSeedSameRun(t *testing.T) {
	distinct := map[string]bool{}
	thefts := 0
	for seed := uint64(0); seed < 30; seed++ {
		var a, b bytes.Buffer
		priorityWorkload(t, seed, &a)
		priorityWorkload(t, seed, &b)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("seed %d: two runs differ:\n%s", seed, firstDiff(a.String(), b.String()))
		}
		if strings.Count(a.String(), "\n") < 300 {
			t.Fatalf("seed %d: a trace too short to mean anything:\n%s", seed, a.String())
		}
		if strings.Contains(a.String(), " lost {") {
			thefts++
		}
		distinct[a.String()] = true
	}
	if len(distinct) < 28 || thefts < 10 {
		t.Fatalf("%d distinct runs in 30 seeds, %d with a theft", len(distinct), thefts)
	}
}
