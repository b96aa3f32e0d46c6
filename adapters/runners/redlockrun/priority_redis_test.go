package redlockrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
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
	out, err := prover.Search{Config: prover.Config{Subject: Config{Target: target, Priority: true}, Properties: prioritySafety},
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
var stealPlan = &Plan{Version: PlanVersion, Kind: PriorityKind, Key: "lp", Servers: 3, Persistence: PersistNone, TTLMs: 3000,
	Clients: [][]Step{
		{{Op: histories.Acquire}, {Op: Sleep, Ms: 3000}, {Op: histories.Refresh}, {Op: Sleep, Ms: 900}, {Op: histories.Acquire}},
		{{Op: Sleep, Ms: 1200}, {Op: histories.Acquire}, {Op: Sleep, Ms: 2100}, {Op: histories.Release}},
	},
	Priorities: []int64{1, 2},
	// Windows of a second and more: a first acquire, which dials its
	// servers, took 109 ms under the race detector, and beside a loaded
	// suite on a slow machine none of four runs of the plan at a third
	// of this scale (ttl 1 s, rounds of 500 ms) granted both clients.
	Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{
		{At: 900, Fault: histories.Partition, Target: "c1", Server: 2, For: 1500},
		{At: 1050, Fault: histories.DropReply, Target: "c2", Server: 1},
		{At: 2700, Fault: histories.Kill, Target: "c2"},
	}}}

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
			// validity-sound holds on every run, off its script too: a
			// grant is recorded at its return, before the events recorded
			// since (docs/redlock.md, "The priority Redlock on real
			// Redis"). An off-script run's grant, recorded once after the
			// lock's claim had run out, used to overstate its claim.
			if v.Status == verdict.Fail || mustJudge && v.Status != verdict.Pass {
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
			return e.Process == "nemesis" && e.F == f && e.Type == histories.Invoke && histories.FaultOf(&e).Process == target
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
	need(lost > inv2 && lost < g2 && lease.ValueOf(&h[lost]).Thief == lease.ValueOf(&h[g2]).Token, "c1's lost notice (#%d) does not name c2's grant (#%d) within its acquire", lost, g2)
	part, heal := nemesis(histories.Partition, "c1"), nemesis(histories.Heal, "c1")
	need(part >= 0 && part < inv2 && heal > g2, "the partition of c1 was not in force throughout c2's acquire")
	drop := nemesis(histories.DropReply, "c2")
	need(drop > inv2 && drop < g2, "the lost reply (#%d) did not strike c2's acquire", drop)
	need(nemesis(histories.Kill, "c2") > g2, "the kill of c2 was not recorded after its grant")
	refresh := at(func(e histories.Event) bool {
		return e.Process == "c1" && e.F == histories.Refresh && e.Type != histories.Invoke
	})
	need(refresh > lost && h[refresh].Type == histories.Fail && lease.ValueOf(&h[refresh]).Reason == histories.Expired, "c1's refresh did not fail expired after its lost notice")
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
	for _, name := range []string{"equal-steals", "no-ack-wait", "proceed-on-ack-timeout", "steal-resets-ttl", "ack-before-lost", "direct-victim-only"} {
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

// deadVictim is the script of steal-resets-ttl's plan (one server, the
// runner's timeout 500 ms): c1 (priority 1, ttl 5 s) is granted and
// killed; c2 (priority 2, ttl 500 ms) steals its key and waits in vain
// for its acknowledgement, c1's time; c3 (priority 1, no thief) asks for
// the lock after c2's key, had the steal set its life to c2's ttl, has
// expired, while c1's lease is certainly valid. The reference's key lives
// to c1's deadline and refuses c3; the mutant's has expired, and c3 holds
// while c1 does.
func deadVictim(s *schedule) {
	a1 := s.op("c1 acquire", 0, "ok")
	k := s.op("nemesis kill", 0, "info")
	s.need(k.call > a1.ret, "c1 was killed before its grant returned")
	// c2's steal: its obtain answered within the timeout (or it fails at
	// once, its key given back), and it waited for c1 for seconds.
	a2 := s.op("c2 acquire", 0, "")
	s.need(a2.call > k.ret, "c2's acquire began before c1's kill")
	s.need(a2.ret-a2.call > 2*s.timeout(), "c2's acquire ended after %v, not waiting for its victim: no steal", time.Duration(a2.ret-a2.call))
	// Nor if its obtain got no answer (a write to the server timed out
	// beside the suite): it took nothing.
	s.need(!strings.Contains(a2.err, "obtained on 0 of"), "c2's obtain took nothing (%s): no steal", a2.err)
	a3 := s.op("c3 acquire", 0, "") // the mutant's is granted, the reference's refused
	// Neither, if it timed out (CI once, beside the suite: a write to the
	// server timed out): such a run shows nothing.
	s.need(a3.outcome != "info", "c3's acquire ended info: neither granted nor refused")
	life := s.timeout() + int64(a2.ttlMs)*int64(time.Millisecond) + onScriptMargin
	s.need(a3.call > a2.call+life, "c3's acquire began %v after c2's, when a key of c2's ttl may still have lived", time.Duration(a3.call-a2.call))
	s.need(a3.ret < a1.call+s.certainOf(a1), "c3's acquire returned when c1's lease may have ended")
}

// slowAck is the script of ack-before-lost's plan (three servers, the
// runner's timeout 1 s): c1 (priority 1) holds all three and is cut from
// server 3; c2 (priority 2) steals on all three, and its note reaches
// c1's watchers on servers 1 and 2. c1's acknowledgement, pushed on every
// server, is taken at once from servers 1 and 2 but held from server 3
// until the push's timeout; the mutant marks c1 lost only then, after
// c2's grant, the reference before it acknowledges.
func slowAck(s *schedule) {
	a1 := s.op("c1 acquire", 0, "ok")
	p, h := s.op("nemesis partition", 0, "info"), s.op("nemesis heal", 0, "info")
	s.need(a1.ret < p.call, "c1's grant returned after the partition began")
	a2 := s.op("c2 acquire", 0, "ok")
	s.need(p.ret < a2.call, "the partition of c1 began after c2's acquire")
	// c1's acknowledgement is pushed after c2's invoke, and held from
	// server 3 until a timeout later (or the heal).
	s.need(a2.ret < a2.call+s.timeout()-onScriptMargin, "c2's acquire took %v, the acknowledgement's timeout less the margin or more", time.Duration(a2.ret-a2.call))
	s.need(h.call > a2.call+s.timeout()+onScriptMargin, "the heal came before c1's push to server 3 timed out")
	s.need(a2.ret < a1.call+s.certainOf(a1), "c2's grant returned when c1's lease may have ended")
}

// failedStealRobbed is the script of direct-victim-only's plan (one
// server, the runner's timeout 2 s): c2 and c3 each take and release the
// lock first (their connections then made), then c1 (priority 1, ttl 8 s)
// holds it. The server is paused; c2 (priority 2) sends its obtain, and
// c3 (priority 3) its own, before c2's times out; c2 then fails, its
// undo queued behind c3's obtain; the server resumes before c3's times
// out. The server runs c2's steal of c1's key, then c3's steal from c2
// (c2's lost notice names c3's grant: the chain c1, c2), then c2's undo;
// c2, failed, acknowledges c3 at once. The reference's c3 tells and waits
// for c1 too; the mutant's tells c2 alone, and is granted while c1, never
// told, holds.
func failedStealRobbed(s *schedule) {
	a1 := s.op("c1 acquire", 0, "ok")
	p, r := s.op("nemesis pause", 0, "info"), s.op("nemesis resume", 0, "info")
	s.need(a1.ret < p.call, "c1's grant returned after the pause began")
	a2 := s.op("c2 acquire", 1, "info")
	a3 := s.op("c3 acquire", 1, "ok")
	s.need(p.ret < a2.call, "c2's acquire began before the pause")
	s.need(a3.call > a2.call+onScriptMargin, "c3's obtain may have reached the server before c2's")
	s.need(a3.call < a2.call+s.timeout()-onScriptMargin, "c3's obtain may have reached the server after c2's undo")
	s.need(r.call > a2.call+s.timeout()+onScriptMargin, "the server resumed before c2's obtain timed out")
	s.need(r.call < a3.call+s.timeout()-onScriptMargin, "the server resumed when c3's obtain may have timed out")
	s.lostTo("c2", a3, "c3's acquire: c3 did not take the key from c2's failed steal")
	s.need(a3.ret < a1.call+s.certainOf(a1), "c3's grant returned when c1's lease may have ended")
}
