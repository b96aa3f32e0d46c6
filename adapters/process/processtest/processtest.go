// Package processtest is for the tests of the families' sides of the
// process protocol: it builds the lockprover binary, whose serve-reference
// puts each family's reference behind the protocol, and makes the markers
// by which a test finds the processes it left running.
package processtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Main is a TestMain: it builds lockprover into a temporary directory,
// sets *lockprover to its path, runs the tests and removes the directory.
func Main(m *testing.M, lockprover *string) {
	dir, err := os.MkdirTemp("", "lockprover-process-test")
	if err != nil {
		panic(err)
	}
	*lockprover = filepath.Join(dir, "lockprover")
	if out, err := exec.Command("go", "build", "-o", *lockprover, "github.com/lockprover/lockprover/cmd/lockprover").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building lockprover: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// markers counts the markers made.
var markers atomic.Int64

// Marker is a word no other process has in its command line, not even
// another test's running at the same time: a test puts it in an
// implementation's command as a shell variable (marker=1; ...) to find
// what that left running with pgrep -f marker=.
func Marker(prefix string) string {
	return fmt.Sprintf("%s%d_%d", prefix, time.Now().UnixNano(), markers.Add(1))
}
