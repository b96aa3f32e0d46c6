package amqprun

import (
	"context"
	"slices"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"pgregory.net/rapid"
)

// Drawn plans put their parts where they matter: every client acquires,
// an admin-crash strikes only an admin that changes the semaphore, and
// mostly between two queue writes of its change.
func TestDrawnPlans(t *testing.T) {
	var crashes, between, wide int
	plans := rapid.Custom(func(t *rapid.T) *Plan { return Draw(t, Config{}) })
	for seed := range 2000 {
		p := plans.Example(seed)
		for i, script := range p.Clients {
			if !slices.ContainsFunc(script, func(s Step) bool { return s.Op == histories.Acquire }) {
				t.Fatalf("plan %d: client c%d does nothing: %v", seed, i+1, script)
			}
		}
		seen := map[string]int{}
		for _, f := range p.Nemesis {
			if f.Fault != AdminCrash {
				continue
			}
			a := -1
			for i := range p.Admins {
				if adminName(i) == f.Target {
					a = i
				}
			}
			if a < 0 || !slices.ContainsFunc(p.Admins[a], func(s Step) bool { return s.Op == histories.Change }) {
				t.Fatalf("plan %d: admin-crash of %s, which changes nothing: %v", seed, f.Target, p.Admins)
			}
			crashes++
			from, to := nthChange(p, a, seen[f.Target])
			seen[f.Target]++
			if max(from, to)-min(from, to) > 1 {
				wide++
				if first := methodsBeforeWrites(p, from) + 1; f.AfterCalls >= first && f.AfterCalls < first+max(from, to)-min(from, to)-1 {
					between++
				}
			}
		}
	}
	t.Logf("%d admin-crashes, %d in changes of two writes or more, %d of them between two writes", crashes, wide, between)
	if wide == 0 || between*2 < wide {
		t.Errorf("only %d of %d admin-crashes in changes of two writes or more strike between two writes", between, wide)
	}
}

// methodsBeforeWrites counts as the runner does: an admin-crash right after
// the first deletion of a change from 2 to 0 leaves A[2] behind a hole,
// which the mutant that deletes in ascending order never cleans up, and
// the reference (descending) does not suffer.
func TestAdminCrashBetweenWrites(t *testing.T) {
	p := &Plan{Version: PlanVersion, Kind: histories.Semaphore, Lock: "lp", Slots: 2,
		Clients: [][]Step{{{Op: histories.Acquire}}}, Admins: [][]Step{{{Op: histories.Change, Delta: -2}}},
		Nemesis: []Fault{{Fault: AdminCrash, Target: "admin", AfterCalls: methodsBeforeWrites(&Plan{}, 2) + 1}}}
	for _, mutant := range []string{"", "ascending-no-overshoot"} {
		q := *p
		q.Mutant = mutant
		res, err := Simulator{}.Run(context.Background(), &q, ImplFor(&q))
		if err != nil {
			t.Fatal(err)
		}
		var noLeak verdict.Status
		for _, v := range prover.Judge(res, model.Options{}).Verdicts {
			if v.Property == amqpcheck.NoLeak {
				noLeak = v.Status
			}
		}
		if want := map[string]verdict.Status{"": verdict.Pass, "ascending-no-overshoot": verdict.Fail}[mutant]; noLeak != want {
			t.Errorf("mutant %q: no-leak %s, want %s (leaks %v)", mutant, noLeak, want, res.Evidence.Family.(*amqpcheck.Evidence).Leaks)
		}
	}
}

// Drawn plans reach the interleavings defects need, and the search says
// which: on the simulator, in 1,000 plans, each of a client's and an
// admin's operations comes after each of another process's that succeed
// (and each but verify and release, which follow the client's own acquire,
// comes after the first admin's create); a count follows another admin's change in a tenth of the
// plans or more (what an admin answering from its own cache needs), and
// most plans show an acquire after the client's own release (a second
// scan).
func TestDrawnPlansReachTheInterleavings(t *testing.T) {
	out, err := prover.Search{Config: prover.Config{Subject: Config{}}, Seed: 1, Plans: 1000}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	kinds := []string{histories.Acquire, histories.Verify, histories.Release, histories.Change, histories.Count, histories.Wait}
	for _, x := range kinds {
		ys := kinds
		if x != histories.Verify && x != histories.Release { // which follow the client's own acquire
			ys = append(ys, histories.Create)
		}
		for _, y := range ys {
			if i := (prover.Interleaving{X: x, Y: y, Who: roleOf(x) + "/" + roleOf(y)}); out.Interleavings[i] == 0 {
				t.Errorf("no plan shows %s", i)
			}
		}
	}
	for i, least := range map[prover.Interleaving]int{
		{X: histories.Count, Y: histories.Change, Who: "admin/admin"}:                            100,
		{X: histories.Change, Y: histories.Change, Who: "admin/admin"}:                           100,
		{X: histories.Acquire, Y: histories.Release, How: prover.AfterOwn, Who: "client/client"}: 600,
	} {
		if n := out.Interleavings[i]; n < least {
			t.Errorf("%s in %d plans of %d, want %d or more", i, n, out.Plans, least)
		}
	}
}

// roleOf is the role of the process that does op.
func roleOf(op string) string {
	if slices.Contains(clientOps, op) {
		return "client"
	}
	return "admin"
}
