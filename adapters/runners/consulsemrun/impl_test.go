package consulsemrun

import (
	"context"
	"errors"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/rapidbatch"
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
			// 200 plans of a fixed seed, the same every run: rapid's own
			// checks (20, from the clock) drew no drop-reply for the
			// reference in one run of make check.
			for i := range 200 {
				p, ok := rapidbatch.Case(20261128, 0, i, func(rt *rapid.T) *Plan { return draw(rt, c) })
				if !ok {
					continue
				}
				for _, f := range p.Nemesis {
					if f.Fault == histories.DropReply {
						drops[impl]++
					}
				}
			}
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
