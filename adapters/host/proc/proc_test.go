package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Proc starts a process, starts it again after a crash (another pid),
// stops it for good, and refuses to start it after that; a process that
// exits before it is ready is reported with its log.
func TestProc(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	ctx := context.Background()
	p := &Proc{Name: "test: private sleeper", Log: filepath.Join(t.TempDir(), "log")}
	ready := func(context.Context) error { return nil }
	start := func(ctx context.Context) error { return p.Launch(ctx, sleep, []string{"60"}, "here", ready) }
	if err := start(ctx); err != nil {
		t.Fatal(err)
	}
	first := p.PID()
	if first == 0 {
		t.Fatal("no pid after Launch")
	}
	if err := p.Bounce(ctx, syscall.SIGKILL, time.Second, 10*time.Millisecond, start); err != nil {
		t.Fatal(err)
	}
	if second := p.PID(); second == 0 || second == first {
		t.Errorf("pid %d after a crash and a start, %d before", second, first)
	}
	// A paused server stops when told to, within its grace: a SIGTERM it
	// handles (as redis-server does) waits, pending, on a stopped process
	// until it runs again.
	h := &Proc{Name: "test: private handler", Log: filepath.Join(t.TempDir(), "log")}
	script := "trap 'exit 0' TERM; echo $((6*7)); while :; do sleep 0.05; done" // 42 only once it runs
	if err := h.Launch(ctx, "/bin/sh", []string{"-c", script}, "here", func(context.Context) error {
		if !strings.Contains(h.LogTail(), "42") {
			return errors.New("not up")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := h.Halt(syscall.SIGTERM, 3*time.Second); err != nil {
		t.Errorf("halting a paused process: %v", err)
	}
	if h.PID() != 0 {
		t.Errorf("pid %d after Halt", h.PID())
	}
	if err := h.Signal(syscall.SIGCONT); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("a signal to a halted process: %v", err)
	}
	h.Stop(time.Second)

	if err := start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.PID() != 0 {
		t.Errorf("pid %d after Stop", p.PID())
	}
	if err := start(ctx); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("a start after Stop: %v", err)
	}
	if !strings.Contains(p.LogTail(), "==> lockprover: starting "+sleep+" 60") {
		t.Errorf("log: %q", p.LogTail())
	}

	q := &Proc{Name: "test: private quitter", Log: filepath.Join(t.TempDir(), "log")}
	notYet := func(context.Context) error { return context.DeadlineExceeded }
	err = q.Launch(ctx, "/bin/sh", []string{"-c", "echo gone; exit 3"}, "here", notYet)
	if err == nil || !strings.Contains(err.Error(), "test: private quitter exited at start") || !strings.Contains(err.Error(), "gone") {
		t.Errorf("a process that exits at start: %v", err)
	}
}

// FreePorts gives distinct ports that can be listened on.
func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(3, true)
	if err != nil || len(ports) != 3 || ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
		t.Fatalf("ports %v, %v", ports, err)
	}
}

// A port FreePorts gave stays reserved until it is given back: neither
// this process nor another (a lockprover whose private server restarts
// while this one's is down) can reserve it meanwhile, and a Proc's Stop
// gives back its Hold.
func TestFreePortsReserved(t *testing.T) {
	if os.Getenv("PROC_TEST_RESERVE") != "" {
		var port int
		fmt.Sscan(os.Getenv("PROC_TEST_RESERVE"), &port)
		if reservePort(port) {
			fmt.Println("reserved")
		} else {
			fmt.Println("refused")
		}
		return
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("ports are reserved on Linux only")
	}
	ports, err := FreePorts(2, false)
	if err != nil {
		t.Fatal(err)
	}
	other := func(port int) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortsReserved$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PROC_TEST_RESERVE=%d", port))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("another process: %v\n%s", err, out)
		}
		return strings.Fields(string(out))[0]
	}
	if reservePort(ports[0]) {
		t.Errorf("port %d reserved twice by this process", ports[0])
	}
	if got := other(ports[0]); got != "refused" {
		t.Errorf("another process reserving port %d while this one holds it: %s", ports[0], got)
	}
	p := &Proc{Name: "nothing", Log: filepath.Join(t.TempDir(), "log"), Hold: ports}
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	for _, port := range ports {
		if got := other(port); got != "reserved" {
			t.Errorf("another process reserving port %d after Stop gave it back: %s", port, got)
		}
		if !reservePort(port) {
			t.Errorf("port %d not given back by Stop", port)
		}
	}
	ReleasePorts(ports...)
}

// FreePorts draws below the ephemeral range, where no outgoing connection
// takes a port between the choice and the server's bind.
func TestFreePortsBelowEphemeral(t *testing.T) {
	lo, hi := portRange()
	ports, err := FreePorts(20, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < lo || p > hi {
			t.Errorf("port %d outside %d-%d", p, lo, hi)
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first int
		fmt.Sscan(string(b), &first)
		if hi >= first {
			t.Errorf("range %d-%d reaches the ephemeral range from %d", lo, hi, first)
		}
	}
}

// Retry starts again after a lost port race, and only after one.
func TestRetry(t *testing.T) {
	calls := 0
	err := Retry(func() error {
		calls++
		if calls < 3 {
			return errors.New("redis exited at start\n# Could not create server TCP listening socket 127.0.0.1:41467: bind: Address already in use")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("after two lost races: %v, %d calls", err, calls)
	}
	calls = 0
	other := errors.New("etcd exited at start: permission denied")
	if err := Retry(func() error { calls++; return other }); err != other || calls != 1 {
		t.Errorf("another failure: %v, %d calls, want it at once", err, calls)
	}
	calls = 0
	if err := Retry(func() error { calls++; return errors.New("bind: address already in use") }); !InUse(err) || calls != 5 {
		t.Errorf("always in use: %v, %d calls, want 5", err, calls)
	}
}

// A server that answers on its port is ready only if it is the one
// Launch started: where another's server holds the port (two servers drew
// the same free port), the answer is the other's, and Launch fails with
// an error InUse knows, so that Retry draws another port, whether the
// process lost the bind and exited (as redis-server does) or lingers. The
// one that holds the port is ready.
func TestLaunchTellsAnotherServersAnswer(t *testing.T) {
	python := "/usr/bin/python3" // Debian's: a pyenv shim on $PATH costs seconds on a loaded machine
	if _, err := os.Stat(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Skip("no python3 to serve a port")
		}
	}
	if _, err := listens(os.Getpid(), 1); err != nil {
		t.Skipf("cannot tell who listens here: %v", err)
	}
	ports, err := FreePorts(2, false)
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	answers := func(port int) func(context.Context) error {
		return func(context.Context) error {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	serve := "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', int(sys.argv[1])))\ns.listen()\ntime.sleep(60)\n"
	// Each launch has a minute: beside a loaded suite the three shared
	// 20 s, and the last ran out before its python bound its port.
	launch := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	}
	for _, c := range []struct {
		name string
		bin  string
		args []string
	}{
		{"exits", python, []string{"-c", serve, fmt.Sprint(ports[0])}},
		{"lingers", "sleep", []string{"60"}},
	} {
		p := &Proc{Name: "test: server " + c.name, Log: filepath.Join(t.TempDir(), "log"), Port: ports[0]}
		ctx, cancel := launch()
		err := p.Launch(ctx, c.bin, c.args, "here", answers(ports[0]))
		cancel()
		if !InUse(err) {
			t.Errorf("%s: Launch on a port another answers on: %v, want an error InUse knows", c.name, err)
		}
		if p.PID() != 0 {
			t.Errorf("%s: pid %d left running after Launch failed", c.name, p.PID())
			p.Stop(time.Second)
		}
	}
	own := &Proc{Name: "test: server that binds", Log: filepath.Join(t.TempDir(), "log"), Port: ports[1]}
	ctx, cancel := launch()
	defer cancel()
	if err := own.Launch(ctx, python, []string{"-c", serve, fmt.Sprint(ports[1])}, "here", answers(ports[1])); err != nil {
		t.Errorf("Launch of the port's own server: %v", err)
	}
	own.Stop(time.Second)
}
