package amqprun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"pgregory.net/rapid"
)

// khepriRun runs the hand plan examples/cluster/NAME.json on the
// simulated cluster under khepri (mode, or the plan's own if ""), and
// returns its history and verdicts by property.
func khepriRun(t *testing.T, name, mode string) ([]histories.Event, map[string]verdict.Verdict) {
	t.Helper()
	return simRun(t, name, Simulator{PartitionHandling: mode})
}

// simRun is khepriRun on s.
func simRun(t *testing.T, name string, s Simulator) ([]histories.Event, map[string]verdict.Verdict) {
	t.Helper()
	p, err := ReadPlan("../../../examples/cluster/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), p, Reference)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v := map[string]verdict.Verdict{}
	for _, x := range prover.Judge(res, model.Options{Timeout: time.Minute, Family: []any{amqpcheck.Options{}}}).Verdicts {
		v[x.Property] = x
	}
	return res.History, v
}

// closed541 counts the force-closes of process's connection the history
// records as the broker's own 541 (Khepri's timeout, K.4).
func closed541(h []histories.Event, process string) int {
	n := 0
	for _, e := range h {
		if e.Process == "nemesis" && e.F == histories.ForceClose && e.Type == histories.Info {
			if f := histories.FaultOf(&e); f != nil && f.Process == process && strings.Contains(e.Error, "not struck by lockprover") && strings.Contains(e.Error, "541 INTERNAL_ERROR") {
				n++
			}
		}
	}
	return n
}

// examples/cluster/isolated-holder.json (found under ignore) on the
// simulated cluster's khepri mode, as on the real 4.3.6 cluster
// (rabbitmq-cluster.md, adapters/runners/amqprun/khepri): the majority keeps the
// cut-off n1's exclusive queue (K.1, K.2), so c2's acquire through n2 is
// refused (full) and no property of the lock's safety fails; c1's
// release through n1, cut off, ends 30 s later in the broker's 541
// (K.4), recorded as its force-close, which excuses the unknown outcome.
// That release is lost (K.8): c1's B queue outlives its connection, the
// probe finds the semaphore full, and no-leak fails naming the queue, as
// TestIsolatedHolderOnKhepri requires of the real cluster.
func TestSimulatedKhepriIsolatedHolder(t *testing.T) {
	h, v := khepriRun(t, "isolated-holder", "khepri")
	for _, prop := range []string{amqpcheck.SlotExclusive, amqpcheck.AcquireExact, amqpcheck.CountExact, amqpcheck.Persistent, amqpcheck.Available} {
		if v[prop].Status != verdict.Pass {
			t.Errorf("%s: %s %s", prop, v[prop].Status, v[prop].Detail)
		}
	}
	if x := v[amqpcheck.Available]; len(x.Excuses) == 0 {
		t.Errorf("available passed with no excuse for c1's unknown release: %+v", x)
	}
	if nl := v[amqpcheck.NoLeak]; nl.Status != verdict.Fail || !strings.Contains(nl.Detail, `lp-cluster-1-B (owner "c1")`) {
		t.Errorf("no-leak %s %s, want a failure naming c1's B queue (K.8)", nl.Status, nl.Detail)
	}
	full, released := false, time.Duration(0)
	for _, e := range h {
		switch {
		case e.Process == "c2" && e.F == histories.Acquire && e.Type == histories.Fail:
			full = true
		case e.Process == "c2" && e.F == histories.Acquire && e.Type == histories.Ok:
			t.Errorf("c2 took a slot through n2 while c1 held it through the cut-off n1: %+v", e)
		case e.Process == "c1" && e.F == histories.Release && e.Type != histories.Invoke:
			released = time.Duration(e.Time)
		}
	}
	if !full {
		t.Error("c2's acquire through n2 was not refused")
	}
	if n := closed541(h, "c1"); n != 1 || released < 45*time.Second {
		t.Errorf("c1's release through n1 ended at %v with %d 541 closes of its connection, want one, 30 s after it was sent at 15 s", released, n)
	}
}

// examples/cluster/orphaned-release.json, a plan recorded for a Khepri
// cluster, runs in its own mode on the simulator and fails no-leak as on
// the real 4.3.6 cluster (K.8): c1's release through the cut-off n1 is
// not retried at the heal, and every acquire after it (through n2 at 50,
// 90, 150 and 240 s) finds the slot taken, held by no live connection.
func TestSimulatedKhepriOrphanedRelease(t *testing.T) {
	h, v := khepriRun(t, "orphaned-release", "")
	if nl := v[amqpcheck.NoLeak]; nl.Status != verdict.Fail || !strings.Contains(nl.Detail, `lp-orphan-1-B (owner "c1")`) {
		t.Errorf("no-leak %s %s, want a failure naming c1's B queue", nl.Status, nl.Detail)
	}
	if se := v[amqpcheck.SlotExclusive]; se.Status != verdict.Pass {
		t.Errorf("slot-exclusive %s %s", se.Status, se.Detail)
	}
	refused := map[string]bool{}
	for _, e := range h {
		switch {
		case e.F != histories.Acquire || e.Type == histories.Invoke || e.Process == "c1":
		case e.Type == histories.Fail && strings.Contains(fmt.Sprint(e.Value), "full"):
			refused[e.Process] = true
		default:
			t.Errorf("an acquire after c1's lost release did not find the slot taken: %+v", e)
		}
	}
	for _, p := range []string{"c2", "c3", "c4", "c5", "c6", "probe"} {
		if !refused[p] {
			t.Errorf("%s's acquire did not find the semaphore full", p)
		}
	}
	if closed541(h, "c1") != 1 {
		t.Error("no 541 close of c1's connection recorded")
	}
}

// The simulated cluster's khepri mode is deterministic: the same plan
// and seed give the same history, byte for byte, for drawn plans with
// every cluster fault and for the hand plans; and the drawn plans reach
// Khepri's timeout (a 541 close) in some plan.
func TestSimulatedKhepriSameBytes(t *testing.T) {
	c := Config{Scope: prover.Scope{Faults: append(slices.DeleteFunc(FaultNames(), func(f string) bool { return f == histories.RestartBroker }), ClusterFaultNames...)},
		Target: Simulator{Cluster: []string{"n1", "n2", "n3"}, PartitionHandling: "khepri"}}
	plans := rapid.Custom(func(t *rapid.T) *Plan { return Draw(t, c) })
	run := func(p *Plan) (string, int) {
		res, err := c.Target.Run(context.Background(), p, Reference)
		if err != nil {
			t.Fatalf("%v\n%+v", err, p)
		}
		var b strings.Builder
		histories.Write(&b, res.History)
		n := 0
		for _, e := range res.History {
			if e.F == histories.ForceClose && e.Type == histories.Info && strings.Contains(e.Error, "541 INTERNAL_ERROR") {
				n++
			}
		}
		return b.String(), n
	}
	timeouts := 0
	for seed := range 40 {
		p := plans.Example(seed)
		if p.PartitionHandling != "khepri" {
			t.Fatalf("plan %d drawn for %q", seed, p.PartitionHandling)
		}
		a, n := run(p)
		if b, _ := run(p); a != b {
			t.Fatalf("plan %d: two runs differ:\n%s\n---\n%s", seed, a, b)
		}
		timeouts += n
	}
	if timeouts == 0 {
		t.Error("no drawn plan reached Khepri's timeout")
	}
	for _, file := range []string{"isolated-holder", "orphaned-release", "bridge", "verify-home-down"} {
		p, err := ReadPlan("../../../examples/cluster/" + file + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if a, _ := run(p); a != func() string { b, _ := run(p); return b }() {
			t.Fatalf("%s: two runs differ", file)
		}
	}
}

// examples/cluster/paused-holder.json on the simulated cluster's khepri
// mode (4.3.6): while c1's node n1 is paused the majority keeps c1's
// exclusive queue (K.6), so c2's acquire through n2 at 9 s is refused;
// once n1 continues c1's queue goes (its connection ended by its own
// heartbeat meanwhile) and c3 takes the slot through n3. No property of
// the lock's safety fails. (On a 4.0.5 cluster with khepri_db c2 takes
// the slot during the pause and loses it untold when n1 continues, and
// c3 takes it while c2 holds: slot-exclusive fails, rabbitmq-cluster.md.)
func TestSimulatedKhepriPausedHolder(t *testing.T) {
	h, v := khepriRun(t, "paused-holder", "")
	for _, prop := range []string{amqpcheck.SlotExclusive, amqpcheck.CountExact, amqpcheck.Persistent, amqpcheck.Available, amqpcheck.NoLeak} {
		if v[prop].Status != verdict.Pass {
			t.Errorf("%s: %s %s", prop, v[prop].Status, v[prop].Detail)
		}
	}
	got := map[string]histories.Type{}
	for _, e := range h {
		if e.F == histories.Acquire && e.Type != histories.Invoke {
			got[e.Process] = e.Type
		}
	}
	if got["c2"] != histories.Fail || got["c3"] != histories.Ok {
		t.Errorf("acquires: c2 %v, c3 %v; want c2 refused while n1 is paused, c3 ok after", got["c2"], got["c3"])
	}
}

// The two hand plans that break the design under ignore and autoheal
// break it on the simulated 4.0.5 cluster with khepri_db as on the real
// one (rabbitmq-cluster.md): in late-contender the majority frees the
// cut-off c1's queue and c2 takes slot 1 through n2 while c1 holds it; in
// paused-holder c2 takes it while n1 is paused, and once n1 continues the
// process of c1's queue deletes c2's by name, so c3 takes it while c2
// holds. slot-exclusive fails in both, where 4.3.6's mode holds it.
func TestSimulatedKhepri405HandPlans(t *testing.T) {
	for _, name := range []string{"late-contender", "paused-holder"} {
		h, v := simRun(t, name, Simulator{PartitionHandling: "khepri", Version: "4.0.5"})
		if v[amqpcheck.SlotExclusive].Status != verdict.Fail {
			t.Errorf("%s on 4.0.5: slot-exclusive %s, want FAIL", name, v[amqpcheck.SlotExclusive].Status)
		}
		if _, v436 := khepriRun(t, name, "khepri"); v436[amqpcheck.SlotExclusive].Status != verdict.Pass {
			t.Errorf("%s on 4.3.6: slot-exclusive %s, want pass", name, v436[amqpcheck.SlotExclusive].Status)
		}
		ok := map[string]bool{}
		for _, e := range h {
			if e.F == histories.Acquire && e.Type == histories.Ok {
				ok[e.Process] = true
			}
		}
		if want := map[string][]string{"late-contender": {"c1", "c2"}, "paused-holder": {"c1", "c2", "c3"}}[name]; !allOf(ok, want) {
			t.Errorf("%s on 4.0.5: acquires ok %v, want %v each", name, ok, want)
		}
	}
}

func allOf(set map[string]bool, names []string) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}
