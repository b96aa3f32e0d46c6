package etcd

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"
)

// rootedVersion is etcd's version name from a Debian root, or skips the
// test saying how to get it: it must be made here (its root), and the
// test run as root.
func rootedVersion(t *testing.T, name string) versions.Version {
	t.Helper()
	quick.Skip(t, "etcd from a Debian root")
	v, err := versions.Lookup("etcd", name)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skipf("%v runs from a Debian root: needs root", v)
	}
	if !v.Made() {
		t.Skipf("%v: its root is not made here (lockprover servers --make etcd-%s: minutes, once)", v, v.Name)
	}
	return v
}

// serverVersion is what the etcd at url says it is (/version).
func serverVersion(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Etcdserver string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Etcdserver
}

// etcd 3.5.30 from sid's root: it says it is 3.5.30, keeps a lease across
// a crash (its data under /lockprover, the server's own directory), and
// leaves nothing once stopped: no process, no mount of the root.
func TestVersionFromARoot(t *testing.T) {
	v := rootedVersion(t, "3.5.30")
	s := start(t, Options{Version: v})
	if got := serverVersion(t, s.URL()); got != "3.5.30" {
		t.Fatalf("the server says it is %s, want 3.5.30", got)
	}
	if s.Version() != v {
		t.Errorf("Version() = %v", s.Version())
	}
	c := client(t, s)
	g, err := c.Grant(ctx(t), 30)
	if err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if err := s.Crash(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d (the crashed run's) still exists", pid)
	}
	if left := ttl(t, c, g.ID); left < 0 {
		t.Fatal("the lease is gone after a crash: the data directory was not the server's own")
	}
	pid = s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still exists after Stop", pid)
	}
	if out, _ := exec.Command("mount").Output(); strings.Contains(string(out), "lockprover/debian-") {
		t.Errorf("a root is still mounted after Stop:\n%s", out)
	}
}

// A version that is not etcd's is refused before anything starts.
func TestVersionOfAnotherServer(t *testing.T) {
	v, _ := versions.Lookup("redis", "8.0.6")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Start(ctx, t.TempDir(), Options{Version: v}); err == nil || !strings.Contains(err.Error(), "not a version of etcd") {
		t.Fatalf("Start of redis 8.0.6: %v", err)
	}
}

// A cluster of etcd 3.5.30 from sid's root: each member in its host's
// network namespace, the three of them one cluster (one leader), each
// saying it is 3.5.30; the lab's cleanup checks that no namespace is
// left, and each member's run ends with it.
func TestClusterVersionFromARoot(t *testing.T) {
	v := rootedVersion(t, "3.5.30")
	_, c := startClusterOf(t, Options{Version: v})
	for _, m := range c.Members {
		if got := serverVersion(t, m.URL()); got != "3.5.30" {
			t.Errorf("%s says it is %s, want 3.5.30", m.Name, got)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.Agreed(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the members never agreed on a leader: %v", c.Agreed(context.Background()))
		}
		time.Sleep(100 * time.Millisecond)
	}
	pids := []int{}
	for _, m := range c.Members {
		pids = append(pids, m.PID())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d still exists after Stop", pid)
		}
	}
}

// $LOCKPROVER_ETCD_VERSION names the version of servers whose Options
// name none; one etcd does not have is refused, naming the variable.
func TestVersionFromTheEnvironment(t *testing.T) {
	t.Setenv("LOCKPROVER_ETCD_VERSION", "3.6.0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, t.TempDir(), Options{})
	if err == nil || !strings.Contains(err.Error(), "LOCKPROVER_ETCD_VERSION") || !strings.Contains(err.Error(), "3.5.30") {
		t.Fatalf("Start with $LOCKPROVER_ETCD_VERSION=3.6.0: %v, want an error naming the variable and the versions", err)
	}
	t.Setenv("LOCKPROVER_ETCD_VERSION", "3.5.16")
	if v, err := DefaultVersion(); err != nil || v.Name != "3.5.16" {
		t.Errorf("DefaultVersion = %v, %v", v, err)
	}
	t.Setenv("LOCKPROVER_ETCD_VERSION", "")
	if v, err := DefaultVersion(); err != nil || v.Name != "3.4.23" {
		t.Errorf("DefaultVersion without the variable = %v, %v", v, err)
	}
}
