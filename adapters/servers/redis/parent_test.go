package redis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// childEnv, when set, makes the test binary a child that starts a server
// in the directory it names, writes the server's pid there and exits
// without stopping it.
const childEnv = "LOCKPROVER_REDIS_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := Start(c, dir, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(s.PID())), 0o644)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A server whose parent dies without stopping it is killed with it.
func TestKilledWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux kills a child when its parent dies")
	}
	if _, err := binary.Find(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	for end := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; {
		if time.Now().After(end) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("server %d still alive 5 s after its parent exited", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
