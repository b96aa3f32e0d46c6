// Package scripts holds the shell scripts of the build; its test runs
// test-again on a module of its own.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// files writes a module whose tests pass, fail for good, fail only the
// first time they run, or do not build.
func files(t *testing.T, dir string) {
	t.Helper()
	marker := filepath.Join(dir, "ran-once")
	for name, text := range map[string]string{
		"go.mod": "module ta\n\ngo 1.22\n",
		"flaky/f_test.go": `package flaky

import ("os"; "testing")

func TestFlaky(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		if _, err := os.Stat(` + "`" + marker + "`" + `); err != nil {
			os.WriteFile(` + "`" + marker + "`" + `, nil, 0o644)
			t.Fatal("fails the first time")
		}
	})
}

func TestFine(t *testing.T) {}
`,
		"slow/s_test.go": `package slow

import ("os"; "testing"; "time")

func TestFailsOnce(t *testing.T) {
	if _, err := os.Stat(` + "`" + marker + "-slow`" + `); err != nil {
		os.WriteFile(` + "`" + marker + "-slow`" + `, nil, 0o644)
		t.Fatal("fails the first time")
	}
}

func TestSlow(t *testing.T) { time.Sleep(time.Minute) }
`,
		"hard/h_test.go":   "package hard\n\nimport \"testing\"\n\nfunc TestHard(t *testing.T) { t.Fatal(\"always\") }\n",
		"good/g_test.go":   "package good\n\nimport \"testing\"\n\nfunc TestGood(t *testing.T) {}\n",
		"broken/b.go":      "package broken\n\nfunc x() { undefined() }\n",
		"broken/b_test.go": "package broken\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testAgain runs the script in dir on pkgs and returns its exit status and
// output.
func testAgain(t *testing.T, dir string, pkgs ...string) (int, string) {
	t.Helper()
	script, err := filepath.Abs("test-again")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{script, "-count=1"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// A test that fails once and then passes alone lets the run pass, named as
// flaky; one that fails again, a package that does not build, or one that
// panicked or timed out after a test failed, fails it.
func TestTestAgain(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	dir := t.TempDir()
	files(t, dir)
	code, out := testAgain(t, dir, "./flaky", "./good")
	if code != 0 || !strings.Contains(out, "FLAKY") || !strings.Contains(out, "  ta/flaky: TestFlaky\n") || !strings.Contains(out, "-run '^(TestFlaky)$' ta/flaky") {
		t.Errorf("a test that fails once: exit %d, want 0 and it named as flaky:\n%s", code, out)
	}
	if strings.Contains(out, "TestFine)") || strings.Contains(out, "ta/good\n") && strings.Contains(out, "-run '^(TestGood") {
		t.Errorf("ran again what passed:\n%s", out)
	}
	os.Remove(filepath.Join(dir, "ran-once"))
	// Not ./...: ./slow's TestSlow would sleep its minute.
	code, out = testAgain(t, dir, "./flaky", "./good", "./hard", "./broken")
	if code != 1 || !strings.Contains(out, "test-again: go test -count=1 -run '^(TestHard)$' ta/hard") ||
		!strings.Contains(out, "ta/broken failed without a failed test to name") || !strings.HasSuffix(strings.TrimSpace(out), "test-again: FAIL") {
		t.Errorf("a test that always fails, and a package that does not build: exit %d, want 1:\n%s", code, out)
	}
	// A package that times out after a test failed: the named test passes
	// alone, but the tests after the timeout never ran.
	code, out = testAgain(t, dir, "-timeout=5s", "./slow")
	if code != 1 || !strings.Contains(out, "ta/slow failed without a failed test to name, or panicked") || strings.Contains(out, "-run '^(TestFailsOnce)$'") {
		t.Errorf("a timeout after a failed test: exit %d, want 1 and the package not run again:\n%s", code, out)
	}
	code, out = testAgain(t, dir, "./good")
	if code != 0 || strings.Contains(out, "test-again") {
		t.Errorf("passing tests: exit %d, want 0 and nothing run again:\n%s", code, out)
	}
}
