package consulsemrun

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// shrink is the tests' time to minimise what they find: they need a
// counterexample, not the smallest.
const shrink = 50 * time.Millisecond

// holds proves c on plans from seed 1 and fails the test on a
// counterexample.
func holds(t *testing.T, c Config, plans int) *prover.Outcome {
	t.Helper()
	out, err := prover.Search{Config: prover.Config{Subject: c}, Seed: 1, Plans: plans, Shrink: shrink}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found != nil {
		t.Fatalf("%s: %s", c, out.Found.Summary())
	}
	return out
}

// The reference holds on the simulated Consul (-dev and persistent) and
// etcd, under every fault the plans draw by default (restarts of the
// servers that keep their sessions).
func TestReferenceHolds(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{{Backend: Consul}, {Backend: Consul, Persistent: true}, {Backend: Etcd}} {
		out := holds(t, c, 300)
		for _, p := range []string{lease.LeaseExclusive, lease.NoRevival, lease.Fencing, lease.Recovers, lease.Available, lease.Aware} {
			if out.Verdicts[p][verdict.Pass] == 0 {
				t.Errorf("%s: %s never passed on a plan: %v", c, p, out.Verdicts[p])
			}
		}
	}
}

// Every mutant is caught on the simulator, by its property, on both
// backends.
func TestMutantsAreCaught(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{Consul, Etcd} {
		for _, m := range Mutants {
			t.Run(backend+"/"+m.Name, func(t *testing.T) {
				out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: m.Name}, Backend: backend}, Properties: []string{m.Property}},
					Seed: 1, Plans: 2000, Shrink: shrink}.Run()
				if err != nil {
					t.Fatal(err)
				}
				if out.Found == nil || out.Found.Property != m.Property {
					t.Fatalf("not caught by %s in %d plans", m.Property, out.Plans)
				}
				t.Logf("caught after %d plans: %s", out.Plans, out.Found.Summary())
			})
		}
	}
}

// The correct variants hold too: stale reads before the CAS, Consul's
// Behavior release, and sessions with a lock-delay.
func TestVariantsHold(t *testing.T) {
	t.Parallel()
	holds(t, Config{StaleReads: true}, 200)
	holds(t, Config{BehaviorRelease: true}, 200)
	holds(t, Config{LockDelay: true, Persistent: true}, 200)
	holds(t, Config{StaleReads: true, Backend: Etcd}, 200)
}

// A drawn plan reads back as it was written, and runs to the same
// history, byte for byte.
func TestPlanRoundTripsAndRepeats(t *testing.T) {
	t.Parallel()
	out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: "consul-limit-gt"}}}, Seed: 3, Plans: 500, Shrink: shrink}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil {
		t.Fatal("nothing found to replay")
	}
	p := out.Found.Plan.(*Plan)
	var a bytes.Buffer
	if err := p.Write(&a); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, a.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	back.Write(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("the plan read back differs:\n%s\n%s", a.Bytes(), b.Bytes())
	}
	var want bytes.Buffer
	histories.Write(&want, out.Found.Result.History)
	for i := 0; i < 3; i++ {
		res, err := Simulate(back, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		histories.Write(&got, res.History)
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Fatalf("run %d differs", i)
		}
	}
}

// A plan file that is wrong is refused with its file, line and field.
func TestReadPlanErrors(t *testing.T) {
	t.Parallel()
	good := `{"version":1,"kind":"consul-semaphore","prefix":"lp","backend":"consul","limit":1,"ttl_ms":1000,` +
		`"clients":[[{"op":"acquire"}]],"nemesis":[{"at_ms":5,"fault":"kill","target":"c1"}],"schedule":[],"schedule_seed":0}`
	for _, c := range []struct{ name, from, to, want string }{
		{"good", "", "", ""},
		{"unknown field", `"limit":1`, `"limit":1,"limt":2`, "limt"},
		{"backend", `"backend":"consul"`, `"backend":"zookeeper"`, "backend"},
		{"etcd ttl", `"backend":"consul","limit":1,"ttl_ms":1000`, `"backend":"etcd","limit":1,"ttl_ms":1500`, "ttl_ms"},
		{"limit", `"limit":1`, `"limit":0`, "limit"},
		{"op", `"op":"acquire"`, `"op":"wait"`, "clients[0][0].op"},
		{"target", `"target":"c1"`, `"target":"c9"`, "nemesis[0].target"},
		{"restart target", `"fault":"kill","target":"c1"`, `"fault":"restart-broker","target":"c1"`, "nemesis[0].target"},
		{"mutant", `"limit":1`, `"limit":1,"mutant":"nope"`, "mutant"},
		{"persistent etcd", `"backend":"consul"`, `"backend":"etcd","persistent":true`, "persistent"},
		{"force-close lasts", `"fault":"kill","target":"c1"`, `"fault":"force-close","target":"c1","for_ms":5`, "nemesis[0].for_ms"},
	} {
		path := filepath.Join(t.TempDir(), "plan.json")
		os.WriteFile(path, []byte(strings.Replace(good, c.from, c.to, 1)), 0o644)
		_, err := ReadPlan(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path+":")):
			t.Errorf("%s: got %v, want an error naming %s and %q", c.name, err, path, c.want)
		}
	}
}

// A fault is recorded only where it struck: a kill, a pause and a
// force-close aimed at a client already done, and a drop-reply armed for
// a client that never writes a grant again, leave no trace; a drop-reply
// that does strike is recorded when the reply is lost.
func TestOnlyStruckFaultsRecorded(t *testing.T) {
	t.Parallel()
	p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: Consul, Limit: 1, TTLMs: 1000,
		Clients: [][]Step{{{Op: histories.Acquire}, {Op: histories.Release}}, {{Op: Sleep, Ms: 100}, {Op: histories.Acquire}}},
		Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{
			{At: 50, Fault: histories.Kill, Target: "c1"},
			{At: 60, Fault: histories.Pause, Target: "c1", For: 10},
			{At: 70, Fault: histories.DropReply, Target: "c1"},
			{At: 80, Fault: histories.DropReply, Target: "c2"},
			{At: 90, Fault: histories.ForceClose, Target: "c1"},
		}}}
	res, err := Simulate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var faults []string
	var c2 histories.Type // how c2's acquire ended
	for _, e := range res.History {
		if e.Process == "nemesis" && e.Type == histories.Invoke {
			faults = append(faults, e.F+" "+histories.FaultOf(&e).Process)
		}
		if e.Process == "c2" && e.Type != histories.Invoke {
			c2 = e.Type
		}
	}
	if got := strings.Join(faults, ", "); got != "drop-reply c2" || c2 != histories.Info {
		var b bytes.Buffer
		histories.Write(&b, res.History)
		t.Fatalf("faults recorded: %q, want only c2's drop-reply:\n%s", got, b.String())
	}
}

// The same seed draws the same plans and runs them to the same histories
// (unshrunk: shrinking is bounded by the wall clock).
func TestSameSeedSameHistories(t *testing.T) {
	t.Parallel()
	run := func() []byte {
		out, err := prover.Search{Config: prover.Config{Subject: Config{Scope: prover.Scope{Mutant: "consul-release-ok"}, Backend: Etcd}}, Seed: 5, Plans: 300, Shrink: time.Nanosecond}.Run()
		if err != nil {
			t.Fatal(err)
		}
		if out.Found == nil {
			t.Fatal("nothing found")
		}
		var b bytes.Buffer
		out.Found.Plan.Write(&b)
		histories.Write(&b, out.Found.Result.History)
		return b.Bytes()
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatalf("two searches from one seed differ:\n%s\n%s", a, b)
	}
}

// Plans with lock-delay (the sessions created with a lock-delay of their
// TTL) run to the same trace and history, byte for byte, every time; and
// to the history the same plan has without it: in this recipe no session
// ever asks for a key another session held (a contender key is named
// after its own session; the lock key is written by check-and-set, which
// lock-delay does not look at), so the delays Consul sets, which the
// traces show, refuse nothing (docs/consul-semaphore.md, "Lock-delay").
func TestLockDelayPlansRepeat(t *testing.T) {
	t.Parallel()
	delayed, refused := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		c := Config{Scope: prover.Scope{Faults: []string{histories.Pause, histories.Kill, histories.RestartBroker}}, Backend: Consul, Persistent: true, LockDelay: true}
		p := c.Draw(rt).(*Plan)
		if !p.LockDelay {
			rt.Fatal("the plan has no lock_delay")
		}
		runs := make([][]byte, 2)
		for i := range runs {
			var b bytes.Buffer
			res, err := Simulate(p, &b)
			if err != nil {
				rt.Fatal(err)
			}
			histories.Write(&b, res.History)
			runs[i] = b.Bytes()
		}
		if !bytes.Equal(runs[0], runs[1]) {
			rt.Fatalf("two runs of one plan differ:\n%s\n%s", runs[0], runs[1])
		}
		if bytes.Contains(runs[0], []byte("lock-delayed")) {
			delayed++
		}
		if bytes.Contains(runs[0], []byte("refused: lock-delay")) {
			refused++
		}
		q := *p
		q.LockDelay = false
		with, err := Simulate(p, nil)
		if err != nil {
			rt.Fatal(err)
		}
		without, err := Simulate(&q, nil)
		if err != nil {
			rt.Fatal(err)
		}
		var a, b bytes.Buffer
		histories.Write(&a, with.History)
		histories.Write(&b, without.History)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			rt.Fatalf("lock-delay changed the history:\n%s\n%s", a.Bytes(), b.Bytes())
		}
	})
	t.Logf("%d plans set a lock-delay, %d had an acquire refused by one", delayed, refused)
	if delayed == 0 {
		t.Error("no plan set a lock-delay: the option did not reach the simulator")
	}
	if refused != 0 {
		t.Errorf("%d plans had an acquire refused by a lock-delay", refused)
	}
}
