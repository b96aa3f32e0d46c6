package conform

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// Every case of the table that can run on a shared broker gives, on
// RabbitMQ, what the table says, and agrees with the simulator.
func TestTableOnRabbitMQ(t *testing.T) {
	t.Parallel()
	tg := openServer(t, Options{})
	if !tg.FastCtl() {
		t.Skip("the rabbitmqctl eval session does not start: the timed cases need fast queries")
	}
	start := time.Now()
	ran := 0
	for _, c := range semantics.Cases {
		t.Run(strings.ReplaceAll(c.ID+" "+c.Title, " ", "_"), func(t *testing.T) {
			// Four more attempts for a timed case: beside the rest of the
			// suite, RabbitMQ's timing strays more often than alone.
			r := tg.RunCase(context.Background(), c, 4)
			if r.Skipped != "" {
				t.Skip(r.Skipped)
			}
			ran++
			t.Logf("%s in %v (%d attempts)\n%s", r.Status(), r.Elapsed.Round(time.Millisecond), r.Attempts, r.Details())
			for _, m := range r.Real.Mismatches {
				t.Errorf("rabbitmq: %s", m)
			}
			if !r.Agree() || r.CleanupErr != nil {
				t.Errorf("%s:\n%s", r.Status(), r.Details())
			}
		})
	}
	t.Logf("%d cases in %v", ran, time.Since(start).Round(time.Millisecond))
}

func TestDivergenceRule(t *testing.T) {
	for _, c := range []struct {
		want, real, sim string
		div             bool
	}{
		{"ok", "ok", "ok", false},
		{"ok", "405 channel", "ok", true},
		{"ok", "ok", "405 channel", true},
		{"405 channel|ok", "ok", "405 channel", false},
		{"405 channel|ok", "ok", "404 channel", true},
		{"ok", "404 channel", "404 channel", false}, // both contradict the table: the table is wrong
		{"gone", "gone after 120ms (want 0s..100ms)", "gone", true},
	} {
		if got := Divergent(c.want, c.real, c.sim); got != c.div {
			t.Errorf("Divergent(%q, %q, %q) = %v, want %v", c.want, c.real, c.sim, got, c.div)
		}
	}
}
