package process_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/internal/prover"
)

// lines reads the file's lines, none if it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// Warm starts a run's processes ahead of its plan and returns once their
// start-up is over (a busy loop here, an interpreter loading its modules
// in life); the run's Connects take them, in order, before they start new
// ones; Drain kills what no Connect took, and only the run's own.
func TestWarm(t *testing.T) {
	dir := t.TempDir()
	started, ready := filepath.Join(dir, "started"), filepath.Join(dir, "ready")
	// Each process says its pid when it starts and once its busy start-up
	// (a few hundred milliseconds of CPU) is over, then serves init.
	l := &process.Launcher{InitTimeout: 60e9, Command: `echo $$ >> ` + started + `; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo $$ >> ` + ready +
		`; read l; echo '{"id":1,"type":"init_ok"}'; sleep 600`}
	defer l.Stop()
	ctx := context.Background()
	l.Warm(ctx, "run1", 2)
	if got := lines(t, ready); len(got) != 2 {
		t.Fatalf("Warm returned with %d processes past their start-up (%v), want 2: it did not wait for them", len(got), got)
	}
	l.Warm(ctx, "run2", 1)
	warm := lines(t, started)
	if len(warm) != 3 {
		t.Fatalf("Warm returned with %d processes started (%v), want 3: run2's had not begun", len(warm), warm)
	}
	var pids []int
	for _, name := range []string{"c1", "c2", "c3"} {
		c, err := l.Connect(ctx, "run1", name, toyInit(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Name() != name {
			t.Errorf("a process taken as %s is named %q", name, c.Name())
		}
		pids = append(pids, c.Pid())
	}
	// The file has the pids in the order the shells ran, which need not
	// be the order they were started in: run1's are the first two in some
	// order, run2's the third.
	ahead := map[string]bool{warm[0]: true, warm[1]: true}
	if !ahead[strconv.Itoa(pids[0])] || !ahead[strconv.Itoa(pids[1])] || pids[0] == pids[1] {
		t.Errorf("c1 and c2 are processes %v, want those run1 started ahead, %v", pids[:2], warm[:2])
	}
	if got := lines(t, started); len(got) != 4 || got[3] != strconv.Itoa(pids[2]) {
		t.Errorf("c3, once run1's were taken, is process %d; started so far: %v (run2's is %s)", pids[2], got, warm[2])
	}
	l.Drain("run1") // none left: run2's stays
	run2, _ := strconv.Atoi(warm[2])
	if err := syscall.Kill(run2, 0); err != nil {
		t.Fatalf("run1's Drain killed run2's process: %v", err)
	}
	l.Drain("run2")
	if err := syscall.Kill(run2, 0); err == nil {
		t.Errorf("run2's process %d lives on after its Drain", run2)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("Drain killed process %d, which a Connect took: %v", pid, err)
		}
	}
}

// A process started ahead that dies before its init is its run's failed
// start, said as any other; and Stop kills what Warm started.
func TestWarmFailuresAndStop(t *testing.T) {
	ctx := context.Background()
	l := &process.Launcher{Command: `echo "no config" >&2; exit 3`}
	l.Warm(ctx, "run1", 1)
	_, err := l.Connect(ctx, "run1", "c1", toyInit("c1"))
	var ie *prover.ImplementationError
	if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "c1 did not start: exited (exit status 3)") {
		t.Errorf("a process started ahead that exited: %v, want c1's failed start", err)
	}
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	l = &process.Launcher{Command: `echo $$ >> ` + started + `; sleep 600`}
	l.Warm(ctx, "run1", 1)
	pid, _ := strconv.Atoi(lines(t, started)[0])
	l.Stop()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d, started ahead, lives on after Stop", pid)
	}
}
