package upstream_test

// The adapters of examples/upstream/consulrecipe (consul/api's Semaphore
// and Lock, etcd's concurrency.Mutex), built from their own module and
// spoken to over the process protocol on private servers (a Consul -dev
// agent, an etcd), so that they cannot rot and their verdicts
// (docs/verdicts.md) stay shown: each script below says what every reply
// must be, and where the library answers what the protocol forbids (a
// release of a lease its session lost answered release_ok), the script
// asserts exactly that answer, so that the test fails if the verdict
// changes. It skips, saying why, without the module proxy, consul or
// etcd.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun/consulsemprotocol"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// recipeStep is one request of a script and the reply it must get: its
// type, and its reason, held or code where given.
type recipeStep struct {
	client string // "c1" or "c2"
	typ    string // acquire, refresh, verify, release; "sleep" waits; "partition" holds the bytes of client's proxy both ways
	token  string // for refresh, verify, release: "T1" or "T2", the tokens of the first and second grants
	sleep  time.Duration
	want   string // the reply's type
	detail string // its reason, code, or held ("true", "false")
}

// validateRecipe runs validate-impl --kind consul-semaphore --backend
// backend on command and returns its output; it skips without the
// server.
func validateRecipe(t *testing.T, command, backend string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out strings.Builder
	_, err := consulsemprotocol.Validate(ctx, command, time.Minute, backend, &out)
	if errors.Is(err, consul.ErrNoConsul) || errors.Is(err, etcd.ErrNoEtcd) {
		t.Skipf("needs %s: %v", backend, err)
	}
	if err != nil {
		t.Fatalf("validate-impl: %v", err)
	}
	t.Logf("validate-impl --kind consul-semaphore --backend %s --impl %q:\n%s", backend, command, out.String())
	return out.String()
}

// The libraries fail exactly these checks (validate-impl releases no
// lease after its expiry: TestConsulRecipeReleaseAfterExpiry does). The
// Lock and etcd's Mutex are mutexes, and
// answer a limit of 2 unsupported where the check wants the lock key's
// mismatch (not judged: they cannot express a limit). The Lock's
// sessions, left with Consul's default lock-delay (15 s, as the library
// leaves it), keep the key from every contender for 15 s after one
// expires: the check that the slot of an expired session is free again
// fails (by design of lock-delay; --lock-delay 1ms passes it). etcd's Unlock
// answers nil too, but the session's Close then fails with
// ErrLeaseNotFound, which says it; its Orphan stops the session's own
// KeepAlive, without which (--keepalive) the lease outlives its
// refreshes.
func TestConsulRecipeAdapters(t *testing.T) {
	const (
		mismatch = "c2's acquire with limit 2, the lock key saying 1, is a definite mismatch"
	)
	for _, tc := range []struct {
		name, pkg, flags, backend string
		want                      []string
	}{
		{name: "semaphore", pkg: "./consulapi", backend: "consul"},
		{name: "lock", pkg: "./consulapi", flags: " --lock --lock-delay 1ms", backend: "consul", want: []string{mismatch}},
		{name: "lock-default-lock-delay", pkg: "./consulapi", flags: " --lock", backend: "consul", want: []string{mismatch,
			"c2's acquire once c1's session expired is granted (its dead holder pruned)"}},
		{name: "etcd-mutex", pkg: "./etcdmutex", backend: "etcd", want: []string{mismatch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := buildModule(t, "consulrecipe", tc.pkg, "", "")
			wantFailures(t, validateRecipe(t, bin+tc.flags, tc.backend), tc.want...)
		})
	}
}

// A release of a lease whose session expired: consul/api's
// Semaphore.Release and Lock.Unlock answer nil (their record says held;
// Release takes a holder no longer alive out of the lock key, Unlock's
// ?release answers false, ignored), so the adapter answers release_ok
// where the protocol wants expired (no-revival: a defect). etcd's
// Mutex.Unlock answers nil too, but the session's Close then fails with
// ErrLeaseNotFound, which the adapter answers expired.
func TestConsulRecipeReleaseAfterExpiry(t *testing.T) {
	script := func(backend, release, detail string) []recipeStep {
		expiry := 2 * time.Second // Consul: 2 TTLs
		if backend == "etcd" {
			expiry = 1500 * time.Millisecond // one TTL and the sweep
		}
		return []recipeStep{
			{client: "c1", typ: "acquire", want: "acquire_ok"},
			{typ: "sleep", sleep: expiry + 700*time.Millisecond},
			{client: "c2", typ: "acquire", want: "acquire_ok"},
			{client: "c1", typ: "release", token: "T1", want: release, detail: detail},
			{client: "c1", typ: "refresh", token: "T1", want: "refresh_fail", detail: "expired"},
		}
	}
	for _, tc := range []struct {
		name, pkg, flags, backend, release, detail string
	}{
		{name: "semaphore", pkg: "./consulapi", backend: "consul", release: "release_ok"},
		{name: "lock", pkg: "./consulapi", flags: " --lock --lock-delay 1ms", backend: "consul", release: "release_ok"},
		{name: "etcd-mutex", pkg: "./etcdmutex", backend: "etcd", release: "release_fail", detail: "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := recipeServer(t, tc.backend)
			bin := buildModule(t, "consulrecipe", tc.pkg, "", "")
			runRecipeScript(t, bin+tc.flags, tc.backend, addr, script(tc.backend, tc.release, tc.detail))
		})
	}
}

// TestConsulRecipeAdaptersPartitioned: c1's proxy holds every byte from just after its grant
// while it sleeps past its session's life, and c1 then verifies; c2's
// acquire shows that the session is gone. consul/api's Semaphore and Lock
// answer held: their monitor of the hold sits in a blocking query that
// never returns, and nothing else closes the channel (Consul's #18271),
// so verify says held for a lease that no longer is (aware).
func TestConsulRecipeAdaptersPartitioned(t *testing.T) {
	script := []recipeStep{
		{client: "c1", typ: "acquire", want: "acquire_ok"},
		{client: "c1", typ: "partition"},
		{typ: "sleep", sleep: 2*time.Second + 700*time.Millisecond},
		{client: "c2", typ: "acquire", want: "acquire_ok"},
		{client: "c1", typ: "verify", token: "T1", want: "verify_ok", detail: "true"},
	}
	for _, tc := range []struct{ name, flags string }{{name: "semaphore"}, {name: "lock", flags: " --lock --lock-delay 1ms"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := recipeServer(t, "consul")
			bin := buildModule(t, "consulrecipe", "./consulapi", "", "")
			runRecipeScript(t, bin+tc.flags, "consul", addr, script)
		})
	}
}

// recipeServer starts a private server of backend for the test's life
// and returns its address; it skips without one.
func recipeServer(t *testing.T, backend string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if backend == "consul" {
		a, stop, err := consul.StartTemp(ctx, consul.Options{})
		if errors.Is(err, consul.ErrNoConsul) {
			t.Skipf("needs consul: %v", err)
		}
		if err != nil {
			t.Fatalf("starting a consul agent: %v", err)
		}
		t.Cleanup(stop)
		return a.Addr()
	}
	s, stop, err := etcd.StartTemp(ctx, etcd.Options{})
	if errors.Is(err, etcd.ErrNoEtcd) {
		t.Skipf("needs etcd: %v", err)
	}
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(stop)
	return s.Addr()
}

// runRecipeScript runs script with two processes of command, clients c1
// and c2 of a prefix of their own on the server at addr.
func runRecipeScript(t *testing.T, command, backend, addr string, script []recipeStep) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := &process.Launcher{Command: command, InitTimeout: time.Minute}
	name := fmt.Sprintf("lp-%s-%d", backend, time.Now().UnixNano()%1e9)
	procs := map[string]*process.Client{}
	proxies := map[string]*faultnet.Proxy{}
	for _, c := range []string{"c1", "c2"} {
		px, err := faultnet.Listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		proxies[c] = px
		p, err := l.Launch(ctx, c, process.Request{"type": "init", "client": c, "lock": "consul-semaphore",
			"name": name, "backend": backend, "addr": px.Addr(), "limit": 1, "ttl_ms": 1000})
		if err != nil {
			t.Fatalf("%s: init: %v", c, err)
		}
		defer p.Close()
		procs[c] = p
	}
	tokens := map[string]string{}
	grants := 0
	for i, s := range script {
		switch s.typ {
		case "sleep":
			time.Sleep(s.sleep)
			continue
		case "partition":
			proxies[s.client].Partition()
			continue
		}
		req := process.Request{"type": s.typ}
		if s.typ == "acquire" {
			req["limit"], req["ttl_ms"] = 1, 1000
		} else {
			req["token"] = tokens[s.token]
		}
		what := fmt.Sprintf("step %d, %s %s %s", i+1, s.client, s.typ, s.token)
		r, err := procs[s.client].Call(ctx, 30*time.Second, req, "acquire_ok", "acquire_fail", "refresh_ok", "refresh_fail", "verify_ok", "release_ok", "release_fail")
		got, detail := r.Type, ""
		if e := (*process.ErrorReply)(nil); errors.As(err, &e) {
			got, detail = "error", e.Code
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, f := range []string{"reason", "held"} {
			if v, ok := r.Fields[f]; ok {
				detail = strings.Trim(string(v), `"`)
			}
		}
		if got != s.want || s.detail != "" && detail != s.detail {
			t.Errorf("%s: answered %s %s, want %s %s", what, got, detail, s.want, s.detail)
		}
		if got == "acquire_ok" {
			grants++
			var token string
			json.Unmarshal(r.Fields["token"], &token)
			tokens[fmt.Sprintf("T%d", grants)] = token
		}
	}
}

// python-etcd3's Lock (Debian python3-etcd3 0.12.0), a mutex on etcd,
// passes every check but the limit mismatch (a mutex refuses a limit of 2
// as unsupported), as etcd's concurrency.Mutex does.
func TestPythonEtcd3LockAdapter(t *testing.T) {
	t.Parallel()
	if err := exec.Command("/usr/bin/python3", "-c", "import etcd3").Run(); err != nil {
		t.Skipf("needs Debian's python3 with python3-etcd3 (apt-get install python3-etcd3): %v", err)
	}
	out := validateRecipe(t, "/usr/bin/python3 python_etcd3_lock.py", "etcd")
	wantFailures(t, out, "c2's acquire with limit 2, the lock key saying 1, is a definite mismatch")
}

// Jepsen's etcd 3.4.3 finding, an acquirer whose lease expires while it
// waits, on Debian's etcd with client v3.5.21: with --wait, c2's Lock
// waits for c1 (who holds 3.6 s, refreshing) on a lease of 2 s nothing
// renews, and answers ErrSessionExpired once c1 lets go (the adapter's
// definite session-expired), never a grant: every property holds
// (examples/upstream/plans/etcd-lease-expires-while-waiting.json).
func TestEtcdMutexLeaseExpiresWhileWaiting(t *testing.T) {
	bin := etcdMutex(t)
	res := runEtcdMutex(t, bin+" --wait 8s", "plans/etcd-lease-expires-while-waiting.json")
	var c2 string
	for _, e := range res.History {
		if e.Process == "c2" && e.F == "acquire" && e.Type != "invoke" {
			c2 = fmt.Sprintf("%s %s", e.Type, e.Error)
		}
	}
	if !strings.HasPrefix(c2, "fail session-expired") {
		t.Errorf("c2's waiting acquire: %q, want a definite fail session-expired", c2)
	}
	c := consulsemrun.Config{Backend: "etcd", Target: "etcd"}
	for _, v := range lease.Check(res.History, model.Options{Family: []any{c.Judging("")}}) {
		if v.Status == verdict.Fail {
			t.Errorf("%s fails: %s", v.Property, v.Detail)
		}
	}
}

// etcd's Mutex judged with its session's own KeepAlive left running
// (--keepalive): the lease outlives what the history's refreshes give it,
// and a refresh long after the lease's certain end answers ok, so
// no-revival fails, the artefact the verdicts report names; ended as the
// adapter ends it by default (Orphan), no-revival holds on the same plan
// (examples/upstream/plans/etcd-mutex-keepalive.json, drawn with --seed 58
// on etcd 3.5.30).
func TestEtcdMutexKeepAlive(t *testing.T) {
	bin := etcdMutex(t)
	c := consulsemrun.Config{Backend: "etcd", Target: "etcd"}
	for _, tc := range []struct {
		flags string
		fails bool
	}{{" --keepalive", true}, {"", false}} {
		t.Run("flags="+tc.flags, func(t *testing.T) {
			res := runEtcdMutex(t, bin+tc.flags, "plans/etcd-mutex-keepalive.json")
			failed := false
			for _, v := range lease.Check(res.History, model.Options{Family: []any{c.Judging("")}}) {
				if v.Property == lease.NoRevival && v.Status == verdict.Fail {
					failed = true
					t.Logf("no-revival: %s", v.Detail)
				}
			}
			if failed != tc.fails {
				t.Errorf("no-revival failed: %v, want %v", failed, tc.fails)
			}
		})
	}
}

// etcdMutex builds the etcd Mutex's adapter, or skips the test where this
// machine has no etcd.
func etcdMutex(t *testing.T) string {
	t.Helper()
	if _, err := etcd.Find(); err != nil {
		t.Skipf("needs etcd: %v", err)
	}
	return buildModule(t, "consulrecipe", "./etcdmutex", "", "")
}

// runEtcdMutex runs the plan at path (under examples/upstream) on a
// private etcd against command's processes.
func runEtcdMutex(t *testing.T, command, path string) *prover.Result {
	t.Helper()
	p, err := consulsemrun.ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	impl := consulsemprotocol.NewProcesses(command)
	defer impl.Stop()
	res, err := consulsemrun.RunImpl(ctx, p, nil, impl)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
