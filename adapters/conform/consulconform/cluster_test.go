package consulconform

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// The same sequence and seed give the same run, byte for byte, faults on
// the cluster included (the simulated side of the cluster differential).
func TestClusterSameSeedSameRun(t *testing.T) {
	for _, k := range []consulsim.Kind{consulsim.Consul, consulsim.Etcd} {
		for i := range uint64(30) {
			steps := drawClusterSteps(rand.New(rand.NewPCG(11, i)), k)
			var traces [2]bytes.Buffer
			var answers [2]string
			for j := range 2 {
				r := rand.New(rand.NewPCG(i, 1))
				w, err := consulsim.New(consulsim.Options{Kind: k, Timeout: 2 * time.Second, Persistent: true,
					Cluster: &consulsim.ClusterOptions{}, Decide: func(n int) int { return r.IntN(n) }, Trace: &traces[j]})
				if err != nil {
					t.Fatal(err)
				}
				var out run
				w.Go("driver", func(p *consulsim.Process) {
					side := clusterSide{kind: k, clients: map[string]consulsem.Backend{},
						call:   func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
						strike: w.Strike, whole: func() error { p.Sleep(wholeSettle); return nil }, settle: p.Sleep}
					for c, n := range clusterClients(k) {
						side.clients[c] = p.BackendOn(n)
					}
					var err error
					if out, err = side.run("seq", steps); err != nil {
						t.Error(err)
					}
				})
				if err := w.Run(); err != nil {
					t.Fatal(err)
				}
				answers[j] = strings.Join(out.answers, "\n")
			}
			if traces[0].String() != traces[1].String() || answers[0] != answers[1] {
				t.Fatalf("%v sequence %d: two runs differ", k, i)
			}
		}
	}
}
