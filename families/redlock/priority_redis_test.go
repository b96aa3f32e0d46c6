package redlock

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
)

// prioritySafety are the properties the priority lock's tests on real
// Redis count: the safety ones (see safety), and the steal properties.
var prioritySafety = append(append([]string(nil), safety...), lease.StealOrder, lease.StealExact)

// The priority reference holds on real redis-servers, each plan's own, on
// drawn plans with every fault offered there.
func TestPriorityOnRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	target := onRedis(t)
	out, err := prover.Search{Config: prover.Config{Family: Config{Target: target, Priority: true}, Properties: prioritySafety},
		Seed: 1, Plans: 6, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	t.Logf("the priority reference: %d plans, %v", out.Plans, out.Verdicts)
}

// stealPlan: c2 (priority 2) steals c1's lease on three servers, its
// obtain's reply from server 1 lost (it wins on the other two), while c1
// is cut from server 2 (its watcher on server 3 hears the note); c2 is
// killed while it holds; c1's refresh finds its lease stolen, and its
// next acquire is refused by c2's key, which outlives c2.
var stealPlan = &Plan{Version: PlanVersion, Kind: PriorityKind, Key: "lp", Servers: 3, Persistence: PersistNone, TTLMs: 1000,
	Clients: [][]Step{
		{{Op: histories.Acquire}, {Op: Sleep, Ms: 1000}, {Op: histories.Refresh}, {Op: Sleep, Ms: 300}, {Op: histories.Acquire}},
		{{Op: Sleep, Ms: 400}, {Op: histories.Acquire}, {Op: Sleep, Ms: 700}, {Op: histories.Release}},
	},
	Priorities: []int64{1, 2},
	// Windows of hundreds of ms: a first acquire, which dials its
	// servers, took 109 ms under the race detector.
	Nemesis: []Fault{
		{At: 300, Fault: histories.Partition, Target: "c1", Server: 2, For: 500},
		{At: 350, Fault: histories.DropReply, Target: "c2", Server: 1},
		{At: 900, Fault: histories.Kill, Target: "c2"},
	}}

// A steal on real redis-servers, under a partition of the victim, a lost
// reply of the thief's and a kill of the thief, holds every safety
// property, and its history shows the steal: c1's lost notice names c2's
// grant as its thief and comes within c2's acquire. A run the machine's
// delays moved off the plan's script (stealScript) runs again, up to
// attemptsOnRedis runs; the properties are judged on every run.
func TestPriorityStealOnRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	target := onRedis(t)
	for run := 1; ; run++ {
		res, err := target.Run(context.Background(), stealPlan)
		if err != nil {
			t.Fatal(err)
		}
		off := stealScript(res.History)
		for _, p := range prioritySafety {
			v := verdictOf(res, stealPlan, p)
			// What it rests on (the steal, the grants) is in every run
			// that went as scripted; one that did not may have no steal
			// (CI once: c2 killed before its grant), and steal-order
			// then judges nothing. No run may fail one.
			mustJudge := len(off) == 0 && (p == lease.LeaseExclusive || p == lease.StealOrder || p == lease.ValiditySound)
			// validity-sound is held to the scripted runs only: in a dry
			// run beside the suite, an off-script run's first acquire took
			// 1,027 ms (its servers dialled) and claimed 37 ms past its
			// recorded invoke plus ttl(1-drift): its completion was
			// recorded after the lock's claim had run out, and the runner
			// records 0 left then, overstating the claim
			// (docs/redlock.md, "The priority Redlock on real Redis").
			offScriptValidity := len(off) > 0 && p == lease.ValiditySound
			if v.Status == model.Fail && offScriptValidity {
				t.Logf("run %d (off its script): %s %v: %s", run, p, v.Status, v.Detail)
				continue
			}
			if v.Status == model.Fail || mustJudge && v.Status != model.Pass {
				t.Errorf("run %d: %s %v: %s\n%s", run, p, v.Status, v.Detail, historyText(res))
			}
		}
		if len(off) == 0 {
			t.Logf("run %d went as scripted:\n%s", run, historyText(res))
			break
		}
		if run == attemptsOnRedis {
			t.Fatalf("in %d runs the machine never ran the plan as scripted; the last: %v\n%s", run, off, historyText(res))
		}
		t.Logf("run %d was not as scripted (%v); running it again", run, off)
	}
}

// stealScript says how a run of stealPlan went off its script: c1
// granted; c2 granted within the partition, after the lost reply struck
// it, c1's lost notice naming its grant coming within its acquire; the
// kill of c2 recorded; c1's refresh failing expired (stolen).
func stealScript(h []histories.Event) (off []string) {
	need := func(cond bool, format string, args ...any) {
		if !cond {
			off = append(off, fmt.Sprintf(format, args...))
		}
	}
	at := func(pred func(histories.Event) bool) int {
		return slices.IndexFunc(h, pred)
	}
	grant := func(proc string) int {
		return at(func(e histories.Event) bool {
			return e.Process == proc && e.F == histories.Acquire && e.Type == histories.Ok
		})
	}
	nemesis := func(f, target string) int {
		return at(func(e histories.Event) bool {
			return e.Process == "nemesis" && e.F == f && e.Type == histories.Invoke && e.Value.Process == target
		})
	}
	g1, g2 := grant("c1"), grant("c2")
	need(g1 >= 0, "c1 was not granted")
	need(g2 >= 0, "c2 was not granted")
	if g1 < 0 || g2 < 0 {
		return off
	}
	inv2 := at(func(e histories.Event) bool { return e.Process == "c2" && e.Type == histories.Invoke })
	lost := at(func(e histories.Event) bool { return histories.IsNotice(&e) && e.Process == "c1" })
	need(g1 < inv2, "c2's acquire began before c1's grant")
	need(lost > inv2 && lost < g2 && h[lost].Value.Thief == h[g2].Value.Token, "c1's lost notice (#%d) does not name c2's grant (#%d) within its acquire", lost, g2)
	part, heal := nemesis(histories.Partition, "c1"), nemesis(histories.Heal, "c1")
	need(part >= 0 && part < inv2 && heal > g2, "the partition of c1 was not in force throughout c2's acquire")
	drop := nemesis(histories.DropReply, "c2")
	need(drop > inv2 && drop < g2, "the lost reply (#%d) did not strike c2's acquire", drop)
	need(nemesis(histories.Kill, "c2") > g2, "the kill of c2 was not recorded after its grant")
	refresh := at(func(e histories.Event) bool {
		return e.Process == "c1" && e.F == histories.Refresh && e.Type != histories.Invoke
	})
	need(refresh > lost && h[refresh].Type == histories.Fail && h[refresh].Value.Reason == histories.Expired, "c1's refresh did not fail expired after its lost notice")
	return off
}

// The priority mutants whose defects a plan of real time shows without a
// race of milliseconds are caught on real redis-servers by their
// property, on a plan written for each (testdata/mutants/<name>.json);
// the reference passes it (see TestMutantsCaughtOnRedis).
func TestPriorityMutantsCaughtOnRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	var ms []*Mutant
	for _, name := range []string{"equal-steals", "no-ack-wait", "proceed-on-ack-timeout"} {
		ms = append(ms, MutantNamed(name))
	}
	mutantsOnRedis(t, onRedis(t), ms)
}

// cutVictim is the script of no-ack-wait's and proceed-on-ack-timeout's
// plans: c1, cut from the only server, cannot hear c2's note until the
// heal; a thief that returns before it holds while c1 does.
func cutVictim(s *schedule) {
	a1 := s.op("c1 acquire", 0, "ok")
	a2 := s.op("c2 acquire", 0, "ok")
	p, h := s.op("nemesis partition", 0, "info"), s.op("nemesis heal", 0, "info")
	s.need(p.ret < a2.call && a2.ret < h.call, "the partition of c1 was not in force throughout c2's acquire")
	s.need(a2.ret < a1.call+s.certain(), "c2's grant returned when c1's lease may have ended")
}
