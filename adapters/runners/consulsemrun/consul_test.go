package consulsemrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// realTargets are the real servers the tests run on.
var realTargets = []string{Consul, Etcd}

// onReal skips the test where this machine has no server for target.
func onReal(t *testing.T, target string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real servers")
	}
	if err := Preflight(target); errors.Is(err, consul.ErrNoConsul) || errors.Is(err, etcd.ErrNoEtcd) {
		t.Skipf("skipped: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// safety are the properties the drawn plans on real servers count: not
// available (nor recovers), which needs a machine that answers within an
// operation's timeout; a busy CI machine may not.
var safety = []string{lease.LeaseExclusive, lease.NoRevival, lease.Fencing, lease.Aware}

// The reference holds on a few drawn plans on each real server (every
// fault offered there: kill, pause, partition). What a run leaves behind
// fails available, which this test does not count: TestRealFaults checks
// that nothing is.
func TestRealReferenceHolds(t *testing.T) {
	t.Parallel()
	for _, target := range realTargets {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			onReal(t, target)
			safeOn(t, Config{Scope: prover.Scope{Clients: 3, Ops: 5}, Target: target, TTLMs: 2000}, 4, 2)
		})
	}
}

// safeOn proves the reference on plans drawn for c, from seed 1, parallel
// at a time, counting the safety properties: none may fail.
func safeOn(t *testing.T, c Config, plans, parallel int) {
	t.Helper()
	out, err := prover.Search{Config: prover.Config{Subject: c, Properties: safety}, Seed: 1, Plans: plans, Parallel: parallel, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s", out.Found.Summary())
	}
	t.Logf("%s: %d plans, %v", c, out.Plans, out.Verdicts)
}

// realPlan reads testdata plan name for a real target (skipping where
// this machine has no server for it), with its mutant.
func realPlan(t *testing.T, target, name string) (*Plan, *Mutant) {
	t.Helper()
	onReal(t, target)
	p, err := ReadPlan(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	p.Backend = target
	return p, MutantNamed(p.Mutant)
}

// A plan on a real server (a Consul agent -dev and persistent, etcd)
// records each fault it holds where it struck (a lost reply when the
// answer to c2's grant is lost) and leaves nothing behind; a restart of
// the server (realRestart) too.
func TestRealFaults(t *testing.T) {
	t.Parallel()
	for _, where := range []string{Consul, Consul + "-persistent", Etcd} {
		target, persistent := strings.CutSuffix(where, "-persistent")
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			onReal(t, target)
			p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: target, Persistent: persistent, Limit: 2, TTLMs: 2000,
				Clients: [][]Step{{{Op: histories.Acquire}, {Op: Sleep, Ms: 1500}, {Op: histories.Refresh}, {Op: histories.Release}},
					{{Op: Sleep, Ms: 100}, {Op: histories.Acquire}, {Op: Sleep, Ms: 1500}, {Op: histories.Acquire}}},
				Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{
					{At: 0, Fault: histories.DropReply, Target: "c2"}, // c2's grant at 100 ms
					{At: 500, Fault: histories.Partition, Target: "c1", For: 400},
					{At: 500, Fault: histories.Pause, Target: "c2", For: 400},
					{At: 1300, Fault: histories.Kill, Target: "c2"},
				}}}
			// The lost reply strikes c2's grant only if the grant comes
			// before the pause: beside the suite, c2's acquire once ran
			// from 186 ms past the pause at 558 ms, and was killed, so
			// there was no reply to lose (and rightly none recorded).
			// Such a run runs again, up to three runs.
			const want = "drop-reply c2, heal c1, kill c2, partition c1, pause c2, resume c2"
			var res *prover.Result
			var got string
			for run := 1; ; run++ {
				var err error
				if res, err = RunReal(context.Background(), p); err != nil {
					t.Fatal(err)
				}
				var struck []string
				for _, e := range res.History {
					if e.Process == "nemesis" && e.Type == histories.Invoke {
						struck = append(struck, e.F+" "+histories.FaultOf(&e).Process)
					}
				}
				slices.Sort(struck)
				got = strings.Join(struck, ", ")
				if got != "heal c1, kill c2, partition c1, pause c2, resume c2" || run == 3 {
					break
				}
				t.Logf("run %d: c2's grant did not come before the pause, the lost reply did not strike: again", run)
			}
			if got != want {
				var b strings.Builder
				histories.Write(&b, res.History)
				t.Errorf("faults recorded: %s, want %s\n%s", got, want, b.String())
			}
			if len(res.Evidence.Problems) > 0 {
				t.Errorf("problems: %v", res.Evidence.Problems)
			}
			for _, v := range prover.Judge(res, model.Options{Family: []any{Config{Target: target}.Judging("")}}).Verdicts {
				if v.Status == verdict.Fail && v.Property != lease.Available && v.Property != lease.Recovers {
					t.Errorf("%s: %s", v.Property, v.Detail)
				}
			}
			realRestart(t, target, persistent)
		})
	}
}

// realRestart runs a plan whose server restarts while c1 holds and c2
// waits: the restart is recorded in force from before the server went
// down until it answered again (at least its 500 ms down), nothing is
// left behind, and where the server keeps its sessions (a persistent
// agent, etcd) every safety property holds. A -dev agent forgets them
// (c2 then takes c1's slot: the configuration's finding, not the
// recipe's), so there only the record is checked.
func realRestart(t *testing.T, target string, persistent bool) {
	p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: target, Persistent: persistent, Limit: 1, TTLMs: 2000,
		Clients: [][]Step{{{Op: histories.Acquire}, {Op: Sleep, Ms: 1500}, {Op: histories.Refresh}, {Op: histories.Release}},
			{{Op: Sleep, Ms: 100}, {Op: histories.Acquire}, {Op: Sleep, Ms: 2500}, {Op: histories.Acquire}}},
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{{At: 300, Fault: histories.RestartBroker, For: 500}}}}
	res, err := RunReal(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	histories.Write(&b, res.History)
	var down, up int64 = -1, -1
	for _, e := range res.History {
		if e.Process == "nemesis" && e.F == histories.RestartBroker && histories.FaultOf(&e).Process == server {
			if e.Type == histories.Invoke {
				down = e.Time
			} else {
				up = e.Time
			}
		}
	}
	if down < 0 || up < down+int64(500*time.Millisecond) {
		t.Errorf("restart recorded from %d to %d ns, want from before the stop to 500 ms or more later:\n%s", down, up, b.String())
	}
	if len(res.Evidence.Problems) > 0 {
		t.Errorf("after a restart, problems: %v\n%s", res.Evidence.Problems, b.String())
	}
	if target == Consul && !persistent {
		return
	}
	for _, v := range prover.Judge(res, model.Options{Family: []any{Config{Target: target}.Judging("")}}).Verdicts {
		if v.Status == verdict.Fail && slices.Contains(safety, v.Property) {
			t.Errorf("after a restart, %s: %s\n%s", v.Property, v.Detail, b.String())
		}
	}
}

// Two mutants are caught on each real server, each on a plan of
// testdata/ written for it, by its property. A run the machine was too
// slow for (the plan's operations did not end ok where its script needs
// them to, or, for real-limit-gt, c2 asked before c1 was granted) is said
// and run again, up to four runs.
func TestRealMutantsCaught(t *testing.T) {
	t.Parallel()
	for _, target := range realTargets {
		for _, name := range []string{"real-limit-gt", "real-release-ok"} {
			t.Run(target+"/"+name, func(t *testing.T) {
				t.Parallel()
				p, m := realPlan(t, target, name)
				for run := 1; ; run++ {
					res, err := RunReal(context.Background(), p)
					if err != nil {
						t.Fatal(err)
					}
					v := verdictOf(prover.Judge(res, model.Options{Family: []any{Config{Target: target}.Judging("")}}), m.Property)
					if v.Status == verdict.Fail {
						t.Logf("run %d: %s caught by %s: %s", run, m.Name, m.Property, v.Detail)
						return
					}
					var b strings.Builder
					histories.Write(&b, res.History)
					why := offScript(res.History)
					if why == "" && name == "real-limit-gt" {
						// c2 must ask while c1 holds (beside a loaded
						// suite c1's acquire once took 1.5 s: c2 held and
						// released first, and the run showed nothing; a
						// c1 not granted is off its script above)
						why = leaserun.AnsweredBefore(res.History, "c1", histories.Acquire, "c2", histories.Acquire)
					}
					if why != "" && run < 4 {
						t.Logf("run %d: off its script (%s: a machine too slow); running again\n%s", run, why, b.String())
						continue
					}
					t.Fatalf("run %d: %s not caught by %s (%s)\n%s", run, m.Name, m.Property, v.Status, b.String())
				}
			})
		}
	}
}

// verdictOf is r's verdict on property.
func verdictOf(r *verdict.Report, property string) verdict.Verdict {
	for _, v := range r.Verdicts {
		if v.Property == property {
			return v
		}
	}
	return verdict.Verdict{}
}

// offScript says which client's operation in h went off the mutants'
// scripts, or "": an acquire not granted, a refresh or release that found
// its lease expired (a machine so slow that a lease of seconds ran out
// before the next step: once, at load 40, c2's acquire took 2.3 s of
// real-local-limit's script and c1's release came too late), or any
// operation whose outcome is unknown (it timed out).
func offScript(h []histories.Event) string {
	for _, e := range h {
		if strings.HasPrefix(e.Process, "probe") || e.Process == "nemesis" || e.Type == histories.Invoke {
			continue
		}
		if e.Type != histories.Ok && (e.F == histories.Acquire || e.F == histories.Refresh || e.F == histories.Release) || e.Type == histories.Info {
			return fmt.Sprintf("%s's %s ended %s %s", e.Process, e.F, e.Type, e.Error)
		}
	}
	return ""
}

// Six mutants (docs/consul-semaphore.md: consul-cas-to-put,
// consul-local-limit, consul-no-prune, consul-plain-contender,
// consul-delete-fence, consul-monitor-forever) are caught on each real server on a plan of
// testdata/ written for each, by its property, and the
// reference passes the same plan: its property and every safety property
// hold. A mutant's run the machine was too slow for (off its script: an
// acquire not granted, an operation timed out; for consul-cas-to-put, the
// three acquires at 0 ms that did not race, so that one was refused) is
// said and run again, up to four runs.
func TestRealMutantsCaughtReferenceHolds(t *testing.T) {
	t.Parallel()
	for _, target := range realTargets {
		for _, name := range []string{"real-cas-to-put", "real-local-limit", "real-no-prune", "real-plain-contender", "real-delete-fence", "real-monitor-forever"} {
			t.Run(target+"/"+name, func(t *testing.T) {
				t.Parallel()
				p, m := realPlan(t, target, name)
				judge := func(p *Plan) (*verdict.Report, []histories.Event, string) {
					t.Helper()
					res, err := RunReal(context.Background(), p)
					if err != nil {
						t.Fatal(err)
					}
					var b strings.Builder
					histories.Write(&b, res.History)
					return prover.Judge(res, model.Options{Family: []any{Config{Target: target}.Judging("")}}), res.History, b.String()
				}
				for run := 1; ; run++ {
					r, events, h := judge(p)
					v := verdictOf(r, m.Property)
					if v.Status == verdict.Fail {
						t.Logf("run %d: %s caught by %s: %s", run, m.Name, m.Property, v.Detail)
						break
					}
					if why := offScript(events); why != "" && run < 4 {
						t.Logf("run %d: off its script (%s: a machine too slow); running again\n%s", run, why, h)
						continue
					}
					t.Fatalf("run %d: %s not caught by %s (%s)\n%s", run, m.Name, m.Property, v.Status, h)
				}
				ref := *p
				ref.Mutant = ""
				r, _, h := judge(&ref)
				for _, prop := range append([]string{m.Property}, safety...) {
					if v := verdictOf(r, prop); v.Status == verdict.Fail {
						t.Errorf("the reference on %s's plan: %s %s: %s\n%s", m.Name, prop, v.Status, v.Detail, h)
					}
				}
			})
		}
	}
}
