package consulsemrun

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// A force-close that strikes c1's granting write once the server has
// applied it (testdata/sim-force-close-grant.json: c1 moves first at each
// choice, so that its write reaches the server at 3 ms, when the
// force-close strikes) is recorded before c1's acquire ends, which ends
// unknown (consulsem.ErrUnknownOutcome). The server kept the write and
// c1's session: c2 finds the semaphore full, and takes the slot once the
// session has expired. Every property holds, available by the
// force-close's excuse. On the simulated Consul and etcd.
func TestForceCloseStrikesGrant(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{Consul, Etcd} {
		t.Run(backend, func(t *testing.T) {
			p, err := ReadPlan(filepath.Join("testdata", "sim-force-close-grant.json"))
			if err != nil {
				t.Fatal(err)
			}
			p.Backend = backend
			var trace bytes.Buffer
			res, err := Simulate(p, &trace)
			if err != nil {
				t.Fatal(err)
			}
			var h strings.Builder
			histories.Write(&h, res.History)
			tr := trace.String()
			if w, c := strings.Index(tr, "c1 -> server: write lp/.lock"), strings.Index(tr, "server: closes c1's connection"); w < 0 || c < w {
				t.Fatalf("c1's granting write did not reach the server before the force-close:\n%s", tr)
			}
			fc, c1 := -1, histories.Event{Index: -1}
			var c2 []string
			for _, e := range res.History {
				switch {
				case e.Process == "nemesis" && e.F == histories.ForceClose && e.Type == histories.Invoke && fc < 0:
					fc = e.Index
				case e.Process == "c1" && e.F == histories.Acquire && e.Type != histories.Invoke:
					c1 = e
				case e.Process == "c2" && e.F == histories.Acquire && e.Type != histories.Invoke:
					s := string(e.Type)
					if lease.ValueOf(&e) != nil && lease.ValueOf(&e).Reason != "" {
						s += " " + lease.ValueOf(&e).Reason
					}
					c2 = append(c2, s)
				}
			}
			if fc < 0 || c1.Type != histories.Info || c1.Index < fc || !strings.Contains(c1.Error, "the grant got no answer") {
				t.Errorf("want force-close c1 recorded, then c1's acquire unknown (the grant got no answer); got force-close #%d, c1's acquire %s %q:\n%s", fc, c1.Type, c1.Error, h.String())
			}
			if got := strings.Join(c2, ", "); got != "fail full, ok" {
				t.Errorf("c2's acquires: %s, want fail full (c1's write and session live on), ok:\n%s", got, h.String())
			}
			excused := false
			for _, v := range prover.Judge(res, model.Options{Family: []any{Config{Backend: backend}.Judging("")}}).Verdicts {
				if v.Status == verdict.Fail {
					t.Errorf("%s: %s\n%s", v.Property, v.Detail, h.String())
				}
				for _, x := range v.Excuses {
					excused = excused || v.Property == lease.Available && strings.Contains(x.Why, "excused by force-close c1")
				}
			}
			if !excused {
				t.Errorf("available was not excused by the force-close:\n%s", h.String())
			}
		})
	}
}

// Plans that draw only force-closes hold on the simulated Consul and
// etcd, and some of them strike a call in flight: available passes there
// by the force-close's excuse for the unknown outcome.
func TestForceCloseDrawnHold(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{Consul, Etcd} {
		c := Config{Scope: prover.Scope{Faults: []string{histories.ForceClose}}, Backend: backend}
		out := holds(t, c, 300)
		if out.Excused[lease.Available] == 0 || !strings.Contains(out.FirstExcuse[lease.Available], "force-close") {
			t.Errorf("%s: no force-close excused an unknown outcome in %d plans (%d excused, the first: %q)",
				c, out.Plans, out.Excused[lease.Available], out.FirstExcuse[lease.Available])
		}
		t.Logf("%s: %d plans, available excused on %d: %s", c, out.Plans, out.Excused[lease.Available], out.FirstExcuse[lease.Available])
	}
}

// beforeForceClose are the faults plans drew by default before
// force-close was offered.
var beforeForceClose = []string{histories.Kill, histories.Pause, histories.Partition, histories.DropReply, histories.RestartBroker}

// Force-closes are drawn after the rest of a plan: a seed draws, with
// every fault, the plan it drew before force-close was offered and
// force-closes after it, if any; one that draws none gives that plan
// exactly (so its history too). Some seeds draw force-closes, and never
// more faults than MaxFaults in all.
func TestForceClosesDrawnLast(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{{Backend: Consul}, {Backend: Consul, Persistent: true}, {Backend: Etcd}} {
		old := c
		old.Faults = beforeForceClose
		drawn := 0
		for seed := range 1000 {
			p := rapid.Custom(c.Draw).Example(seed).(*Plan)
			was := rapid.Custom(old.Draw).Example(seed).(*Plan)
			if len(p.Nemesis) > c.withDefaults().MaxFaults {
				t.Fatalf("%s, seed %d: %d faults, more than %d", c, seed, len(p.Nemesis), c.withDefaults().MaxFaults)
			}
			q := *p
			q.Nemesis = slices.DeleteFunc(slices.Clone(p.Nemesis), func(f Fault) bool { return f.Fault == histories.ForceClose })
			if len(q.Nemesis) < len(p.Nemesis) {
				drawn++
				if !slices.Equal(q.Nemesis, p.Nemesis[:len(q.Nemesis)]) {
					t.Fatalf("%s, seed %d: force-closes drawn among the other faults: %v", c, seed, p.Nemesis)
				}
			}
			a, _ := json.Marshal(&q)
			b, _ := json.Marshal(was)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s, seed %d: the plan but its force-closes differs from the one drawn without force-close:\n%s\n%s", c, seed, a, b)
			}
		}
		t.Logf("%s: %d of 1000 seeds draw force-closes", c, drawn)
		if drawn == 0 {
			t.Errorf("%s: no seed of 1000 drew a force-close", c)
		}
	}
}

// A real place's force-close closes the process's current connections
// through its proxy, both ways, and says so; the proxy keeps listening,
// so that the client connects again; with no connection open it closes
// none and says so.
func TestRealWorldForceClose(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // the server: echoes each connection
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					c.Write(buf[:n])
				}
			}()
		}
	}()
	px, err := faultnet.Listen(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	w := &realPlace{procs: map[string]*realProc{"c1": {pxs: []*faultnet.Proxy{px}}}}
	if w.forceClose("c1") {
		t.Error("a force-close of a process with no connection said it closed one")
	}
	echo := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 1))
		return err
	}
	c, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(c); err != nil {
		t.Fatal(err)
	}
	if !w.forceClose("c1") {
		t.Error("a force-close of a process with a connection open said it closed none")
	}
	if err := echo(c); err == nil {
		t.Error("the connection still answers after the force-close")
	}
	again, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatalf("the proxy takes no new connection after a force-close: %v", err)
	}
	defer again.Close()
	if err := echo(again); err != nil {
		t.Errorf("a new connection after the force-close: %v", err)
	}
	if w.forceClose("nobody") {
		t.Error("a force-close of no process said it closed a connection")
	}
}

// On each real server, a force-close of a client between its calls
// closes the connection its client keeps open (Consul's HTTP keep-alive,
// etcd's gRPC connection), and is recorded; the client connects again
// through its proxy at its next call, which answers (c1's refresh, c2's
// second acquire); nothing is left behind, and every safety property
// holds. A run where a call the script needs went unknown or was refused
// (a machine too slow) is said and run again, up to three runs.
func TestRealForceClose(t *testing.T) {
	t.Parallel()
	for _, target := range realTargets {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			onReal(t, target)
			p := &Plan{Version: PlanVersion, Kind: Kind, Prefix: "lp", Backend: target, Limit: 1, TTLMs: 2000,
				Clients: [][]Step{{{Op: histories.Acquire}, {Op: Sleep, Ms: 800}, {Op: histories.Refresh}, {Op: Sleep, Ms: 800}, {Op: histories.Release}},
					{{Op: Sleep, Ms: 100}, {Op: histories.Acquire}, {Op: Sleep, Ms: 2500}, {Op: histories.Acquire}, {Op: histories.Release}}},
				Faulted: leaserun.Faulted[Fault]{Nemesis: []Fault{
					{At: 400, Fault: histories.ForceClose, Target: "c1"},  // c1 holds, asleep
					{At: 1000, Fault: histories.ForceClose, Target: "c2"}, // c2 refused, asleep
				}}}
			const want = "force-close c1, force-close c2"
			for run := 1; ; run++ {
				res, err := RunReal(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				histories.Write(&b, res.History)
				var struck, outcomes []string
				for _, e := range res.History {
					switch {
					case e.Process == "nemesis" && e.Type == histories.Invoke:
						struck = append(struck, e.F+" "+histories.FaultOf(&e).Process)
					case strings.HasPrefix(e.Process, "c") && e.Type != histories.Invoke:
						outcomes = append(outcomes, e.Process+" "+e.F+" "+string(e.Type))
					}
				}
				got := strings.Join(outcomes, ", ")
				const script = "c1 acquire ok, c2 acquire fail, c1 refresh ok, c1 release ok, c2 acquire ok, c2 release ok"
				if got != script && run < 3 {
					t.Logf("run %d: off its script (%s: a machine too slow); running again\n%s", run, got, b.String())
					continue
				}
				if s := strings.Join(struck, ", "); s != want {
					t.Errorf("faults recorded: %s, want %s\n%s", s, want, b.String())
				}
				if got != script {
					t.Errorf("outcomes %s, want %s: the clients did not connect again\n%s", got, script, b.String())
				}
				if len(res.Evidence.Problems) > 0 {
					t.Errorf("problems: %v", res.Evidence.Problems)
				}
				for _, v := range prover.Judge(res, model.Options{Family: []any{Config{Target: target}.Judging("")}}).Verdicts {
					if v.Status == verdict.Fail && slices.Contains(safety, v.Property) {
						t.Errorf("%s: %s\n%s", v.Property, v.Detail, b.String())
					}
				}
				return
			}
		})
	}
}
