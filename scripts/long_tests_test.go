package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// callsLong is a statement calling quick.Long, as long-tests finds it.
var callsLong = regexp.MustCompile(`(?m)^[ \t]+quick\.Long\(t, `)

// long-tests finds each long test by its own call of quick.Long: every
// test it lists is a function of that name in that directory whose body
// calls quick.Long, its pattern matches each of them and nothing else of
// the lines it lists, and its packages are their directories.
func TestLongTests(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	run := func(arg string) string {
		out, err := exec.Command("bash", "long-tests", arg).Output()
		if err != nil {
			t.Fatalf("long-tests %s: %v", arg, err)
		}
		return strings.TrimSpace(string(out))
	}
	list := strings.Split(run("list"), "\n")
	for _, line := range list {
		if strings.HasPrefix(line, "scripts:") {
			t.Errorf("%s: a test that only names quick.Long is not long", line)
		}
	}
	if len(list) < 10 {
		t.Fatalf("long-tests list names %d tests, want the suite's long ones:\n%s", len(list), strings.Join(list, "\n"))
	}
	pattern := regexp.MustCompile(run("pattern"))
	dirs := map[string]bool{}
	for _, line := range list {
		dir, name, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("line %q: want DIR: TEST", line)
		}
		dirs["./"+dir] = true
		if !pattern.MatchString(name) || pattern.MatchString(name+"X") {
			t.Errorf("the pattern %s does not match %s alone", pattern, name)
		}
		files, _ := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			body := regexp.MustCompile(`(?ms)^func ` + name + `\(t \*testing\.T\) \{\n(.*?)^\}`).FindSubmatch(b)
			if body != nil && callsLong.Match(body[1]) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no function %s in %s whose body calls quick.Long", line, name, dir)
		}
	}
	for _, p := range strings.Fields(run("packages")) {
		if !dirs[p] {
			t.Errorf("package %s is not the directory of a long test", p)
		}
		delete(dirs, p)
	}
	if len(dirs) > 0 {
		t.Errorf("directories of long tests not among the packages: %v", dirs)
	}
	if out, err := exec.Command("bash", "long-tests", "nonsense").CombinedOutput(); err == nil || !strings.Contains(string(out), "nonsense") {
		t.Errorf("long-tests nonsense: %v, %s; want exit 2 naming the argument", err, out)
	}
}
