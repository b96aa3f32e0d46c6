// Package proctest checks, for the tests of a backend that starts private
// servers through adapters/host/proc, that such a server dies with the process
// that started it, even one killed without a chance to stop it.
package proctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Child is what the backend's TestMain calls first. When the environment
// variable env names a directory, the test binary is DiesWithParent's
// child: it starts a server there (start answers its PID), writes the PID
// to dir/pid and waits to be killed, never returning; otherwise Child
// returns at once.
func Child(env string, start func(dir string) (pid int, err error)) {
	dir := os.Getenv(env)
	if dir == "" {
		return
	}
	pid, err := start(dir)
	if err != nil {
		os.WriteFile(filepath.Join(dir, "error"), []byte(err.Error()), 0o644)
		os.Exit(1)
	}
	os.WriteFile(filepath.Join(dir, "pid.tmp"), []byte(strconv.Itoa(pid)), 0o644)
	os.Rename(filepath.Join(dir, "pid.tmp"), filepath.Join(dir, "pid"))
	select {}
}

// DiesWithParent runs the test binary again as Child (env set), waits up
// to a minute for its server (what names it in messages), kills the child
// with SIGKILL, and fails t unless the server is gone 10 s later.
func DiesWithParent(t *testing.T, env, what string) {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), env+"="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var pid int
	for end := time.Now().Add(60 * time.Second); pid == 0; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "error")); err == nil {
			t.Fatalf("child: %s", b)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			pid, _ = strconv.Atoi(string(b))
		}
		if time.Now().After(end) {
			t.Fatalf("the child started no %s within 60 s", what)
		}
	}
	child.Process.Kill()
	child.Wait()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !running(pid) {
			return
		}
		if time.Now().After(end) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s %d still running 10 s after its parent was killed", what, pid)
		}
	}
}

// running says whether process pid exists and is no zombie (an orphan
// that died may wait a while for a reaper).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: trust kill
	}
	// pid (comm) state ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 >= len(b) || b[i+2] != 'Z'
		}
	}
	return true
}
