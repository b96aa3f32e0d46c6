package consul

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// The default Consul is adapters/servers/versions' default, and the cache path
// Find looks at is where versions says its build lives.
func TestDefaultVersion(t *testing.T) {
	v, err := versions.Lookup("consul", "")
	if err != nil || v.Name != Version {
		t.Fatalf("versions' default consul is %v (%v), adapters/servers/consul's %s", v, err, Version)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	p := CachePath()
	if !strings.HasSuffix(p, "/lockprover/consul-v"+Version+"/consul") {
		t.Errorf("CachePath = %s", p)
	}
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
	if got, err := v.Binary(); err != nil || got != p {
		t.Errorf("versions' Binary = %q, %v; CachePath %s", got, err, p)
	}
}

// A version whose build is not in the cache cannot start, and says so
// both ways: no consul (tests skip on it), and not to be had until
// .ci/consul builds it (a command line's usage error).
func TestVersionNotBuilt(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	v, _ := versions.Lookup("consul", "1.20.2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, t.TempDir(), Options{Version: v})
	if !errors.Is(err, ErrNoConsul) || !errors.Is(err, debroot.ErrUnavailable) || !strings.Contains(err.Error(), ".ci/consul 1.20.2") {
		t.Fatalf("Start of consul 1.20.2, not built: %v; want ErrNoConsul and ErrUnavailable naming .ci/consul 1.20.2", err)
	}
	e, _ := versions.Lookup("etcd", "3.5.30")
	if _, err := Start(ctx, t.TempDir(), Options{Version: e}); err == nil || !strings.Contains(err.Error(), "not a version of Consul") {
		t.Fatalf("Start of etcd 3.5.30: %v", err)
	}
}

// The version named runs: lockprover's build of 1.16.3 (when built here),
// which the agent itself says it is.
func TestVersionRuns(t *testing.T) {
	v, _ := versions.Lookup("consul", "1.16.3")
	if !v.Made() {
		t.Skipf("%v is not built here (%s: about half an hour, once)", v, v.Build)
	}
	a := start(t, Options{Version: v})
	var self struct{ Config struct{ Version string } }
	if err := Call(ctx(t), http.DefaultClient, "GET", a.URL(), "/v1/agent/self", nil, &self); err != nil {
		t.Fatal(err)
	}
	if self.Config.Version != "1.16.3" || a.Version() != v {
		t.Fatalf("the agent says it is %q (Version() %v), want 1.16.3", self.Config.Version, a.Version())
	}
}
