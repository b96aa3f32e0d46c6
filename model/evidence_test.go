package model

import (
	"strings"
	"testing"
)

// With a run's evidence, Check judges what a history alone cannot show;
// without it, those properties are not judged.
func TestEvidenceIsJudgedInOnePlace(t *testing.T) {
	h := hist(t, created2+`
		c1 invoke acquire sem
		c1 ok acquire sem slot=1
		c1 invoke verify sem slot=1
		c1 ok verify sem held=true`)
	status := func(r *Report, prop string) Verdict { return verdict(t, r, "sem", prop) }
	bare := Check(h, Options{})
	for _, p := range []string{NoLeak, CheapAcquire, CheapVerify, DriverMinimal} {
		if v := status(bare, p); v.Status != NotJudged {
			t.Errorf("%s without evidence: %v", p, v.Status)
		}
	}
	probe := Cost{Methods: map[string]int{"basic.publish": 3, "queue.declare": 1}}
	good := &Evidence{Lock: "sem", MaxSlots: 2,
		Costs:   map[int]Cost{2: probe, 4: {Methods: map[string]int{"basic.publish": 1}}},
		Methods: map[string]int{"basic.publish": 4, "queue.declare": 1, "channel.open": 1}}
	r := Check(h, Options{Evidence: good})
	for _, p := range []string{NoLeak, CheapAcquire, CheapVerify, DriverMinimal, Available} {
		if v := status(r, p); v.Status != Pass {
			t.Errorf("%s with clean evidence: %v %s", p, v.Status, v.Detail)
		}
	}
	bad := *good
	bad.Leaks = []string{"sem-1-B"}
	bad.Waste = map[int]string{2: "opened a connection though it had one and no fault had cut it off"}
	bad.Costs = map[int]Cost{2: probe, 4: {Methods: map[string]int{"basic.publish": 1, "queue.declare": 1}}}
	bad.Methods = map[string]int{"basic.get": 1}
	bad.Problems = []string{"c1: exited (exit status 3)"}
	r = Check(h, Options{Evidence: &bad})
	for p, want := range map[string]string{
		NoLeak:        "still holds sem-1-B",
		CheapAcquire:  "opened a connection though it had one",
		CheapVerify:   "sent more than one mandatory publish",
		DriverMinimal: "basic.get x1",
		Available:     "processes failed: c1: exited",
	} {
		if v := status(r, p); v.Status != Fail || !strings.Contains(v.Detail, want) {
			t.Errorf("%s: %v %q, want a failure with %q", p, v.Status, v.Detail, want)
		}
	}
	// Problems on a lock the history never reached still fail available.
	r = Check(nil, Options{Evidence: &Evidence{Lock: "other", Problems: []string{"c1: garbage"}}})
	if v := verdict(t, r, "other", Available); v.Status != Fail {
		t.Errorf("problems on a lock with no history: %v", v.Status)
	}
}
