package rabbitmqtest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
	"github.com/lockprover/lockprover/internal/quick"
	amqp "github.com/rabbitmq/amqp091-go"
)

// fakeTB records Skip and Fatal instead of acting on a real test. Skip and
// Fatal end the calling goroutine, as they do on a *testing.T.
type fakeTB struct {
	testing.TB // nil: calling anything not overridden panics
	skipped    bool
	failed     bool
	msg        string
	cleanups   []func()
}

func (f *fakeTB) Helper()             {}
func (f *fakeTB) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Skip(args ...any)    { f.skipped, f.msg = true, fmt.Sprint(args...); runtime.Goexit() }
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) SkipNow()      { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Skipped() bool { return f.skipped }
func (f *fakeTB) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) FailNow()     { f.failed = true; runtime.Goexit() }
func (f *fakeTB) Failed() bool { return f.failed }

// runFake runs resolve with a fake TB on its own goroutine (so that Skip and
// Fatal can end it) and returns the URL (if resolve returned) and the fake.
func runFake(lookupEnv func(string) (string, bool), probeAddr string, dockerOK func() bool, start func(testing.TB) (string, error)) (string, bool, *fakeTB) {
	f := &fakeTB{}
	var (
		u        string
		returned bool
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		u = resolve(f, lookupEnv, probeAddr, dockerOK, start)
		returned = true
	}()
	<-done
	return u, returned, f
}

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vals[k]
		return v, ok
	}
}

// counter is a local listener that records the peers it accepts.
type counter struct {
	addr  string
	mu    sync.Mutex
	peers []string
}

func listener(t *testing.T) *counter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c := &counter{addr: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.peers = append(c.peers, conn.RemoteAddr().String())
			c.mu.Unlock()
			conn.Close()
		}
	}()
	return c
}

// settle returns how many connections were made to the listener so far.
// Accepting is asynchronous, so it dials once more itself and waits until
// that connection is accepted: the accept queue is first in, first out, so
// every earlier connection has been recorded by then.
func (c *counter) settle(t *testing.T) int {
	t.Helper()
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	sentinel := conn.LocalAddr().String()
	conn.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		peers := slices.Clone(c.peers)
		c.mu.Unlock()
		if i := slices.Index(peers, sentinel); i >= 0 {
			return i
		}
	}
	t.Fatal("the listener never accepted the sentinel connection")
	return 0
}

// deadAddr is a local address no connection can reach: nothing can listen
// on port 0, so a dial is refused at once. A port freed by closing a
// listener would not do: another test running in parallel may be handed it.
const deadAddr = "127.0.0.1:0"

func TestResolve(t *testing.T) {

	noDocker := func() bool { return false }
	yesDocker := func() bool { return true }
	mustNotStart := func(testing.TB) (string, error) {
		t.Error("start called")
		return "", errors.New("must not start")
	}
	mustNotAskDocker := func() bool {
		t.Error("docker checked")
		return false
	}

	tests := []struct {
		name     string
		env      map[string]string
		live     bool // probe a listening address (else a closed one)
		dockerOK func() bool
		start    func(testing.TB) (string, error)

		wantURL     string
		wantSkip    bool
		wantFail    bool
		wantMsgs    []string
		wantAccepts int // connections the probe made to the listener
	}{
		{
			name:     "env wins and is not probed",
			env:      map[string]string{EnvVar: "amqp://u:p@broker.example:5673/vh"},
			live:     true,
			dockerOK: mustNotAskDocker,
			start:    mustNotStart,
			wantURL:  "amqp://u:p@broker.example:5673/vh",
		},
		{
			name:        "empty env counts as unset",
			env:         map[string]string{EnvVar: ""},
			live:        true,
			dockerOK:    mustNotAskDocker,
			start:       mustNotStart,
			wantURL:     "amqp://guest:guest@LIVE/",
			wantAccepts: 1,
		},
		{
			name:        "local broker answers",
			live:        true,
			dockerOK:    mustNotAskDocker,
			start:       mustNotStart,
			wantURL:     "amqp://guest:guest@LIVE/",
			wantAccepts: 1,
		},
		{
			name:     "no local broker, docker starts a container",
			dockerOK: yesDocker,
			start:    func(testing.TB) (string, error) { return "amqp://guest:guest@container:32768", nil },
			wantURL:  "amqp://guest:guest@container:32768",
		},
		{
			name:     "docker healthy but the container fails",
			dockerOK: yesDocker,
			start:    func(testing.TB) (string, error) { return "", errors.New("image pull failed") },
			wantFail: true,
			wantMsgs: []string{"image pull failed"},
		},
		{
			name:     "docker healthy but the image cannot be had: skip and say how",
			dockerOK: yesDocker,
			start: func(testing.TB) (string, error) {
				return "", fmt.Errorf("%w: pull rabbitmq:3.10; set %s", docker.ErrNoImage, ImageEnvVar)
			},
			wantSkip: true,
			wantMsgs: []string{"rabbitmq:3.10", ImageEnvVar},
		},
		{
			name:     "nothing: skip and say how",
			dockerOK: noDocker,
			start:    mustNotStart,
			wantSkip: true,
			wantMsgs: []string{EnvVar, "127.0.0.1:5672", "install Docker"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := listener(t)
			probeAddr := deadAddr
			if tt.live {
				probeAddr = l.addr
			}
			wantURL := strings.ReplaceAll(tt.wantURL, "LIVE", l.addr)
			u, returned, f := runFake(env(tt.env), probeAddr, tt.dockerOK, tt.start)
			if f.Skipped() != tt.wantSkip {
				t.Errorf("skipped = %v, want %v (msg %q)", f.Skipped(), tt.wantSkip, f.msg)
			}
			if f.Failed() != tt.wantFail {
				t.Errorf("failed = %v, want %v (msg %q)", f.Failed(), tt.wantFail, f.msg)
			}
			if returned != (!tt.wantSkip && !tt.wantFail) {
				t.Errorf("resolve returned = %v; Skip and Fatal must stop the test", returned)
			}
			if u != wantURL {
				t.Errorf("url = %q, want %q", u, wantURL)
			}
			for _, m := range tt.wantMsgs {
				if !strings.Contains(f.msg, m) {
					t.Errorf("message %q does not mention %q", f.msg, m)
				}
			}
			if got := l.settle(t); got != tt.wantAccepts {
				t.Errorf("probe connected %d times, want %d", got, tt.wantAccepts)
			}
		})
	}
}

// TestResolveSkipsRealTest checks the skip branch on a real *testing.T: the
// subtest must end skipped, not failed, and not return a URL.
func TestResolveSkipsRealTest(t *testing.T) {
	var (
		sub      *testing.T
		returned bool
	)
	ok := t.Run("skipped", func(st *testing.T) {
		sub = st
		resolve(st, env(nil), deadAddr, func() bool { return false }, func(testing.TB) (string, error) {
			t.Error("start called")
			return "", nil
		})
		returned = true
	})
	if !ok {
		t.Fatal("subtest failed; it should have been skipped")
	}
	if !sub.Skipped() {
		t.Fatal("subtest was not skipped")
	}
	if returned {
		t.Fatal("resolve returned after Skip")
	}
}

func TestProbe(t *testing.T) {
	live := listener(t).addr
	if !probe(live) {
		t.Errorf("probe(%s) = false for a listening address", live)
	}
	if probe(deadAddr) {
		t.Errorf("probe(%s) = true for an address nothing can listen on", deadAddr)
	}
}

// TestURL runs the real discovery: here it finds the local broker or skips.
func TestURL(t *testing.T) {
	u := URL(t)
	if u == "" {
		t.Fatal("URL returned an empty string")
	}
	t.Logf("broker: %s", u)
}

// TestWatchRemovesAfterExit runs the watcher against a process that exits
// and a docker CLI that records its arguments: the container is removed
// once the process has gone, not before.
func TestWatchRemovesAfterExit(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "args")
	fake := "#!/bin/sh\necho \"$@\" > " + record + ".tmp && mv " + record + ".tmp " + record + "\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	proc := exec.Command("sleep", "2")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { proc.Wait(); close(exited) }()
	if err := watch(proc.Process.Pid, "c0ffee"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatal("sleep 2 exited before the first check; the machine is too slow for this test")
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := os.Stat(record); err == nil {
		t.Fatal("the watcher removed the container while its process was alive")
	}
	<-exited
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(record)
		if err != nil {
			continue
		}
		if got, want := strings.TrimSpace(string(b)), "rm -f -v c0ffee"; got != want {
			t.Fatalf("the watcher ran docker %q, want docker %q", got, want)
		}
		return
	}
	t.Fatal("the watcher did not remove the container within 10 s of its process's exit")
}

// TestContainerIsTheBroker takes the container path with no broker URL
// given, and checks that the broker the URL reaches is the container's: it
// announces the container's node name as its cluster_name, and the
// container's address lies in $LOCKPROVER_DOCKER_SUBNET when that is set
// (.ci/run sets the private engine's bridge, 198.19.255.0/24). Skipped
// without Docker.
func TestContainerIsTheBroker(t *testing.T) {
	t.Setenv(EnvVar, "")
	t.Setenv(ContainerEnvVar, "1")
	u := URL(t)
	node, ip, ok := Node()
	if !ok {
		t.Fatal("URL returned without starting a container")
	}
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatalf("dial the container's broker %s: %v", u, err)
	}
	defer conn.Close()
	if got := fmt.Sprint(conn.Properties["cluster_name"]); got != node {
		t.Errorf("the broker at %s is %q, not the container's node %q", u, got, node)
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		t.Fatalf("container address %q: %v", ip, err)
	}
	if s := os.Getenv("LOCKPROVER_DOCKER_SUBNET"); s != "" {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			t.Fatalf("LOCKPROVER_DOCKER_SUBNET=%q: %v", s, err)
		}
		if !p.Contains(addr) {
			t.Errorf("container address %s is outside the engine's bridge %s", addr, p)
		}
	}
	t.Logf("broker %s: node %s at %s", u, node, addr)
}

// TestContainerRemovedAfterExit runs TestContainerIsTheBroker in a child
// test binary and checks that once the child has exited its container is
// gone: nothing is left behind, with or without Ryuk.
func TestContainerRemovedAfterExit(t *testing.T) {
	quick.Skip(t, "Docker")
	if !dockerAvailable() {
		t.Skip(containerSkipMessage)
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI: rabbitmqtest's watcher needs it to remove containers")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestContainerIsTheBroker$", "-test.v", "-test.count=1")
	child.Env = append(os.Environ(), ContainerEnvVar+"=1")
	out, err := child.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestContainerIsTheBroker") {
		t.Fatalf("child test: %v\n%s", err, out)
	}
	filter := fmt.Sprintf("label=%s=%d", label, child.Process.Pid)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ps, err := exec.Command(docker, "ps", "-aq", "--filter", filter).Output()
		if err != nil {
			t.Fatalf("docker ps --filter %s: %v", filter, err)
		}
		if len(strings.TrimSpace(string(ps))) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s (%s) still there 20 s after its test binary exited", strings.TrimSpace(string(ps)), filter)
		}
	}
}
