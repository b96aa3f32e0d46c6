package redlockrun

import (
	"context"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/internal/prover/bench"
)

// bench --kind redlock measures each operation beside its floor and
// counts what each sent: one script per server for each, and a second
// round for a grant on several servers (the fence written back). bench
// --kind priority-redlock the same of the priority reference, and a steal.
func TestBench(t *testing.T) {
	t.Parallel()
	onRedis(t)
	for _, c := range []struct {
		servers  int
		priority bool
		rows     []string
	}{
		{1, false, []string{"| acquire, key free |", "| 1 (1 EVALSHA) |", "| acquire, key held |", "| refresh, lease held |", "| release, lease held |"}},
		{3, false, []string{"| 6 (6 EVALSHA) | F1: ", "| 3 (3 EVALSHA) | F2: ", "| 3 (3 EVALSHA) | F3: ", "| 3 (3 EVALSHA) | F4: "}},
		{1, true, []string{"bench --kind priority-redlock", "| acquire, key free |", "| 1 (1 EVALSHA) | F1: ", "| 1 (1 EVALSHA) | F2: ", "| 1 (1 EVALSHA) | F3: ", "| acquire, steal (priority 2 from 1) |", "| F1 | the obtain script"}},
	} {
		var out strings.Builder
		if err := Bench(context.Background(), c.servers, redis.Options{}, c.priority, bench.Config{N: 20, Warmup: 2, Seed: 1}, &out); err != nil {
			t.Fatal(err)
		}
		for _, row := range c.rows {
			if !strings.Contains(out.String(), row) {
				t.Errorf("%d servers (priority %v): no %q in\n%s", c.servers, c.priority, row, out.String())
			}
		}
		t.Logf("%s", out.String())
	}
}
