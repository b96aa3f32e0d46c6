package mariadbsim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
)

// workload runs four clients of the reference and a nemesis (kill and
// restart, pause, KILL CONNECTION, a lost COMMIT reply, a server restart,
// a skewed clock) under the schedule seed draws, writing the trace and
// every outcome to out.
func workload(t testing.TB, seed uint64, out *bytes.Buffer) {
	d := designs[seed%2]
	w := New(Options{Decide: seeded(seed), Trace: out, LockWaitTimeout: 50 * time.Millisecond})
	var client func(name string, gen int) func(p *Process)
	client = func(name string, gen int) func(p *Process) {
		return func(p *Process) {
			var src [32]byte
			copy(src[:], fmt.Sprintf("%d/%s/%d", seed, name, gen))
			s, err := dbsem.Open(bg, p.DB(), dbsem.Options{Design: d, Fencing: true, Prefix: prefix, Random: rand.NewChaCha8(src)})
			if err != nil {
				fmt.Fprintf(out, "%s open: %v\n", name, err)
				return
			}
			rng := rand.New(rand.NewPCG(seed, uint64(len(name)+gen)))
			for range 6 {
				l, err := s.Acquire(bg, "k", 20*time.Millisecond, 2)
				fmt.Fprintf(out, "%s acquire: %+v %v\n", name, l, err)
				p.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
				if err == nil {
					fmt.Fprintf(out, "%s refresh: %v\n", name, s.Refresh(bg, "k", l.Token, 20*time.Millisecond))
					p.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
					fmt.Fprintf(out, "%s release: %v\n", name, s.Release(bg, "k", l.Token))
				}
			}
		}
	}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("c%d", i)
		w.Go(name, client(name, 0))
	}
	w.Go("nemesis", func(p *Process) {
		p.Sleep(10 * time.Millisecond)
		w.Kill("c1")
		w.Go("c1", client("c1", 1))
		w.Pause("c2")
		w.SkewClock("c2", 15*time.Millisecond)
		p.Sleep(20 * time.Millisecond)
		w.KillConnections("c3")
		w.DropCommitReply("c4")
		w.Resume("c2")
		p.Sleep(20 * time.Millisecond)
		w.Restart(10 * time.Millisecond)
		w.SkewClock("c2", 0)
	})
	w.AfterStatements("c3", 12, func() { w.Kill("c3") })
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "rows %v, c4 %+v\n", w.Rows(prefix), w.Counters("c4"))
}

// The same schedule gives the same run, byte for byte: trace, outcomes,
// tokens, final state.
func TestSameSeedSameRun(t *testing.T) {
	distinct := map[string]bool{}
	for seed := uint64(0); seed < 40; seed++ {
		var a, b bytes.Buffer
		workload(t, seed, &a)
		workload(t, seed, &b)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("seed %d: two runs differ:\n%s", seed, firstDiff(a.String(), b.String()))
		}
		if strings.Count(a.String(), "\n") < 200 {
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

// BenchmarkCycle is one client's acquire, refresh and release, with
// fencing: 11 statements (master-row) or 9 (row-per-slot), each a
// scheduling point, through database/sql, with a second process idle.
func BenchmarkCycle(b *testing.B) {
	for _, d := range designs {
		b.Run(d.String(), func(b *testing.B) {
			w := New(Options{})
			w.Go("a", func(p *Process) {
				s := open(p, dbsem.Options{Design: d, Fencing: true})
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					l := acquire(s, "k", time.Second, 1)
					must("refresh", s.Refresh(bg, "k", l.Token, time.Second), nil)
					must("release", s.Release(bg, "k", l.Token), nil)
				}
				b.StopTimer()
			})
			w.Go("idle", func(p *Process) { p.Sleep(time.Hour) })
			if err := w.Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
