package debroot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cachedRoot returns a root already built on this machine (these tests
// never build one: no network), or skips. DEBROOT_TEST_RELEASE picks the
// release (default trixie).
func cachedRoot(t *testing.T) Root {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	rel := os.Getenv("DEBROOT_TEST_RELEASE")
	if rel == "" {
		rel = "trixie"
	}
	r, err := Open(rel)
	if err != nil {
		t.Skipf("no cached root: %v", err)
	}
	return r
}

// noMountsLeft fails if anything is mounted under the root in the host's view.
func noMountsLeft(t *testing.T, r Root) {
	t.Helper()
	if m := mountsUnder(r.Dir); len(m) > 0 {
		t.Fatalf("mounts left under %s: %v", r.Dir, m)
	}
}

func TestCommandRunsFromTheRoot(t *testing.T) {
	r := cachedRoot(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "in"), []byte("hello\n"), 0o644)
	cmd, err := r.Command(context.Background(), RunOptions{Data: data}, "/bin/sh", "-c",
		`cat /etc/debian_version; cat /lockprover/in; read line; echo "stdin $line"; echo out > /lockprover/out
		 touch /etc/x 2>/dev/null && echo rw || echo ro; echo "pwd $(pwd) home $HOME pid $$"; cat /etc/hosts | head -1`)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader("typed\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"hello", "stdin typed", "ro", "pwd /lockprover home /lockprover pid ", "127.0.0.1\tlocalhost"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(data, "out")); string(b) != "out\n" {
		t.Errorf("data dir not written through the bind: %q", b)
	}
	noMountsLeft(t, r)
}

// A run from a root names no nameserver (the root's resolv.conf, the
// host's, covered for the run), and the root's own file is unchanged; a
// build's apt has the root's own.
func TestCommandHasNoNameserver(t *testing.T) {
	r := cachedRoot(t)
	before, err := os.ReadFile(filepath.Join(r.Dir, "etc/resolv.conf"))
	if err != nil {
		t.Skipf("the root has no resolv.conf: %v", err)
	}
	cmd, err := r.Command(context.Background(), RunOptions{}, "/bin/sh", "-c", "cat /etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(string(out), "nameserver") || !strings.Contains(string(out), "lockprover") {
		t.Errorf("the run's resolv.conf:\n%s\nwant lockprover's, naming no nameserver", out)
	}
	if after, _ := os.ReadFile(filepath.Join(r.Dir, "etc/resolv.conf")); !bytes.Equal(after, before) {
		t.Errorf("the root's own resolv.conf changed: %q, was %q", after, before)
	}
	// a root's build runs apt with the root's own (the host's): without
	// it, a fresh machine's roots cannot fetch a package
	cmd, err = r.Command(context.Background(), RunOptions{resolve: true}, "/bin/sh", "-c", "cat /etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if out, err = cmd.CombinedOutput(); err != nil || !bytes.Equal(out, before) {
		t.Errorf("a build's resolv.conf: %q (%v), want the root's %q", out, err, before)
	}
	noMountsLeft(t, r)
}

func TestCommandAsAUserOfTheRoot(t *testing.T) {
	r := cachedRoot(t)
	data := filepath.Join(t.TempDir(), "d")
	if err := r.MkdirData(data, "redis"); err != nil {
		t.Fatal(err)
	}
	cmd, err := r.Command(context.Background(), RunOptions{Data: data, User: "redis"}, "/bin/sh", "-c", "id -un; touch /lockprover/f && echo wrote")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "redis\nwrote") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestCommandExitStatusAndContextStop(t *testing.T) {
	r := cachedRoot(t)
	cmd, _ := r.Command(context.Background(), RunOptions{}, "/bin/sh", "-c", "exit 7")
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("exit: %v", err)
	}
	// When ctx ends the program gets SIGTERM (it may clean up), and the
	// run ends. ctx ends once the program says its trap is set (a fixed
	// 1.5 s once ended, beside a loaded suite, before the mounts were
	// done and the program started: "Terminated", no cleanup).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd, _ = r.Command(ctx, RunOptions{}, "/bin/sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo trapped; sleep 60 & wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "trapped" {
		t.Fatalf("the program's first line: %q, want trapped", lines.Text())
	}
	t0 := time.Now()
	cancel()
	var out []string
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	cmd.Wait()
	if !slices.Contains(out, "got TERM") || time.Since(t0) > 10*time.Second {
		t.Fatalf("after %v: %q", time.Since(t0), out)
	}
	noMountsLeft(t, r)
}

func TestCommandInANetworkNamespace(t *testing.T) {
	r := cachedRoot(t)
	ns := fmt.Sprintf("dbrt-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "delete", ns).Run()
	cmd, err := r.Command(context.Background(), RunOptions{NetNS: ns}, "/bin/sh", "-c", "ls /sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "lo" {
		t.Fatalf("interfaces in %s: %v %q", ns, err, out)
	}
	noMountsLeft(t, r)
}

// TestSIGKILLOfTheLauncherLeavesNothing starts a helper process that runs a
// program from the root (which also starts a daemon of its own, in a new
// session, as epmd or pg_ctl would), SIGKILLs the helper, and checks that
// every process of the run is gone.
func TestSIGKILLOfTheLauncherLeavesNothing(t *testing.T) {
	if os.Getenv("DEBROOT_HELPER") == "run" {
		t.Skip("helper")
	}
	r := cachedRoot(t)
	tag := fmt.Sprintf("%d", 3000+os.Getpid()%1000)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperRun$")
	helper.Env = append(os.Environ(), "DEBROOT_HELPER=run", "DEBROOT_TAG="+tag, "DEBROOT_TEST_RELEASE="+r.Release)
	stdout, _ := helper.StdoutPipe()
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "started") {
	}
	var pids []int
	for deadline := time.Now().Add(2 * time.Minute); len(pids) < 2 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pids = pidsWithArg(r, "sleep", tag)
	}
	if len(pids) < 2 {
		helper.Process.Kill()
		t.Fatalf("the run's two sleeps not found (pids %v)", pids)
	}
	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left := pidsWithArg(r, "sleep", tag); len(left) == 0 {
			t.Logf("processes %v gone after SIGKILL of the launcher", pids)
			noMountsLeft(t, r)
			return
		}
	}
	t.Fatalf("left running after SIGKILL of the launcher: %v", pidsWithArg(r, "sleep", tag))
}

func TestHelperRun(t *testing.T) {
	if os.Getenv("DEBROOT_HELPER") != "run" {
		t.Skip("run by TestSIGKILLOfTheLauncherLeavesNothing")
	}
	r := cachedRoot(t)
	tag := os.Getenv("DEBROOT_TAG")
	cmd, err := r.Command(context.Background(), RunOptions{User: "nobody"}, "/bin/sh", "-c",
		"setsid sleep "+tag+" </dev/null >/dev/null 2>&1 & exec sleep "+tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	cmd.Wait()
}

// pidsWithArg lists host pids running from the root whose command line is name arg.
func pidsWithArg(r Root, name, arg string) []int {
	var out []int
	for _, pid := range processesRootedIn(r.Dir) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.Equal(b, []byte(name+"\x00"+arg+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

func TestStopTermsThenKills(t *testing.T) {
	r := cachedRoot(t)
	// Each program says when its trap is set, so that Stop's SIGTERM comes
	// after it however slow the machine is.
	started := func(script string) *exec.Cmd {
		t.Helper()
		cmd, _ := r.Command(context.Background(), RunOptions{}, "/bin/sh", "-c", script)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			t.Fatalf("the program said %q (%v), not ready", line, err)
		}
		return cmd
	}
	cmd := started("trap 'exit 3' TERM; echo ready; sleep 60 & wait")
	Stop(cmd, time.Minute)
	if c := cmd.ProcessState.ExitCode(); c != 3 {
		t.Fatalf("exit %d, want 3 (the program's own TERM handler)", c)
	}
	// A program that ignores SIGTERM is killed, with its whole run, after grace.
	cmd = started("trap '' TERM; echo ready; exec sleep 61")
	t0 := time.Now()
	Stop(cmd, 500*time.Millisecond)
	if d := time.Since(t0); d < 400*time.Millisecond {
		t.Fatalf("Stop returned after %v, before its grace of 500ms", d)
	}
	if left := pidsWithArg(r, "sleep", "61"); len(left) != 0 {
		t.Fatalf("left running: %v", left)
	}
}
