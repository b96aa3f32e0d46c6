package amqpcheck

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// With a run's evidence, Check judges what a history alone cannot show;
// without it, those properties are not judged.
func TestEvidenceIsJudgedInOnePlace(t *testing.T) {
	h := hist(t, created2+`
		c1 invoke acquire sem
		c1 ok acquire sem slot=1
		c1 invoke verify sem slot=1
		c1 ok verify sem held=true`)
	status := func(r *verdict.Report, prop string) verdict.Verdict { return verdictOf(t, r, "sem", prop) }
	bare := model.Check(h, model.Options{})
	for _, p := range []string{NoLeak, CheapAcquire, CheapVerify, DriverMinimal} {
		if v := status(bare, p); v.Status != verdict.NotJudged {
			t.Errorf("%s without evidence: %v", p, v.Status)
		}
	}
	probe := broker.Cost{Methods: map[string]int{"basic.publish": 3, "queue.declare": 1}}
	good := &Evidence{MaxSlots: 2,
		Costs:   map[int]broker.Cost{2: probe, 4: {Methods: map[string]int{"basic.publish": 1}}},
		Methods: map[string]int{"basic.publish": 4, "queue.declare": 1, "channel.open": 1}}
	r := model.Check(h, model.Options{Evidence: &model.Evidence{Lock: "sem", Family: good}})
	for _, p := range []string{NoLeak, CheapAcquire, CheapVerify, DriverMinimal, Available} {
		if v := status(r, p); v.Status != verdict.Pass {
			t.Errorf("%s with clean evidence: %v %s", p, v.Status, v.Detail)
		}
	}
	bad := *good
	bad.Leaks = []string{"sem-1-B"}
	bad.Waste = map[int]string{2: "opened a connection though it had one and no fault had cut it off"}
	bad.Costs = map[int]broker.Cost{2: probe, 4: {Methods: map[string]int{"basic.publish": 1, "queue.declare": 1}}}
	bad.Methods = map[string]int{"basic.get": 1}
	r = model.Check(h, model.Options{Evidence: &model.Evidence{Lock: "sem", Problems: []string{"c1: exited (exit status 3)"}, Family: &bad}})
	for p, want := range map[string]string{
		NoLeak:        "still holds sem-1-B",
		CheapAcquire:  "opened a connection though it had one",
		CheapVerify:   "sent, beside its mandatory publish, queue.declare=1, which deciding does not need",
		DriverMinimal: "basic.get x1",
		Available:     "processes failed: c1: exited",
	} {
		if v := status(r, p); v.Status != verdict.Fail || !strings.Contains(v.Detail, want) {
			t.Errorf("%s: %v %q, want a failure with %q", p, v.Status, v.Detail, want)
		}
	}
	// Problems on a lock the history never reached still fail available.
	r = model.Check(nil, model.Options{Evidence: &model.Evidence{Lock: "other", Problems: []string{"c1: garbage"}}})
	if v := verdictOf(t, r, "other", Available); v.Status != verdict.Fail {
		t.Errorf("problems on a lock with no history: %v", v.Status)
	}
}

// A verify is charged for deciding its answer: one mandatory publish. A
// verify that finds its slot gone and deletes its B queue (a tidy client,
// the spec's "lock-relinquished") sends a release beside it, judged as a
// release: one queue.delete. A verify that says held, or that deletes more
// than its B queue, still fails.
func TestCheapVerifyChargesTheDecisionNotTheCleanup(t *testing.T) {
	h := hist(t, created2+`
		c1 invoke acquire sem
		c1 ok acquire sem slot=1
		c1 invoke verify sem slot=1
		c1 ok verify sem held=false`)
	heldH := hist(t, created2+`
		c1 invoke acquire sem
		c1 ok acquire sem slot=1
		c1 invoke verify sem slot=1
		c1 ok verify sem held=true`)
	acquire := broker.Cost{Methods: map[string]int{"basic.publish": 3, "queue.declare": 1}}
	for _, c := range []struct {
		name string
		h    []histories.Event
		cost map[string]int
		want string // "" for a pass
	}{
		{"tidy: not held, its B queue deleted", h, map[string]int{"basic.publish": 1, "queue.delete": 1}, ""},
		{"not held, nothing deleted", h, map[string]int{"basic.publish": 1}, ""},
		{"tidy: not held, its B queue deleted, its channel and connection closed", h, map[string]int{"basic.publish": 1, "queue.delete": 1, "channel.close": 1, "connection.close": 1}, ""},
		{"held, and a delete", heldH, map[string]int{"basic.publish": 1, "queue.delete": 1}, "sent, beside its mandatory publish, queue.delete=1, which deciding does not need"},
		{"held, and its connection closed", heldH, map[string]int{"basic.publish": 1, "connection.close": 1}, "beside its mandatory publish, connection.close=1"},
		{"not held, two deletes", h, map[string]int{"basic.publish": 1, "queue.delete": 2}, "that release sent 2 queue.delete, more than the one of its own B queue"},
		{"not held, a delete and a declare", h, map[string]int{"basic.publish": 1, "queue.delete": 1, "queue.declare": 1}, "beside its mandatory publish, queue.declare=1"},
		{"held, by a declare (a paranoid mutex)", heldH, map[string]int{"queue.declare": 1}, "asked the broker with queue.declare=1, not one mandatory publish"},
		{"held, two publishes", heldH, map[string]int{"basic.publish": 2}, "sent 2 mandatory publishes, more than one"},
	} {
		ev := &Evidence{MaxSlots: 2,
			Costs:   map[int]broker.Cost{2: acquire, 4: {Methods: c.cost}},
			Methods: map[string]int{"basic.publish": 4, "queue.declare": 1}}
		v := verdictOf(t, model.Check(c.h, model.Options{Evidence: &model.Evidence{Lock: "sem", Family: ev}}), "sem", CheapVerify)
		switch {
		case c.want == "" && v.Status != verdict.Pass:
			t.Errorf("%s: %v %s, want a pass", c.name, v.Status, v.Detail)
		case c.want != "" && (v.Status != verdict.Fail || !strings.Contains(v.Detail, c.want)):
			t.Errorf("%s: %v %q, want a failure with %q", c.name, v.Status, v.Detail, c.want)
		}
	}
}
