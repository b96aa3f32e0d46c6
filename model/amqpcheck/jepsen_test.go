package amqpcheck

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

func edn(t *testing.T, text string) []histories.Event {
	t.Helper()
	h, _, err := histories.ReadEDN(strings.NewReader(text), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// find returns the verdict of prop on lock.
func find(t *testing.T, r *verdict.Report, lock, prop string) verdict.Verdict {
	t.Helper()
	for _, v := range r.Verdicts {
		if v.Lock == lock && v.Property == prop {
			return v
		}
	}
	t.Fatalf("no verdict %s on %s", prop, lock)
	return verdict.Verdict{}
}

// A double hold long after a short partition: Knossos's mutex model
// (model.Options.Jepsen) finds it, as Jepsen does; a fault on every client that
// may end any hold would excuse it.
const partitionThenDoubleHold = `{:type :invoke, :f :acquire, :process 0, :time 1000}
{:type :ok, :f :acquire, :process 0, :time 2000}
{:type :info, :f :start-partition, :value :majority, :process :nemesis, :time 3000}
{:type :info, :f :start-partition, :value [:isolated {"n1" #{"n2"}}], :process :nemesis, :time 3001}
{:type :info, :f :stop-partition, :process :nemesis, :time 3002}
{:type :info, :f :stop-partition, :value :network-healed, :process :nemesis, :time 3003}
{:type :invoke, :f :acquire, :process 1, :time 90000000000}
{:type :ok, :f :acquire, :process 1, :time 90000001000}
`

func TestJepsenFaultsEndNoHold(t *testing.T) {
	h := edn(t, partitionThenDoubleHold)
	v := find(t, model.Check(h, model.Options{Jepsen: true}), histories.JepsenLock, SlotExclusive)
	if v.Status != verdict.Fail || !strings.Contains(v.Detail, "p1 acquire -> ok (#") || !strings.Contains(v.Detail, "while p0 held it") {
		t.Errorf("Jepsen: %v %q, want a failure naming both holders", v.Status, v.Detail)
	}
	old := find(t, model.Check(h, model.Options{}), histories.JepsenLock, SlotExclusive)
	if old.Status != verdict.Pass || len(old.Excuses) != 1 || !strings.Contains(old.Excuses[0].Why, "may have ended p0's hold") {
		t.Errorf("faults that end holds: %v %+v, want a pass that lists the fault that excused it", old.Status, old.Excuses)
	}
}

// A double hold after the holder's release of unknown outcome passes
// (the release may have taken effect) and says so.
func TestJepsenUnknownReleaseExcuses(t *testing.T) {
	h := edn(t, `{:type :invoke, :f :acquire, :process 0, :time 1}
{:type :ok, :f :acquire, :process 0, :time 2}
{:type :invoke, :f :release, :process 0, :time 3}
{:type :info, :f :release, :process 0, :time 4, :error :timeout}
{:type :invoke, :f :acquire, :process 1, :time 5}
{:type :ok, :f :acquire, :process 1, :time 6}
`)
	v := find(t, model.Check(h, model.Options{Jepsen: true}), histories.JepsenLock, SlotExclusive)
	if v.Status != verdict.Pass || len(v.Excuses) != 1 || !strings.Contains(v.Excuses[0].Why, "excused only because p0 release -> unknown (info) (error: :timeout) (#2) may have taken effect") {
		t.Errorf("%v %+v", v.Status, v.Excuses)
	}
	if len(v.Excuses) == 1 && !equalInts(v.Excuses[0].Ops, []int{4, 0, 2}) {
		t.Errorf("ops %v, want [4 0 2]", v.Excuses[0].Ops)
	}
}

// Acquires still in flight when a Jepsen history ends make no liveness
// claim: excused, and listed; in lockprover's own histories, which end
// cleanly, they fail available.
func TestJepsenCutOffMakesNoLivenessClaim(t *testing.T) {
	h := edn(t, `{:type :invoke, :f :acquire, :process 0, :time 1}
{:type :ok, :f :acquire, :process 0, :time 2}
{:type :invoke, :f :acquire, :process 1, :time 3}
{:type :invoke, :f :acquire, :process 2, :time 4}
`)
	v := find(t, model.Check(h, model.Options{Jepsen: true}), histories.JepsenLock, Available)
	if v.Status != verdict.Pass || len(v.Excuses) != 2 || !strings.Contains(v.Excuses[0].Why, "still in flight when the history ends") {
		t.Errorf("Jepsen: %v %+v", v.Status, v.Excuses)
	}
	if v := find(t, model.Check(h, model.Options{}), histories.JepsenLock, Available); v.Status != verdict.Fail {
		t.Errorf("a clean end: %v, want FAIL", v.Status)
	}
}

// An unknown outcome a fault excuses is listed with the fault.
func TestAvailableListsExcuses(t *testing.T) {
	h := edn(t, `{:type :invoke, :f :acquire, :process 0, :time 1}
{:type :info, :f :start, :process :nemesis, :time 2}
{:type :info, :f :acquire, :process 0, :time 3}
{:type :info, :f :start, :process :nemesis, :time 4}
{:type :invoke, :f :acquire, :process 1, :time 5}
{:type :ok, :f :acquire, :process 1, :time 6}
`)
	v := find(t, model.Check(h, model.Options{Jepsen: true}), histories.JepsenLock, Available)
	if v.Status != verdict.Pass || len(v.Excuses) != 1 || !strings.Contains(v.Excuses[0].Why, "an unknown outcome, excused by partition p0 (#1)") {
		t.Errorf("%v %+v", v.Status, v.Excuses)
	}
}

func equalInts(a, b []int) bool { return slices.Equal(a, b) }

// A pass whose reliance on its excuses cannot be told in time says so: it
// may rest on them. A budget of 1ns is spent before the search starts (the
// clock reads a nanosecond apart), so the check without the excuses is
// Inconclusive every time, never decided by porcupine's race between its
// timer and its result (linearize).
func TestRelianceUndecidedIsAnExcuse(t *testing.T) {
	v := verdict.Verdict{Status: verdict.Pass}
	h := edn(t, `{:type :invoke, :f :acquire, :process 0, :time 1}
{:type :ok, :f :acquire, :process 0, :time 2}
{:type :invoke, :f :release, :process 0, :time 3}
{:type :info, :f :release, :process 0, :time 4}
`)
	locks, _ := split(h)
	ops, _ := mutexOps(locks[0], false, false)
	o := model.Options{Timeout: time.Nanosecond}
	reliance(&v, locks[0], mutexModel(locks[0]), map[int][]porcupine.Operation{0: ops}, o)
	if len(v.Excuses) != 1 || !strings.Contains(v.Excuses[0].Why, "could not be told in time") || !slices.Equal(v.Excuses[0].Ops, []int{2}) {
		t.Errorf("%+v", v.Excuses)
	}
}
