package lease_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
)

func check(t *testing.T, file string, o model.Options) *model.Report {
	t.Helper()
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", file))
	if err != nil {
		t.Fatal(err)
	}
	return model.Check(h, o)
}

// TestFailuresSayWhy checks that each failing history fails for the reason
// it was written for, naming the operations at fault, and that every other
// property of its lock holds or is not judged.
func TestFailuresSayWhy(t *testing.T) {
	for _, tc := range []struct {
		file, lock, prop string
		ops              []int
		detail           []string
	}{
		{"120-lease-double-holder.jsonl", "k", lease.LeaseExclusive, []int{0, 2}, []string{"2 leases were certainly valid, max 1", "c2's lease b"}},
		{"121-lease-overlap-after-refresh.jsonl", "k", lease.LeaseExclusive, []int{0, 4}, []string{"until 1.790s (its last grant's invoke plus ttl(1-drift))"}},
		{"122-lease-clock-fault-too-small.jsonl", "k", lease.LeaseExclusive, []int{0, 4}, []string{"explain only 500 ms of it"}},
		{"123-lease-mixed-max-overlap.jsonl", "k", lease.LeaseExclusive, []int{0, 2}, []string{"disagree on max"}},
		{"124-lease-refresh-after-expiry.jsonl", "k", lease.NoRevival, []int{6, 0}, []string{"had certainly expired", "until 1.020s"}},
		{"125-lease-release-ok-after-expiry.jsonl", "k", lease.NoRevival, []int{4, 0}, []string{"release token a -> ok", "had certainly expired"}},
		{"126-lease-refresh-after-release.jsonl", "k", lease.NoRevival, []int{4, 0}, []string{"had been released"}},
		{"127-lease-refresh-unknown-token.jsonl", "k", lease.NoRevival, []int{2}, []string{"token zz, which no acquire"}},
		{"128-lease-full-while-free.jsonl", "k", lease.AcquireExact, []int{6}, []string{"at most 0 lease(s) may have been held"}},
		{"129-lease-full-max2-one-held.jsonl", "k", lease.AcquireExact, []int{2}, []string{"at most 1 lease(s)", "max 2"}},
		{"130-lease-fence-goes-back.jsonl", "k", lease.Fencing, []int{6, 0}, []string{"fence 3 is not above 5"}},
		{"131-lease-fence-repeats.jsonl", "k", lease.Fencing, []int{6, 0}, []string{"fence 4 is not above 4"}},
		{"132-lease-no-recovery-after-kill.jsonl", "k", lease.Recovers, []int{6, 0}, []string{"after kill c1 (#4)", "margin of 1s"}},
		{"133-lease-no-recovery-after-pause.jsonl", "k", lease.Recovers, []int{6, 0}, []string{"after pause c1 (#4)"}},
		{"134-lease-unknown-unexcused.jsonl", "k", lease.Available, []int{2}, []string{"no fault was in force on c1"}},
		{"135-lease-refresh-never-succeeds.jsonl", "k", lease.Available, nil, []string{"no refresh ever succeeded"}},
		{"136-lease-two-keys-one-bad.jsonl", "y", lease.LeaseExclusive, []int{1, 4}, []string{"c3's lease c"}},
		{"137-lease-unknown-refresh-then-no-recovery.jsonl", "k", lease.Recovers, []int{8, 0}, []string{"until 2.030s"}},
		{"147-lease-clock-behind-before-grant.jsonl", "k", lease.LeaseExclusive, []int{4, 6}, []string{"2 leases were certainly valid, max 1"}},
		// c3 is paused between operations, holding nothing (148: paused
		// in the middle of one, it excuses c2's wait in vain).
		{"149-lease-unknown-beside-idle-paused.jsonl", "k", lease.Available, []int{6}, []string{"no fault was in force on c2"}},
		{"138-lease-unknown-refresh-after-expiry-then-ok.jsonl", "k", lease.NoRevival, []int{6, 0}, []string{"if c1 refresh ttl_ms 1000, token a -> unknown (info) (#4) revived it instead"}},
	} {
		r := check(t, tc.file, model.Options{})
		for _, v := range r.Verdicts {
			want := v.Lock == tc.lock && v.Property == tc.prop
			switch {
			case want && v.Status != model.Fail:
				t.Errorf("%s: %s %s is %v, want FAIL", tc.file, v.Lock, v.Property, v.Status)
			case want:
				for _, d := range tc.detail {
					if !strings.Contains(v.Detail, d) {
						t.Errorf("%s: detail %q lacks %q", tc.file, v.Detail, d)
					}
				}
				if tc.ops != nil && fmt.Sprint(v.Ops) != fmt.Sprint(tc.ops) {
					t.Errorf("%s: operations %v, want %v", tc.file, v.Ops, tc.ops)
				}
			case v.Status == model.Fail:
				t.Errorf("%s: %s %s fails too: %s", tc.file, v.Lock, v.Property, v.Detail)
			}
		}
	}
}

// TestExcusesAreReported checks that a pass a clock fault explains says so.
func TestExcusesAreReported(t *testing.T) {
	for file, want := range map[string]struct{ prop, fault string }{
		"106-lease-clock-jump-excused.jsonl":       {lease.LeaseExclusive, "(#2)"},
		"113-lease-refresh-excused-by-clock.jsonl": {lease.NoRevival, "(#2)"},
		// The backend's clock was off while c1's acquire ran, so c1's
		// deadline may be short by the skew, though the clock was put
		// right before the acquire returned (147: before it began).
		"146-lease-clock-behind-during-grant-excused.jsonl": {lease.LeaseExclusive, "(#0)"},
	} {
		prop := want.prop
		for _, v := range check(t, file, model.Options{}).Verdicts {
			if v.Property == prop && (v.Status != model.Pass || !strings.Contains(v.Detail, "excused by clock faults beyond the drift bound") || !strings.Contains(v.Detail, want.fault)) {
				t.Errorf("%s: %s %v %q, want a pass that names the clock fault", file, prop, v.Status, v.Detail)
			}
		}
	}
}

// TestDriftMatters checks that the drift bound given is the one judged
// with: 121's overlap (c2's lease from 1.3 s, c1's refreshed at 0.8 s for
// 1 s) goes under a 50% drift, not under 0.1%; a refresh 3 s after a 1 s
// lease (124) and a full 5 s after a 1 s lease's holder died (132) stay
// wrong under any drift below 1.
func TestDriftMatters(t *testing.T) {
	status := func(file, prop string, drift float64) model.Status {
		for _, v := range check(t, file, model.Options{Drift: drift}).Verdicts {
			if v.Property == prop {
				return v.Status
			}
		}
		t.Fatalf("%s: no %s verdict", file, prop)
		return 0
	}
	if s := status("121-lease-overlap-after-refresh.jsonl", lease.LeaseExclusive, 0.5); s != model.Pass {
		t.Errorf("121 with drift 50%%: %v, want pass (certainly valid only until 0.800+0.500 s)", s)
	}
	if s := status("121-lease-overlap-after-refresh.jsonl", lease.LeaseExclusive, 0.001); s != model.Fail {
		t.Errorf("121 with drift 0.1%%: %v, want FAIL", s)
	}
	if s := status("124-lease-refresh-after-expiry.jsonl", lease.NoRevival, 0.9); s != model.Fail {
		t.Errorf("124 with drift 90%%: %v, want FAIL (1.9 s < 3 s)", s)
	}
	if s := status("132-lease-no-recovery-after-kill.jsonl", lease.Recovers, 0.9); s != model.Fail {
		t.Errorf("132 with drift 90%%: %v, want FAIL", s)
	}
}

// A lease verdict describes operations as every family does, with the
// error the process gave.
func TestDescribedWithTheProcessError(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "124-lease-refresh-after-expiry.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		if h[i].Index == 7 { // the completion of the refresh at #6
			h[i].Error = "renewed late"
		}
	}
	for _, v := range model.Check(h, model.Options{}).Verdicts {
		if v.Property == lease.NoRevival && !strings.Contains(v.Detail, "(error: renewed late) (#6)") {
			t.Errorf("no-revival: %q lacks the refresh's error", v.Detail)
		}
	}
}

// With model.ClocksBackend only the backend's clock times leases: 113's
// late refresh, excused when c1's own clock ran 5 s behind, is a revival
// when only the database's clock counts (a client's clock then explains
// nothing); the backend's clock faults still excuse.
func TestBackendClocksOnly(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "113-lease-refresh-excused-by-clock.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	status := func(h []histories.Event, clocks string) model.Status {
		for _, v := range model.Check(h, model.Options{Clocks: clocks}).Verdicts {
			if v.Property == lease.NoRevival {
				return v.Status
			}
		}
		t.Fatal("no no-revival verdict")
		return 0
	}
	if s := status(h, model.ClocksBackend); s != model.Pass {
		t.Errorf("the backend's skew, backend clocks: %v, want pass (excused)", s)
	}
	client := append([]histories.Event(nil), h...)
	for i, e := range client {
		if e.Process == "nemesis" && e.Value != nil && e.Value.OffsetMs != nil {
			v := *e.Value
			v.Process = "c1"
			client[i].Value = &v
		}
	}
	if s := status(client, ""); s != model.Pass {
		t.Errorf("c1's skew, any clock: %v, want pass (excused)", s)
	}
	if s := status(client, model.ClocksBackend); s != model.Fail {
		t.Errorf("c1's skew, backend clocks: %v, want FAIL", s)
	}
}

// A backend clock ahead when a lease was granted makes it outlast its ttl
// after the clock is put right: a full long after the ttl is excused by
// that fault, though it was reset before the ttl ran out.
func TestRecoversExcusedByAnEarlierSkew(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	var h []histories.Event
	add := func(at int64, proc string, typ histories.Type, f string, v *histories.Value) {
		e := histories.Event{Index: len(h), Time: at, Process: proc, Type: typ, F: f, Value: v}
		if proc != "nemesis" {
			e.Lock, e.Kind = "k", histories.Lease
		}
		h = append(h, e)
	}
	skew := &histories.Value{OffsetMs: histories.Int(1011)}
	add(0, "nemesis", histories.Invoke, histories.ClockSkew, skew)
	add(ms(1), "nemesis", histories.Info, histories.ClockSkew, skew)
	add(ms(2), "c1", histories.Invoke, histories.Acquire, &histories.Value{Max: histories.Int(1), TTLMs: histories.Int(1000)})
	add(ms(3), "c1", histories.Ok, histories.Acquire, &histories.Value{Token: "a"})
	add(ms(10), "nemesis", histories.Invoke, histories.ClockReset, nil)
	add(ms(11), "nemesis", histories.Info, histories.ClockReset, nil)
	add(ms(2014), "probe1", histories.Invoke, histories.Acquire, &histories.Value{Max: histories.Int(1), TTLMs: histories.Int(1000)})
	add(ms(2015), "probe1", histories.Fail, histories.Acquire, &histories.Value{Reason: histories.Full})
	for _, v := range model.Check(h, model.Options{}).Verdicts {
		if v.Property == lease.Recovers && (v.Status != model.Pass || !strings.Contains(v.Detail, "excused")) {
			t.Errorf("recovers %v %q, want a pass excused by the skew", v.Status, v.Detail)
		}
	}
}
