package consulsim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
)

var bg = context.Background()

const ms = time.Millisecond

// seeded is a Decide drawing from a PCG seeded with seed.
func seeded(seed uint64) func(n int) int {
	r := rand.New(rand.NewPCG(seed, 0x636f6e73))
	return func(n int) int { return r.IntN(n) }
}

// world is a World of o, failing t on bad options.
func world(t testing.TB, o Options) *World {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sem is the reference on p's Backend.
func sem(p *Process, o consulsem.Options) *consulsem.Semaphore {
	s, err := p.Semaphore(o)
	if err != nil {
		panic(err)
	}
	return s
}

// runWorld runs w, failing t on a process's panic.
func runWorld(t testing.TB, w *World) {
	t.Helper()
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
}

// workload runs four clients of the reference (limit 2) and a nemesis (a
// client killed and started again, one paused, one partitioned, a lost
// reply, a force-close, a restart of the server) under the schedule seed draws, on a
// server of kind k, writing the trace and every outcome to out.
func workload(t testing.TB, k Kind, seed uint64, out *bytes.Buffer) {
	o := Options{Kind: k, Persistent: seed%2 == 0, Decide: seeded(seed), Trace: out}
	w := world(t, o)
	client := func(name string) func(p *Process) {
		return func(p *Process) {
			s := sem(p, consulsem.Options{StaleReads: len(name)%2 == 0})
			rng := rand.New(rand.NewPCG(seed, uint64(len(name))))
			for range 5 {
				l, err := s.Acquire(bg, "sem", 2, 2*time.Second)
				fmt.Fprintf(out, "%s acquire: %+v %v\n", name, l, err)
				p.Sleep(time.Duration(rng.IntN(1500)) * ms)
				if err == nil {
					fmt.Fprintf(out, "%s refresh: %v\n", name, s.Refresh(bg, "sem", l.Token))
					held, err := s.Verify(bg, "sem", l.Token)
					fmt.Fprintf(out, "%s verify: %v %v\n", name, held, err)
					p.Sleep(time.Duration(rng.IntN(1500)) * ms)
					fmt.Fprintf(out, "%s release: %v\n", name, s.Release(bg, "sem", l.Token))
				}
			}
		}
	}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("c%d", i)
		w.Go(name, client(name))
	}
	w.Go("nemesis", func(p *Process) {
		p.Sleep(500 * ms)
		w.Kill("c1")
		w.Go("c1", client("c1"))
		w.Pause("c2")
		w.Partition("c3")
		w.DropReply("c4")
		p.Sleep(3 * time.Second)
		w.Resume("c2")
		w.Heal("c3")
		w.ForceClose("c1")
		p.Sleep(time.Second)
		if err := w.Restart(200 * ms); err != nil {
			panic(err)
		}
	})
	runWorld(t, w)
	fmt.Fprintf(out, "keys %v sessions %v\n", w.Keys(), w.Sessions())
}

// The same schedule gives the same run, byte for byte: trace, outcomes,
// tokens, fences, final keys; and different schedules give different
// runs.
func TestSameSeedSameRun(t *testing.T) {
	for _, k := range []Kind{Consul, Etcd} {
		distinct := map[string]bool{}
		for seed := uint64(0); seed < 30; seed++ {
			var a, b bytes.Buffer
			workload(t, k, seed, &a)
			workload(t, k, seed, &b)
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("%s seed %d: two runs differ:\n%s", k, seed, firstDiff(a.String(), b.String()))
			}
			if n := strings.Count(a.String(), "\n"); n < 150 {
				t.Fatalf("%s seed %d: a trace of %d lines, too short to mean anything:\n%s", k, seed, n, a.String())
			}
			if !strings.Contains(a.String(), "acquire: {Token:") || !strings.Contains(a.String(), "release: <nil>") {
				t.Fatalf("%s seed %d: no lease granted and released:\n%s", k, seed, a.String())
			}
			distinct[a.String()] = true
		}
		if len(distinct) < 27 {
			t.Fatalf("%s: only %d distinct runs in 30 seeds", k, len(distinct))
		}
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
