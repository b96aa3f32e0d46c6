package etcd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// childEnv, when set, makes the test binary a child that starts an etcd
// in the directory it names, writes the server's PID to dir/pid and waits
// to be killed (TestMain runs it).
const childEnv = "LOCKPROVER_ETCD_TEST_CHILD"

func runChild(dir string) {
	a, err := Start(context.Background(), dir, Options{})
	if err != nil {
		os.WriteFile(filepath.Join(dir, "error"), []byte(err.Error()), 0o644)
		os.Exit(1)
	}
	os.WriteFile(filepath.Join(dir, "pid.tmp"), []byte(strconv.Itoa(a.PID())), 0o644)
	os.Rename(filepath.Join(dir, "pid.tmp"), filepath.Join(dir, "pid"))
	select {}
}

// A private etcd dies with the process that started it, even one killed
// without a chance to Stop it.
func TestServerDiesWithItsParent(t *testing.T) {
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+dir)
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
			t.Fatal("the child started no etcd within 60 s")
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
			t.Fatalf("etcd %d still running 10 s after its parent was killed", pid)
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
