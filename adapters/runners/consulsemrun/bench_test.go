package consulsemrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/prover/bench"
)

// bench --kind consul-semaphore measures each operation beside its floor
// on each real server, counting what both send: the reference's acquire
// and refresh send what the recipe needs and no more; its release reads
// the prefix first, which the floor does not need, and the table names
// that read.
func TestBench(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		backend                string
		acquire, refresh, more string
	}{
		{Consul, "| 4 (1 GET /v1/kv?recurse, 1 PUT /v1/kv?acquire, 1 PUT /v1/session/create, 1 PUT /v1/txn) | F1: ",
			"| 1 (1 PUT /v1/session/renew) | F2: ", "| +1 GET /v1/kv?recurse |"},
		{Etcd, "| 4 (2 Txn, 1 LeaseGrant, 1 Range) | F1: ", "| 1 (1 LeaseKeepAlive) | F2: ", "| +1 Range |"},
	} {
		t.Run(c.backend, func(t *testing.T) {
			t.Parallel()
			onReal(t, c.backend)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var out strings.Builder
			if err := Bench(ctx, []string{c.backend}, bench.Config{N: 10, Warmup: 2, Seed: 1}, &out); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			rows := map[string]string{}
			for _, line := range strings.Split(text, "\n") {
				for _, op := range []string{"| acquire, slot free |", "| refresh, lease held |", "| release, lease held |"} {
					if strings.HasPrefix(line, op) {
						rows[op] = line
					}
				}
			}
			for op, want := range map[string][]string{
				"| acquire, slot free |":  {c.acquire, "| none |"},
				"| refresh, lease held |": {c.refresh, "| none |"},
				"| release, lease held |": {"| F3: ", c.more},
			} {
				for _, w := range want {
					if !strings.Contains(rows[op], w) {
						t.Errorf("row %s: no %q in %q", op, w, rows[op])
					}
				}
			}
			for _, w := range []string{"| operation | p50 | p99 | mean | sent/op | floor (p50) | ratio | beyond the floor |", "| F1 | ", "| F2 | ", "| F3 | "} {
				if !strings.Contains(text, w) {
					t.Errorf("no %q in\n%s", w, text)
				}
			}
			if t.Failed() {
				t.Logf("the bench's output:\n%s", text)
			}
		})
	}
}
