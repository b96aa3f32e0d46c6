package consulsemprotocol_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process/processtest"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun/consulsemprotocol"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

var lockprover string

func TestMain(m *testing.M) { processtest.Main(m, &lockprover) }

// backends are the real servers an implementation runs on.
var backends = []string{consulsemrun.Consul, consulsemrun.Etcd}

// safety are the properties the drawn plans count: not available (nor
// recovers), which needs a machine that answers within an operation's
// timeout; a busy CI machine may not (as adapters/runners/consulsemrun's tests).
var safety = []string{lease.LeaseExclusive, lease.NoRevival, lease.Fencing, lease.Aware}

// onServer skips where this machine has no server of backend.
func onServer(t *testing.T, backend string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real servers")
	}
	if err := consulsemrun.Preflight(backend); errors.Is(err, consul.ErrNoConsul) || errors.Is(err, etcd.ErrNoEtcd) {
		t.Skipf("skipped: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

func serve(mutant string) string {
	cmd := lockprover + " serve-reference --kind consul-semaphore"
	if mutant != "" {
		cmd += " --mutant " + mutant
	}
	return cmd
}

// validate-impl passes the reference served over the protocol on each
// backend, and fails the mutants it can see, at the check that sees them.
func TestValidate(t *testing.T) {
	t.Parallel()
	mutants := map[string][]struct{ mutant, fails string }{
		consulsemrun.Consul: {
			{"consul-release-ok", "FAIL  c1's second release answers expired"},
			{"consul-monitor-forever", "FAIL  c1's verify 2.7s after its grant, unrenewed, answers held false"},
		},
		consulsemrun.Etcd: {
			{"consul-no-prune", "FAIL  c2's acquire once c1's session expired is granted"},
			{"consul-delete-fence", "FAIL  c2's acquire after the release is granted: its fence is above the earlier grants'"},
		},
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			onServer(t, backend)
			for _, c := range append([]struct{ mutant, fails string }{{"", ""}}, mutants[backend]...) {
				var out strings.Builder
				passed, err := consulsemprotocol.Validate(context.Background(), serve(c.mutant), time.Minute, backend, &out)
				switch {
				case err != nil:
					t.Fatalf("%q: %v", c.mutant, err)
				case c.fails == "" && (!passed || strings.Contains(out.String(), "FAIL")):
					t.Errorf("the reference fails validate-impl:\n%s", out.String())
				case c.fails != "" && (passed || !strings.Contains(out.String(), c.fails)):
					t.Errorf("mutant %s: passed %v, want %q in:\n%s", c.mutant, passed, c.fails, out.String())
				}
			}
		})
	}
}

// The reference served over the protocol holds on a few drawn plans on
// each real server, under every fault offered to an implementation (kill,
// pause, partition, restart-broker where the server keeps its sessions).
func TestReferenceThroughTheProtocol(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			onServer(t, backend)
			impl := consulsemprotocol.NewProcesses(serve(""))
			impl.InitTimeout = time.Minute
			defer impl.Stop()
			c := consulsemrun.Config{Scope: prover.Scope{Clients: 3, Ops: 6}, Target: backend, Impl: impl}
			out, err := prover.Search{Config: prover.Config{Subject: c, Properties: safety}, Seed: 1, Plans: 3, Shrink: time.Nanosecond}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if out.Found != nil {
				t.Fatalf("the reference through the protocol: %s", out.Found.Summary())
			}
			t.Logf("%s: %d plans, %v", c, out.Plans, out.Verdicts)
		})
	}
}

// runImpl runs testdata plan name of adapters/runners/consulsemrun on backend
// against command, the plan's mutant left out (an implementation is not
// the reference), up to tries times until its mutant's property fails;
// it says whether it did. A run that leaves nothing to judge by is run
// again.
func runImpl(t *testing.T, backend, name, command string, tries int) (caught bool, history string) {
	t.Helper()
	p, err := consulsemrun.ReadPlan(filepath.Join("..", "testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	m := consulsemrun.MutantNamed(p.Mutant)
	p.Backend, p.Mutant = backend, ""
	impl := consulsemprotocol.NewProcesses(command)
	impl.InitTimeout = time.Minute
	defer impl.Stop()
	judging := consulsemrun.Config{Target: backend}.Judging("")
	for run := 1; run <= tries; run++ {
		res, err := consulsemrun.RunImpl(context.Background(), p, nil, impl)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		histories.Write(&b, res.History)
		history = b.String()
		for _, v := range prover.Judge(res, model.Options{Family: []any{judging}}).Verdicts {
			if v.Property == m.Property && v.Status == verdict.Fail {
				t.Logf("run %d: caught by %s: %s", run, m.Property, v.Detail)
				return true, history
			}
		}
	}
	return false, history
}

// A mutant served over the protocol is caught as the reference's own run
// catches it: consul-monitor-forever (a holder whose session died answers
// held) by aware, on each backend, and consul-cas-to-put (two contenders
// granted the one slot) by lease-exclusive, where three processes contend
// at once (a race: tried a few times).
func TestMutantsThroughTheProtocol(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		backend, plan, mutant string
		tries                 int
	}{
		{consulsemrun.Consul, "real-monitor-forever", "consul-monitor-forever", 1},
		{consulsemrun.Etcd, "real-monitor-forever", "consul-monitor-forever", 1},
		{consulsemrun.Consul, "real-cas-to-put", "consul-cas-to-put", 4},
	} {
		t.Run(c.backend+"/"+c.mutant, func(t *testing.T) {
			t.Parallel()
			onServer(t, c.backend)
			if caught, h := runImpl(t, c.backend, c.plan, serve(c.mutant), c.tries); !caught {
				t.Fatalf("%s through the protocol: not caught in %d runs; the last:\n%s", c.mutant, c.tries, h)
			}
		})
	}
}

// python is the Python example's command (examples/python/consul_semaphore.py,
// the standard library only), with args; the test is skipped where this
// machine has no python3 or no Consul.
func python(t *testing.T, args string) string {
	t.Helper()
	onServer(t, consulsemrun.Consul)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("skipped: no python3: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "examples", "python", "consul_semaphore.py"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(py + " " + script + " " + args)
}

// The Python example passes validate-impl on Consul and holds on a few
// drawn plans there (kill, pause, partition faults).
func TestPythonExample(t *testing.T) {
	t.Parallel()
	cmd := python(t, "")
	var out strings.Builder
	passed, err := consulsemprotocol.Validate(context.Background(), cmd, time.Minute, consulsemrun.Consul, &out)
	if err != nil || !passed {
		t.Fatalf("validate-impl: passed %v, %v:\n%s", passed, err, out.String())
	}
	impl := consulsemprotocol.NewProcesses(cmd)
	impl.InitTimeout = time.Minute
	defer impl.Stop()
	c := consulsemrun.Config{Scope: prover.Scope{Clients: 3, Ops: 6}, Target: consulsemrun.Consul, Impl: impl}
	res, err := prover.Search{Config: prover.Config{Subject: c, Properties: safety}, Seed: 2, Plans: 3, Shrink: time.Nanosecond}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Found != nil {
		t.Fatalf("the Python example: %s", res.Found.Summary())
	}
	t.Logf("%s: %d plans, %v", c, res.Plans, res.Verdicts)
}

// The Python example's broken variant (--plain-put: the lock key written
// without its check-and-set) is caught by lease-exclusive, where three
// processes contend at once (a race: tried a few times); validate-impl,
// one request at a time, cannot see it.
func TestPythonExampleBrokenCaught(t *testing.T) {
	t.Parallel()
	cmd := python(t, "--plain-put")
	if caught, h := runImpl(t, consulsemrun.Consul, "real-cas-to-put", cmd, 4); !caught {
		t.Fatalf("--plain-put: not caught in 4 runs; the last:\n%s", h)
	}
}
