package consulsemrun

import (
	"context"
	"errors"
	"github.com/lockprover/lockprover/internal/prover"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// noImpl is an implementation that never starts, for what is decided
// before any process is.
type noImpl struct{}

func (noImpl) Connect(context.Context, string, Session) (ProcessClient, error) {
	return nil, errors.New("no process")
}
func (noImpl) Stop()          {}
func (noImpl) String() string { return "no implementation" }

// Plans drawn for an implementation hold no drop-reply, even when the
// faults name it (its proxy cannot lose a reply on purpose); for the
// reference they may. A plan that holds one, or a mutant, is refused for
// an implementation, naming it.
func TestImplDrawsNoDropReply(t *testing.T) {
	for _, target := range realTargets {
		drops := map[bool]int{}
		for _, impl := range []bool{false, true} {
			c := Config{Scope: prover.Scope{Faults: RealFaults(), MaxFaults: 3}, Target: target}
			if impl {
				c.Impl = noImpl{}
			}
			c = c.withDefaults()
			rapid.Check(t, func(rt *rapid.T) {
				for _, f := range draw(rt, c).Nemesis {
					if f.Fault == histories.DropReply {
						drops[impl]++
					}
				}
			})
		}
		if drops[true] != 0 || drops[false] == 0 {
			t.Errorf("%s: drop-reply drawn %d times for an implementation, %d for the reference; want none and some", target, drops[true], drops[false])
		}
	}
	p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: Consul, Limit: 1, TTLMs: 1000,
		Clients: [][]Step{{{Op: histories.Acquire}}}, Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{{At: 10, Fault: histories.DropReply, Target: "c1"}}}}
	if _, err := RunImpl(context.Background(), p, nil, noImpl{}); err == nil || !strings.Contains(err.Error(), "nemesis[0]: drop-reply is not offered for an implementation") {
		t.Errorf("a plan with a drop-reply for an implementation: %v", err)
	}
	p.Nemesis, p.Mutant = nil, "consul-no-prune"
	if _, err := RunImpl(context.Background(), p, nil, noImpl{}); err == nil || !strings.Contains(err.Error(), "mutant: consul-no-prune is a variant of the reference") {
		t.Errorf("a plan of a mutant for an implementation: %v", err)
	}
}
