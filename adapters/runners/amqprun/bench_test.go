package amqprun

import (
	"fmt"
	"testing"

	"github.com/lockprover/lockprover/internal/prover"
)

// BenchmarkPlans is the cost of proving one plan on the simulator (draw,
// run, judge): 3 clients of up to 8 steps each (about 26 operations with the
// admin and the probe), every fault. Then how it grows with clients and
// steps. Reported as plans/s and operations/s (a history's events
// halved, as --json counts them), both by the search's wall clock, on as
// many workers as GOMAXPROCS: issue 38's goal of 150,000 operations a
// second on 2 cores is ops/s of the first, with -cpu 2.
func BenchmarkPlans(b *testing.B) {
	for _, c := range []struct{ clients, ops int }{{3, 8}, {1, 8}, {6, 8}, {12, 8}, {3, 16}, {3, 32}} {
		b.Run(fmt.Sprintf("clients=%d/ops=%d", c.clients, c.ops), func(b *testing.B) {
			b.ReportAllocs()
			out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Clients: c.clients, Ops: c.ops}}}, Seed: 1, Plans: b.N}.Run()
			if err != nil || out.Found != nil {
				b.Fatalf("%v %v", err, out.Found)
			}
			b.ReportMetric(float64(out.Plans)/out.Elapsed.Seconds(), "plans/s")
			b.ReportMetric(float64(out.Ops)/float64(out.Plans), "ops/plan")
			b.ReportMetric(float64(out.Ops)/out.Elapsed.Seconds(), "ops/s")
		})
	}
}
