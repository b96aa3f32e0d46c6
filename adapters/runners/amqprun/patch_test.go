package amqprun

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

// Operations cut short by a fault are settled from the simulator's ground
// truth, and what the patch says is what the broker did: a patched acquire
// ok declared its holder queue, a patched release ok deleted it, a patched
// fail touched neither. Every history still passes every property, and the
// faults strike at every point of an acquire and a release.
func TestPatchFromGroundTruth(t *testing.T) {
	for _, kind := range []string{"semaphore", "mutex"} {
		seen := map[string]int{} // patched outcomes, over every fault and position
		for _, fault := range []string{"drop-reply", "kill", "force-close", "partition"} {
			t.Run(kind+"/"+fault, func(t *testing.T) {
				for n := 1; n <= 20; n++ {
					p := &Plan{Version: PlanVersion, Kind: kind, Lock: "lp",
						Clients: [][]Step{{{Op: "acquire"}, {Op: "release"}}},
						Nemesis: []Fault{{Fault: fault, Target: "c1", AfterCalls: n, For: 60000}}}
					holder := `lp`
					if kind == "semaphore" {
						p.Slots, p.Admins, holder = 2, [][]Step{{}}, `lp-\d+-B`
					}
					var trace bytes.Buffer
					res, err := Simulator{Trace: &trace}.Run(context.Background(), p, ImplFor(p))
					if err != nil {
						t.Fatal(err)
					}
					if r := prover.Judge(res, model.Options{}); r.Status() != verdict.Pass {
						t.Fatalf("after %d methods: %+v", n, r.Verdicts)
					}
					for _, e := range res.History {
						if e.Process != "c1" || e.Type == histories.Invoke {
							continue
						}
						// A partition holds requests that land when it heals.
						if e.Type == histories.Info && (e.F == "acquire" || e.F == "release") && fault != "partition" {
							t.Errorf("after %d methods: %s left unknown; the simulator knows its outcome", n, e.F)
						}
						if e.Value == nil || !amqpcheck.ValueOf(&e).Patched {
							continue
						}
						q := holder
						if amqpcheck.ValueOf(&e).Slot != nil {
							q = fmt.Sprintf("lp-%d-B", *amqpcheck.ValueOf(&e).Slot)
						}
						method := map[string]string{"acquire": "queue.declare", "release": "queue.delete"}[e.F]
						did := regexp.MustCompile(`c1 c1#\d+ ch\d+ ` + method + ` ` + q + ` -> ok`).Match(trace.Bytes())
						if did != (e.Type == histories.Ok) {
							t.Errorf("after %d methods: %s patched %s, but the broker's %s of %s applied: %v\n%s", n, e.F, e.Type, method, q, did, trace.Bytes())
						}
						seen[e.F+" "+string(e.Type)]++
					}
				}
			})
		}
		for _, want := range []string{"acquire ok", "acquire fail", "release ok"} {
			if seen[want] == 0 {
				t.Errorf("%s: no patched %s among the faults' positions: %v", kind, want, seen)
			}
		}
	}
}

// An operation whose request a partition still holds is not patched: the
// request may land when the partition heals.
func TestPatchLeavesWhatMayStillLand(t *testing.T) {
	p := &Plan{Version: PlanVersion, Kind: "semaphore", Lock: "lp", Slots: 2, Admins: [][]Step{{}},
		Clients: [][]Step{{{Op: "acquire"}, {Op: "release"}}, {{Op: "sleep", Ms: 40000}}},
		Nemesis: []Fault{{Fault: "partition", Target: "c1", AfterCalls: 8, For: 60000}}}
	res, err := Simulator{}.Run(context.Background(), p, ImplFor(p))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.History {
		if e.Process == "c1" && e.Type != histories.Invoke {
			got = append(got, e.F+" "+string(e.Type))
		}
	}
	if len(got) != 1 || got[0] != "acquire info" {
		t.Fatalf("c1's completions: %v, want [acquire info] (its verify-after-acquire was held by the partition when it gave up)", got)
	}
}
