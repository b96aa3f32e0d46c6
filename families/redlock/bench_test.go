package redlock

import (
	"context"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/prover/bench"
)

// bench --kind redlock measures each operation beside its floor and
// counts what each sent: one script per server for each, and a second
// round for a grant on several servers (the fence written back).
func TestBench(t *testing.T) {
	t.Parallel()
	onRedis(t)
	for _, c := range []struct {
		servers int
		rows    []string
	}{
		{1, []string{"| acquire, key free |", "| 1 (1 EVALSHA) |", "| acquire, key held |", "| refresh, lease held |", "| release, lease held |"}},
		{3, []string{"| 6 (6 EVALSHA) | F1: ", "| 3 (3 EVALSHA) | F2: ", "| 3 (3 EVALSHA) | F3: ", "| 3 (3 EVALSHA) | F4: "}},
	} {
		var out strings.Builder
		if err := Bench(context.Background(), c.servers, "", bench.Config{N: 20, Warmup: 2, Seed: 1}, &out); err != nil {
			t.Fatal(err)
		}
		for _, row := range c.rows {
			if !strings.Contains(out.String(), row) {
				t.Errorf("%d servers: no %q in\n%s", c.servers, row, out.String())
			}
		}
	}
}
