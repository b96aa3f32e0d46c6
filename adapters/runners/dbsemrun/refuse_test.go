package dbsemrun

import (
	"context"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// A plan holding a fault its target does not strike is refused by name
// before the run (run.Refuse), on the simulator and on a real target
// alike: no server is reached, nothing is struck.
func TestRefusesAFaultItsTargetDoesNotStrike(t *testing.T) {
	p := &Plan{}
	p.Nemesis = []Fault{{Fault: histories.Kill, Target: "c1"}, {Fault: "admin-crash"}}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "plan: nemesis[1].fault: target sim does not strike admin-crash (it strikes: kill, pause, partition, force-close, drop-reply, restart-broker, clock-skew, clock-jump)"},
		{Config{Target: MariaDB{}}, "plan: nemesis[1].fault: target mariadb does not strike admin-crash (it strikes: kill, pause, partition, force-close, drop-reply, restart-broker, clock-skew, clock-jump)"},
	} {
		_, err := tc.c.Run(context.Background(), p)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Run: got %v\nwant %s", err, tc.want)
		}
	}
}
