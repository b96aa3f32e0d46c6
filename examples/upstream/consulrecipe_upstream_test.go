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
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/backends/consul"
	"github.com/lockprover/lockprover/backends/etcd"
)

// recipeStep is one request of a script and the reply it must get: its
// type, and its reason, held or code where given.
type recipeStep struct {
	client string // "c1" or "c2"
	typ    string // acquire, refresh, verify, release; "sleep" waits
	token  string // for refresh, verify, release: "T1" or "T2", the tokens of the first and second grants
	limit  int    // acquire's, 1 if 0
	sleep  time.Duration
	want   string // the reply's type
	detail string // its reason, code, or held ("true", "false")
	fence  bool   // an acquire_ok must carry a fence
}

// recipeScript is every case's script: two clients of one prefix, limit
// 1, ttl 1 s; expiry is how long a lease may outlive its last renewal on
// the backend (Consul 2 TTLs, etcd one plus its sweep), release what a
// release of a lease its session lost answers, and fence whether grants
// carry fences.
func recipeScript(expiry time.Duration, release recipeStep, fence bool) []recipeStep {
	return []recipeStep{
		{client: "c1", typ: "acquire", want: "acquire_ok", fence: fence},
		{client: "c2", typ: "acquire", want: "acquire_fail", detail: "full"},
		{client: "c1", typ: "verify", token: "T1", want: "verify_ok", detail: "true"},
		{client: "c1", typ: "refresh", token: "T1", want: "refresh_ok"},
		{client: "c1", typ: "release", token: "T1", want: "release_ok"},
		{client: "c1", typ: "release", token: "T1", want: "release_fail", detail: "expired"},
		{client: "c1", typ: "refresh", token: "T1", want: "refresh_fail", detail: "expired"},
		{client: "c1", typ: "verify", token: "T1", want: "verify_ok", detail: "false"},
		{client: "c2", typ: "acquire", want: "acquire_ok", fence: fence},
		// c2 is never refreshed: its session ends.
		{typ: "sleep", sleep: expiry + 700*time.Millisecond},
		{client: "c2", typ: "verify", token: "T2", want: "verify_ok", detail: "false"},
		{client: "c1", typ: "acquire", want: "acquire_ok", fence: fence},
		release,
		{client: "c2", typ: "refresh", token: "T2", want: "refresh_fail", detail: "expired"},
	}
}

// The library's answers, case by case: consul/api's Semaphore.Release and
// Lock.Unlock answer nil for a hold whose session was invalidated (the
// protocol wants expired: no-revival), etcd's Mutex.Unlock too, but the
// session's Close then fails with ErrLeaseNotFound, which says it.
func TestConsulRecipeAdapters(t *testing.T) {
	releaseOK := recipeStep{client: "c2", typ: "release", token: "T2", want: "release_ok"}
	releaseExpired := recipeStep{client: "c2", typ: "release", token: "T2", want: "release_fail", detail: "expired"}
	for _, tc := range []struct {
		name, pkg, flags, backend string
		script                    []recipeStep
	}{
		{name: "semaphore", pkg: "./consulapi", backend: "consul", script: append(recipeScript(2*time.Second, releaseOK, false),
			recipeStep{client: "c2", typ: "acquire", limit: 2, want: "error", detail: "mismatch"})},
		{name: "lock", pkg: "./consulapi", flags: " --lock --lock-delay 1ms", backend: "consul", script: append(recipeScript(2*time.Second, releaseOK, true),
			recipeStep{client: "c2", typ: "acquire", limit: 2, want: "error", detail: "unsupported"})},
		{name: "etcd-mutex", pkg: "./etcdmutex", backend: "etcd", script: append(recipeScript(1500*time.Millisecond, releaseExpired, true),
			recipeStep{client: "c2", typ: "acquire", limit: 2, want: "error", detail: "unsupported"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := recipeServer(t, tc.backend)
			bin := buildModule(t, "consulrecipe", tc.pkg, "", "")
			runRecipeScript(t, bin+tc.flags, tc.backend, addr, tc.script)
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
	for _, c := range []string{"c1", "c2"} {
		p, err := l.Launch(ctx, c, process.Request{"type": "init", "client": c, "lock": "consul-semaphore",
			"name": name, "backend": backend, "addr": addr, "limit": 1, "ttl_ms": 1000})
		if err != nil {
			t.Fatalf("%s: init: %v", c, err)
		}
		defer p.Close()
		procs[c] = p
	}
	tokens := map[string]string{}
	grants := 0
	for i, s := range script {
		if s.typ == "sleep" {
			time.Sleep(s.sleep)
			continue
		}
		req := process.Request{"type": s.typ}
		if s.typ == "acquire" {
			req["limit"], req["ttl_ms"] = max(s.limit, 1), 1000
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
			if _, ok := r.Fields["fence"]; ok != s.fence {
				t.Errorf("%s: fence said %v, want %v: %v", what, ok, s.fence, r.Fields)
			}
		}
	}
}
