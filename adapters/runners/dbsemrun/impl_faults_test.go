package dbsemrun

import (
	"context"
	"github.com/lockprover/lockprover/internal/prover"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// anImpl stands for an implementation in processes of its own.
type anImpl struct{}

func (anImpl) Connect(context.Context, string, Session) (ProcessClient, error) { return nil, nil }
func (anImpl) String() string                                                  { return "an implementation" }
func (anImpl) Stop()                                                           {}

// Plans for an implementation in processes draw no clock fault of a
// client's clock, which nothing can move in another process (the history
// would record a fault that never struck); the database's clock faults
// they keep. The reference's plans draw both.
func TestImplPlansDrawNoClientClockFault(t *testing.T) {
	count := func(c Config) (client, server int) {
		rapid.Check(t, func(rt *rapid.T) {
			for _, f := range draw(rt, c.withDefaults()).Nemesis {
				switch {
				case !histories.IsClockFault(f.Fault):
				case f.Target != "":
					client++
				default:
					server++
				}
			}
		})
		return client, server
	}
	clocks := []string{histories.ClockSkew, histories.ClockJump}
	if client, server := count(Config{Scope: prover.Scope{Faults: clocks}, Impl: anImpl{}, Target: MariaDB{}}); client != 0 || server == 0 {
		t.Errorf("an implementation's plans: %d client clock faults (want 0), %d of the database's", client, server)
	}
	if client, _ := count(Config{Scope: prover.Scope{Faults: clocks}}); client == 0 {
		t.Errorf("the reference's plans draw no client clock fault: the test shows nothing")
	}
}
