package amqpcheck

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// A verify that said not held after a fault, left unjudged, is listed as
// what the pass let through.
func TestVerifyLeftUnjudgedIsAnExcuse(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "05-force-close.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	v := find(t, model.Check(h, model.Options{}), "sem", SlotExclusive)
	found := false
	for _, e := range v.Excuses {
		found = found || strings.Contains(e.Why, "c1 verify slot 2 -> ok not held (#6): left unjudged, since force-close c1 (#4)") && slices.Equal(e.Ops, []int{6, 4})
	}
	if v.Status != verdict.Pass || !found {
		t.Errorf("%v %+v", v.Status, v.Excuses)
	}
}

// Judged by status only (a search's plans), a pass that rests on a fault
// keeps its status and loses only the excuse that says so; judged in full
// it lists it.
func TestStatusOnlySkipsOnlyExcuses(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "02-kill-holder.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	full, quick := model.Check(h, model.Options{}), model.Check(h, model.Options{StatusOnly: true})
	if len(full.Verdicts) != len(quick.Verdicts) {
		t.Fatalf("%d verdicts in full, %d by status only", len(full.Verdicts), len(quick.Verdicts))
	}
	rests := func(v verdict.Verdict) bool {
		return slices.ContainsFunc(v.Excuses, func(e verdict.Excuse) bool { return strings.Contains(e.Why, "excused only because kill") })
	}
	for i, v := range full.Verdicts {
		q := quick.Verdicts[i]
		if v.Property != q.Property || v.Status != q.Status {
			t.Errorf("%s %s in full, %s %s by status only", v.Property, v.Status, q.Property, q.Status)
		}
		if rests(q) {
			t.Errorf("%s by status only still re-checked its pass: %+v", q.Property, q.Excuses)
		}
	}
	if !rests(find(t, full, "sem", SlotExclusive)) {
		t.Errorf("in full, slot-exclusive does not say it rests on the kill: %+v", find(t, full, "sem", SlotExclusive).Excuses)
	}
}

// A no-leak pass made while the broker's queues could not be listed (so
// queues an implementation named itself were not looked for) says so, as
// an excuse; a leak found all the same still fails.
func TestNoLeakUnlistedIsAnExcuse(t *testing.T) {
	v := noLeak("lp", &Evidence{Unlisted: "rabbitmqctl: no answer within 1m0s"})
	if v.Status != verdict.Pass || len(v.Excuses) != 1 || !strings.Contains(v.Excuses[0].Why, "could not be listed (rabbitmqctl: no answer within 1m0s)") || v.Detail == "" {
		t.Errorf("unlisted: %v %q %+v", v.Status, v.Detail, v.Excuses)
	}
	v = noLeak("lp", &Evidence{Unlisted: "x", Leaks: []string{"lp-1-A (owner \"\")"}})
	if v.Status != verdict.Fail || len(v.Excuses) != 1 {
		t.Errorf("unlisted with a leak: %v %+v", v.Status, v.Excuses)
	}
}

// When the lock's queues could not be looked at after the run (a passive
// declare unanswered), no-leak is not judged, and says why: neither a pass
// nor a leak can be claimed of queues nobody saw.
func TestNoLeakUnprobedIsNotJudged(t *testing.T) {
	v := noLeak("lp", &Evidence{Unprobed: "passive declare of lp-1-B: context deadline exceeded"})
	if v.Status != verdict.NotJudged || !strings.Contains(v.Detail, "could not be looked at after the run (passive declare of lp-1-B: context deadline exceeded)") {
		t.Errorf("unprobed: %v %q", v.Status, v.Detail)
	}
}
