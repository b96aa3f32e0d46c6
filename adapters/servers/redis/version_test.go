package redis

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"
)

// rooted is server's version name from its Debian root, skipping the
// test where it cannot run here.
func rooted(t *testing.T, server, name string) versions.Version {
	t.Helper()
	quick.Skip(t, "a Debian root")
	if os.Geteuid() != 0 {
		t.Skip("runs from a Debian root: needs root")
	}
	v, err := versions.Lookup(server, name)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Made() {
		t.Skipf("%v: its root is not made here (lockprover servers --make %s-%s makes it, some minutes)", v, server, name)
	}
	return v
}

// A server of a version from a root is that version, and lives through
// every fault the Redis target strikes: a pause (SIGSTOP reaches the
// server, not its namespace's init), a crash and a restart that keeps
// what fsync kept, a clock jump, and a stop while paused (the init passes
// SIGTERM on to a server that must run to end, within the grace).
func TestValkeyFromARoot(t *testing.T) {
	v := rooted(t, "valkey", "9.1.2")
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(c, t.TempDir(), Options{Persistence: Always, Version: v})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	info := do(t, s, "INFO", "server").(string)
	if !strings.Contains(info, "valkey_version:9.1.2") {
		t.Fatalf("INFO server of valkey 9.1.2 says:\n%s", info)
	}
	do(t, s, "SET", "k", "v", "PX", "100000")

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(c, 300*time.Millisecond)
	_, err = s.Do(short, "PING")
	cancelShort()
	if err == nil {
		t.Fatal("a paused server answered PING")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	do(t, s, "PING")

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(c, 0); err != nil {
		t.Fatal(err)
	}
	if r := do(t, s, "GET", "k"); r != "v" {
		t.Fatalf("after a crash under fsync always, GET k = %v, want v", r)
	}
	if n, err := s.ClockJump(c, 200*time.Second); err != nil || n != 1 {
		t.Fatalf("clock jump: %d keys, %v; want 1", n, err)
	}
	if r := do(t, s, "EXISTS", "k"); r != int64(0) {
		t.Fatalf("a key of 100 s lives on after a jump of 200 s: EXISTS %v", r)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	init := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatalf("stopping a paused server: %v", err)
	}
	if alive(init) {
		t.Errorf("its init %d lives on after Stop", init)
	}
}
