package consulsemrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun/consulsemprotocol"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
)

// consulAPIAdapter builds examples/upstream/consulrecipe's consul/api
// adapter (its own module), or skips.
func consulAPIAdapter(t *testing.T) string {
	t.Helper()
	quick.Skip(t, "building consul/api's adapter and running it in processes")
	bin := filepath.Join(t.TempDir(), "cu-consulapi")
	cmd := exec.Command("go", "build", "-o", bin, "./consulapi")
	cmd.Dir = filepath.Join("..", "..", "..", "examples", "upstream", "consulrecipe")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("the consul/api adapter does not build here: %v\n%s", err, out)
	}
	return bin
}

// TestConsulAPIOnTheServedAgent: consul/api's Semaphore, unmodified
// behind its adapter, on the simulated agent served on the wire, fails
// no-revival on the plan that shows it on a real agent (docs/verdicts.md),
// and the plan run again with its log gives the same history; with no
// server on the machine.
func TestConsulAPIOnTheServedAgent(t *testing.T) {
	impl := consulsemprotocol.NewProcesses(consulAPIAdapter(t))
	defer impl.Stop()
	p, err := consulsemrun.ReadPlan(filepath.Join("..", "..", "..", "examples", "upstream", "plans", "consul-release-after-expiry.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := consulsemrun.SimulateImpl(context.Background(), p, impl, consulsemprotocol.Wire, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Wire["c1"]) == 0 {
		t.Fatalf("the run logged no step of c1: %v", p.Wire)
	}
	judged := prover.Judge(res, model.Options{Family: []any{consulsemrun.Config{}.Judging("")}})
	for _, v := range judged.Verdicts {
		if (v.Status == verdict.Fail) != (v.Property == "no-revival") {
			t.Errorf("%s: %v, want only no-revival to fail", v.Property, v.Status)
		}
	}
	again, err := consulsemrun.SimulateImpl(context.Background(), p, impl, consulsemprotocol.Wire, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.History, res.History) {
		t.Errorf("the replay's history differs:\n%v\n%v", again.History, res.History)
	}
	if strings.Contains(strings.Join(again.Evidence.Trace, "\n"), "replay:") {
		t.Errorf("the replay left its log: %v", again.Evidence.Trace)
	}
}

// TestRestartReachesTheMonitor: a restart of the served agent (persistent)
// resets consul/api's connections when it strikes, so the Semaphore's
// monitor, in its blocking query, closes the channel: the holder's verify
// after the agent is back says it no longer holds, as on a real agent,
// in two runs alike.
func TestRestartReachesTheMonitor(t *testing.T) {
	impl := consulsemprotocol.NewProcesses(consulAPIAdapter(t))
	defer impl.Stop()
	path := filepath.Join(t.TempDir(), "restart.json")
	plan := func() *consulsemrun.Plan {
		p, err := consulsemrun.ReadPlan(path)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.WriteFile(path, []byte(`{"version": 1, "kind": "consul-semaphore", "prefix": "lp", "backend": "consul", "persistent": true, "limit": 1, "ttl_ms": 1000,
			"clients": [[{"op": "acquire"}, {"op": "sleep", "ms": 1500}, {"op": "verify"}]],
			"nemesis": [{"at_ms": 500, "fault": "restart-broker", "for_ms": 500}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var first []string
	for run := range 2 {
		res, err := consulsemrun.SimulateImpl(context.Background(), plan(), impl, consulsemprotocol.Wire, nil)
		if err != nil {
			t.Fatal(err)
		}
		var h []string
		for _, e := range res.History {
			if e.F == "verify" && e.Type == "ok" && !strings.Contains(fmtValue(e.Value), "false") {
				t.Errorf("run %d: the holder's verify after the restart: %s", run, fmtValue(e.Value))
			}
			h = append(h, fmt.Sprintf("%d %s %s %s", e.Time, e.Process, e.Type, e.F))
		}
		if run == 1 && !reflect.DeepEqual(h, first) {
			t.Errorf("the second run's history differs:\n%v\n%v", h, first)
		}
		first = h
	}
}

func fmtValue(v any) string { b, _ := json.Marshal(v); return string(b) }

// An implementation cannot run on the simulated etcd: refused, naming
// what to do.
func TestServedEtcdRefused(t *testing.T) {
	p := &consulsemrun.Plan{Version: consulsemrun.PlanVersion, Kind: consulsemrun.Kind, Prefix: "lp", Backend: consulsemrun.Etcd, Limit: 1, TTLMs: 1000}
	_, err := consulsemrun.SimulateImpl(context.Background(), p, consulsemprotocol.NewProcesses("true"), consulsemprotocol.Wire, nil)
	if err == nil || !strings.Contains(err.Error(), "--target etcd") {
		t.Errorf("an implementation on the simulated etcd: %v, want a refusal naming --target etcd", err)
	}
}
