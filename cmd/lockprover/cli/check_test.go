package cli

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories/results"
)

// TestHistoryVerdicts runs every history in testdata/histories through
// check and compares the exit status and the failing properties with
// verdicts.txt.
func TestHistoryVerdicts(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "testdata", "histories")
	f, err := os.Open(filepath.Join(dir, "verdicts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		file, flags, want := fields[0], fields[1], fields[2]
		listed[file] = true
		t.Run(file+flags, func(t *testing.T) {
			args := []string{"check"}
			if flags != "-" {
				args = append(args, flags)
			}
			args = append(args, filepath.Join(dir, file))
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			if strconv.Itoa(code) != want {
				t.Fatalf("exit %d, want %s\n%s%s", code, want, out.String(), errOut.String())
			}
			if code == exitUsage {
				for _, want := range fields[3:] {
					if !strings.Contains(errOut.String(), want) {
						t.Errorf("error %q does not name %s", errOut.String(), want)
					}
				}
				return
			}
			got := failing(out.String())
			wantFails := append([]string(nil), fields[3:]...)
			sort.Strings(wantFails)
			if strings.Join(got, " ") != strings.Join(wantFails, " ") {
				t.Errorf("failing properties %v, want %v\n%s", got, wantFails, out.String())
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if (strings.HasSuffix(e.Name(), ".jsonl") || strings.HasSuffix(e.Name(), ".edn") || strings.HasSuffix(e.Name(), ".json")) && !listed[e.Name()] {
			t.Errorf("%s has no expected verdict in verdicts.txt", e.Name())
		}
	}
}

// failing extracts "lock:property" for each failed verdict of a report.
func failing(report string) []string {
	var out []string
	lock := ""
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "lock":
			lock = f[1]
		case len(f) >= 2 && f[1] == "FAIL" && !strings.HasPrefix(line, "  result:"):
			out = append(out, lock+":"+f[0])
		}
	}
	sort.Strings(out)
	return out
}

func TestCheckUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "no history files given"},
		{[]string{"check", "--model", "loose", "x.jsonl"}, `--model must be standard or strict, not "loose"`},
		{[]string{"check", "no/such/file.jsonl"}, "no/such/file.jsonl"},
		{[]string{"check", "--timeout", "-1s", "x.jsonl"}, "--timeout must not be negative"},
		{[]string{"check", "--drift", "1", "x.jsonl"}, "--drift must be > 0 and < 1 (a fraction: 0.01 is 1%), not 1"},
		{[]string{"check", "--lease-ttl", "1500us", "x.edn"}, "--lease-ttl must be a whole number of milliseconds"},
		{[]string{"check", "--lease-ttl", "1s", filepath.Join("..", "..", "..", "testdata", "histories", "01-turns.jsonl")}, "--lease-ttl judges Jepsen histories; this is lockprover's own JSON lines"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, exitUsage)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: %q lacks %q", tc.args, errOut.String(), tc.want)
		}
	}
}

// TestCheckUsageNamesTheFormatDocument checks that the usage points to the
// project's own description of the formats, not to a document outside it.
func TestCheckUsageNamesTheFormatDocument(t *testing.T) {
	var out, errOut bytes.Buffer
	run([]string{"check", "-h"}, &out, &errOut)
	if !strings.Contains(out.String(), "docs/histories.md") || strings.Contains(out.String(), "DESIGN.md") {
		t.Errorf("usage does not point to docs/histories.md alone:\n%s", out.String())
	}
	if !strings.Contains(out.String(), ".edn") {
		t.Errorf("usage does not say how EDN is recognised:\n%s", out.String())
	}
}

func TestCheckWritesVisualisations(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"check", "--html", dir, filepath.Join("..", "..", "..", "testdata", "histories", "02-kill-holder.jsonl")}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	page, err := os.ReadFile(filepath.Join(dir, "02-kill-holder-sem-slot-exclusive.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kill c1 (#5)", `c1 acquire -\u003e ok slot 1 (#2)`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("visualisation lacks %q", want)
		}
	}
}

// TestCheckEDN checks what check says of a Jepsen history beyond its
// verdicts: that it was imported, the import's notes, and the EDN line of
// each operation it names.
func TestCheckEDN(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "testdata", "histories")
	for _, tc := range []struct {
		file string
		code int
		want []string
	}{
		{"71-jepsen-double-holder.edn", exitViolation, []string{
			"71-jepsen-double-holder.edn (Jepsen EDN, judged as Knossos's mutex model judges it; #N is an event of the imported history)",
			"p1 acquire -> ok (#2) took",
			"operations: #2 (line 3), #0 (line 1)",
		}},
		{"70-jepsen-mutex.edn", exitOK, []string{
			"note: 1 failed :acquire op left out (first at line 4)",
			"excused: p3 acquire -> ok (#20) took the mutex while p1 held it (p1 acquire -> ok (#4)): excused only because p1 release -> unknown (info)",
			"operations: #20 (line 15), #4 (line 7), #12 (line 11)",
		}},
		{"77-jepsen-unknown-nemesis.edn", exitViolation, []string{
			"note: nemesis :bitflip-wal (line 3) is not a fault lockprover knows: it is taken to reach every client from then to the end of the history, which can excuse but never accuse",
		}},
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"check", filepath.Join(dir, tc.file)}, &out, &errOut)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.file, code, tc.code, out.String(), errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.file, w, out.String())
			}
		}
	}
	// A JSON-lines history says nothing of an import.
	var out, errOut bytes.Buffer
	run([]string{"check", filepath.Join(dir, "20-double-holder.jsonl")}, &out, &errOut)
	if strings.Contains(out.String(), "Jepsen") || strings.Contains(out.String(), "(line") {
		t.Errorf("a JSON-lines report speaks of an import:\n%s", out.String())
	}
}

// The check examples of the README and docs/ print what check prints (an
// example that elides lines with "..." must match the lines it shows, in
// order; trailing spaces do not count). TestDocTranscripts runs every
// command of the documentation; this one runs check's, always, in process.
func TestDocCheckExamples(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	n := 0
	for _, f := range append([]string{filepath.Join(root, "README.md")}, files...) {
		n += checkExamples(t, f)
	}
	if n == 0 {
		t.Error("no check example found in the README or docs/")
	}
}

// checkExamples runs the check examples of one page and returns how many
// it found.
func checkExamples(t *testing.T, page string) int {
	readme, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	n := 0
	for i, line := range lines {
		rest, ok := strings.CutPrefix(line, "$ go run ./cmd/lockprover check ")
		if !ok {
			rest, ok = strings.CutPrefix(line, "$ lockprover check ")
		}
		if !ok {
			continue
		}
		args := strings.Fields(rest) // flags, then the file
		file := args[len(args)-1]
		n++
		var want []string
		for _, l := range lines[i+1:] {
			if strings.HasPrefix(l, "```") || strings.HasPrefix(l, "$ ") {
				break
			}
			want = append(want, l)
		}
		var out, errOut bytes.Buffer
		run(append(append([]string{"check"}, args[:len(args)-1]...), filepath.Join("..", "..", "..", file)), &out, &errOut)
		got := strings.Split(strings.TrimRight(strings.ReplaceAll(out.String(), filepath.Join("..", "..", "..")+"/", ""), "\n"), "\n")
		j := 0
		for _, w := range want {
			if strings.TrimSpace(w) == "..." {
				continue
			}
			for j < len(got) && strings.TrimRight(got[j], " ") != strings.TrimRight(w, " ") {
				j++
			}
			if j == len(got) {
				t.Errorf("%s's check %s shows %q, which check does not print in that order:\n%s", page, file, w, out.String())
				break
			}
			j++
		}
	}
	return n
}

// TestCheckJSONSaysWhatTheImportDid checks that --json carries an import's
// notes and every excuse, with the file's lines, not only the text.
func TestCheckJSONSaysWhatTheImportDid(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "testdata", "histories")
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"check", "--json", out, filepath.Join(dir, "91-jepsen-info-release-then-holder.edn"), filepath.Join(dir, "92-jepsen-time-decreasing.edn"), filepath.Join(dir, "94-jepsen-array.json")}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	sum, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Histories) != 3 {
		t.Fatalf("%d histories", len(sum.Histories))
	}
	h91, h92, h94 := sum.Histories[0], sum.Histories[1], sum.Histories[2]
	if len(h91.Notes) != 1 || !strings.Contains(h91.Notes[0], "1 failed :acquire op left out (first at line 4)") {
		t.Errorf("91's notes: %q", h91.Notes)
	}
	found := false
	for _, e := range h91.Excuses {
		if e.Property == "slot-exclusive" && strings.Contains(e.Why, "excused only because p0 release -> unknown (info)") && slices.Equal(e.Lines, []int{9, 1, 7}) {
			found = true
		}
	}
	if !found {
		t.Errorf("91's excuses lack the unknown release, with lines 9, 1, 7: %+v", h91.Excuses)
	}
	if len(h92.Notes) == 0 || !strings.Contains(h92.Notes[0], "earlier than the op written before") || h92.Format != "jepsen-edn" {
		t.Errorf("92: %q %s", h92.Notes, h92.Format)
	}
	if h94.Format != "jepsen-json" || len(h94.Excuses) != 1 {
		t.Errorf("94: %s %+v", h94.Format, h94.Excuses)
	}
}

// TestCheckReportPage checks that check --report writes each history's
// page, with the import's notes and each excuse on it.
func TestCheckReportPage(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"check", "--report", dir, filepath.Join("..", "..", "..", "testdata", "histories", "91-jepsen-info-release-then-holder.edn")}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	page, err := os.ReadFile(filepath.Join(dir, "91-jepsen-info-release-then-holder.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="notes"`, "1 failed :acquire op left out", `id="excuses"`, "excused only because p0 release -&gt; unknown (info)"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
