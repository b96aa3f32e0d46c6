package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// LOCKPROVER_CPUPROFILE=FILE writes a CPU profile of the run to FILE (a
// gzipped profile, as pprof and the compiler's -pgo read it); a FILE that
// cannot be made is refused, naming the variable, before anything runs.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	args := os.Args
	defer func() { os.Args = args }()
	os.Args = []string{"lockprover", "prove", "--seed", "1", "--runs", "20", "--out", filepath.Join(dir, "out")}

	prof := filepath.Join(dir, "cpu.prof")
	t.Setenv(cpuProfile, prof)
	if code := run(); code != 0 {
		t.Fatalf("prove with %s set: exit %d", cpuProfile, code)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s holds %d bytes, not a gzipped profile", prof, len(b))
	}

	t.Setenv(cpuProfile, filepath.Join(dir, "no", "such", "dir", "cpu.prof"))
	stderr := os.Stderr
	r, w, _ := os.Pipe()
	os.Stderr = w
	code := run()
	os.Stderr = stderr
	w.Close()
	var said bytes.Buffer
	io.Copy(&said, r)
	if code != 2 || !strings.Contains(said.String(), cpuProfile+"=") {
		t.Fatalf("an unwritable profile: exit %d, said %q; want exit 2 naming %s", code, said.String(), cpuProfile)
	}
}
