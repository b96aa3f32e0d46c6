package cli

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A transcript is a command the documentation shows being run ("$ " at
// the start of a line in a fenced block of README.md or docs/*.md), with
// the output it shows below it, up to the next command or the block's end.
type transcript struct {
	file string
	line int
	cmd  string
	want []string
	// block numbers the fenced blocks of a file: the commands of one
	// block run one after another in one directory, as a user would type
	// them.
	block int
}

// transcripts reads every transcript of the documentation under root.
func transcripts(t *testing.T, root string) []transcript {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var out []transcript
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		s := bufio.NewScanner(fh)
		s.Buffer(nil, 1<<20)
		in, block, n, cont := false, 0, 0, false
		var cur *transcript
		for s.Scan() {
			n++
			line := s.Text()
			switch {
			case strings.HasPrefix(line, "```"):
				in = !in
				block++
				cur, cont = nil, false
			case in && strings.HasPrefix(line, "$ "):
				out = append(out, transcript{file: rel, line: n, cmd: strings.TrimPrefix(line, "$ "), block: block})
				cur = &out[len(out)-1]
				cont = strings.HasSuffix(line, " \\")
			case in && cont && cur != nil:
				// A command continued on the next line, as a shell reads it.
				cur.cmd += "\n" + line
				cont = strings.HasSuffix(line, " \\")
			case in && cur != nil:
				cur.want = append(cur.want, line)
			}
		}
		fh.Close()
	}
	return out
}

// needsServers says whether a transcript's command needs something beyond
// the simulator (a real server, an implementation's runtime, a container
// engine, root for a network lab) or runs for long: such transcripts run
// only with LOCKPROVER_TRANSCRIPTS=all, on a machine set up as .ci/run sets
// it up.
func needsServers(cmd string) bool {
	for _, s := range []string{"--target", "--impl", "conform", "bench", "validate-impl", "docker", "kubectl", "git ", "export ", "--time", "--private-server", "make ", "GOFLAGS"} {
		if strings.Contains(cmd, s) {
			return true
		}
	}
	if m := regexp.MustCompile(`--runs (\d+)`).FindStringSubmatch(cmd); m != nil && len(m[1]) > 5 {
		return true // 100,000 plans and more
	}
	return !strings.Contains(cmd, "lockprover")
}

// masks are what varies from run to run in an output a transcript shows:
// timings and rates, dates and the run's random names.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d+(\.\d+)?\s?plans/s`), "N plans/s"},
	{regexp.MustCompile(`\b\d+(\.\d+)? ?(µs|ms|s|m)\b`), "T"},
	{regexp.MustCompile(`\b\d+\.\d+x\b`), "Rx"}, // bench's ratios to its floors
	// conform on a real server: how many steps its sequences took and how
	// many were inconclusive (a reply too slow to judge) depend on timing.
	{regexp.MustCompile(`\b\d+ (steps|commands), \d+ inconclusive\b`), "N $1, N inconclusive"},
	{regexp.MustCompile(`\d+(\.\d+)? sequences/s\b`), "N sequences/s"},
	{regexp.MustCompile(`\d+ (schedules|states|choice points)/s\b`), "N $1/s"}, // prove --exhaustive's rates
	{regexp.MustCompile(`\b\d+m\d+(\.\d+)?s\b`), "T"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z?`), "DATE"},
	{regexp.MustCompile(`\bseed \d{6,}`), "seed S"},
	{regexp.MustCompile(`\blp[a-z]*-?[0-9a-f]{6,}[0-9a-f_-]*`), "NAME"},
	{regexp.MustCompile(`\blockprover-cluster-\d+`), "lockprover-cluster-N"}, // a cluster's temporary files
	{regexp.MustCompile(`\| \d+\.\d\d \|$`), "| T |"},                        // a table's seconds (mutants --detect)
	{regexp.MustCompile(`\s+$`), ""},
	{regexp.MustCompile(`(\S) {2,}`), "$1 "}, // a column's width follows its widest value
}

func mask(line string) string {
	for _, m := range masks {
		line = m.re.ReplaceAllString(line, m.with)
	}
	return line
}

// matches says whether got (the lines a command printed) is what want
// shows: line for line, after masking, where a line "..." stands for any
// number of lines; the first line that does not match is returned.
func matches(want, got []string) (bool, string) {
	want, got = withoutProgress(want), withoutProgress(got)
	j := 0
	skip := false
	for _, w := range want {
		if strings.TrimSpace(w) == "..." {
			skip = true
			continue
		}
		mw := mask(w)
		// A line that ends in "..." stands for any line it begins:
		// "every property held..." for a real run, which may or may not
		// have judged every property.
		same := func(g string) bool { return mask(g) == mw }
		if p, ok := strings.CutSuffix(strings.TrimSpace(w), "..."); ok && strings.TrimSpace(p) != "" {
			mp := mask(strings.TrimRight(w, " ")[:len(strings.TrimRight(w, " "))-3])
			same = func(g string) bool { return strings.HasPrefix(mask(g), mp) }
		}
		for skip && j < len(got) && !same(got[j]) {
			j++
		}
		if j == len(got) || !same(got[j]) {
			return false, w
		}
		j++
		skip = false
	}
	if !skip && j < len(got) {
		return false, "(the output goes on: " + got[j] + ")"
	}
	return true, ""
}

// Every command the README and docs/ show being run prints what they show
// it printing (timings, rates and run names aside; "..." elides lines).
// Those that need servers or run long are run with
// LOCKPROVER_TRANSCRIPTS=all on a machine .ci/run set up, the rest with
// LOCKPROVER_TRANSCRIPTS=sim; LOCKPROVER_TRANSCRIPTS_FILES=README.md,docs/ci.md
// runs those of the pages named only.
func TestDocTranscripts(t *testing.T) {
	if testing.Short() || os.Getenv("LOCKPROVER_TRANSCRIPTS") == "" {
		t.Skip("runs the documentation's commands: LOCKPROVER_TRANSCRIPTS=sim for those on the simulator, all for every one")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	all := os.Getenv("LOCKPROVER_TRANSCRIPTS") == "all"
	bin := builtBinary(t)
	// The commands find lockprover, and consul where .ci/run built it,
	// on their PATH, as a reader who installed both would.
	path := filepath.Dir(bin) + ":" + os.Getenv("PATH")
	if c := os.Getenv("LOCKPROVER_CONSUL"); c != "" {
		path = filepath.Dir(c) + ":" + path
	}
	dirs := map[string]string{} // file#block -> its directory
	ran, skipped := 0, 0
	only := map[string]bool{} // LOCKPROVER_TRANSCRIPTS_FILES: these pages only
	for _, f := range strings.Split(os.Getenv("LOCKPROVER_TRANSCRIPTS_FILES"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			only[f] = true
		}
	}
	for _, tr := range transcripts(t, root) {
		if len(only) > 0 && !only[tr.file] {
			continue
		}
		if !all && needsServers(tr.cmd) {
			skipped++
			continue
		}
		key := fmt.Sprintf("%s#%d", tr.file, tr.block)
		if dirs[key] == "" {
			dirs[key] = workDir(t, root)
			// The README's paths build ./lockprover once, in one block,
			// and use it in the next, as a reader's shell would.
			if err := os.Symlink(bin, filepath.Join(dirs[key], "lockprover")); err != nil {
				t.Fatal(err)
			}
		}
		ran++
		cmd := strings.ReplaceAll(tr.cmd, "go run ./cmd/lockprover", "lockprover")
		c := exec.Command("sh", "-c", cmd)
		c.Dir = dirs[key]
		c.Env = append(os.Environ(), "PATH="+path, "NO_COLOR=1")
		start := time.Now()
		out, _ := c.CombinedOutput() // the transcript shows the exit by what it prints
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(out) == 0 {
			got = nil
		}
		if ok, first := matches(tr.want, got); !ok {
			t.Errorf("%s:%d: $ %s\nshows %q, which is not what it prints (in %v):\n%s", tr.file, tr.line, tr.cmd, first, time.Since(start).Round(time.Millisecond), out)
		}
	}
	for f := range only {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("LOCKPROVER_TRANSCRIPTS_FILES names %s, which is no page of the project (%v)", f, err)
		}
	}
	t.Logf("%d commands run, %d left for LOCKPROVER_TRANSCRIPTS=all", ran, skipped)
	switch {
	case ran == 0 && skipped > 0:
		t.Skipf("every command of the pages named (%d) needs a real server: LOCKPROVER_TRANSCRIPTS=all runs them", skipped)
	case ran == 0:
		t.Error("no command of the documentation ran")
	}
}

// workDir is a fresh directory that holds the repository's top-level
// entries as symbolic links, where a block's commands run: they read the
// repository's files by the paths the documentation gives, and what they
// write stays out of the repository.
func workDir(t *testing.T, root string) string {
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// progress is a line a long run prints every ten seconds ("plans 2500
// plans/s 228.2 verdicts 17500 elapsed 11s"), or bench's as it begins a
// phase ("bench: master-row (30 + 300 iterations)"): how many there are
// depends on the machine's speed, so they are left out on both sides.
var progress = regexp.MustCompile(`^((plans|sequences|schedules) \d+ +[a-z/]+ |bench: [a-z-]+ \(\d+ \+ \d+ iterations\)$)`)

func withoutProgress(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !progress.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

func TestTranscriptMatching(t *testing.T) {
	for _, c := range []struct {
		want, got []string
		ok        bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "b"}, []string{"a", "c"}, false},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{"a", "..."}, []string{"a", "b", "c"}, true},
		{[]string{"a", "...", "c"}, []string{"a", "b", "b", "c"}, true},
		{[]string{"a", "...", "d"}, []string{"a", "b", "c"}, false},
		{[]string{"1000 plans, 0.3s (3295.9 plans/s)"}, []string{"1000 plans, 0.5s (1881.1 plans/s)"}, true},
		{[]string{"1000 plans"}, []string{"1001 plans"}, false},
		{[]string{"proving the reference on RabbitMQ, seed 11684891785492496758"}, []string{"proving the reference on RabbitMQ, seed 666864198145840397"}, true},
		{[]string{"seed 1"}, []string{"seed 2"}, false},
		{[]string{"a", "b"}, []string{"a", "plans 2500  plans/s 228.2  verdicts 17500  elapsed 11s", "b"}, true},
		{[]string{"a", "plans 15783  plans/s 1578.3  verdicts 142047  elapsed 10s", "b"}, []string{"a", "b"}, true},
		{[]string{"a"}, []string{"bench: master-row (30 + 300 iterations)", "a"}, true},
		{[]string{"every property held..."}, []string{"every property held that was judged; not judged on any plan: aware"}, true},
		{[]string{"every property held..."}, []string{"every property held"}, true},
		{[]string{"consul 1.20.2: 2000 sequences, 16134 steps, 43 inconclusive, 352.1s: agrees"}, []string{"consul 1.20.2: 2000 sequences, 16072 steps, 47 inconclusive, 378.8s: agrees"}, true},
		{[]string{"consul 1.20.2: 2000 sequences, 16134 steps, 43 inconclusive, 352.1s: agrees"}, []string{"consul 1.20.2: 1999 sequences, 16072 steps, 47 inconclusive, 378.8s: agrees"}, false},
		{[]string{"  1000/2000 sequences, 8425 commands, 0 inconclusive"}, []string{"  1000/2000 sequences, 8409 commands, 1 inconclusive"}, true},
		{[]string{"part 2: 500 sequences, 4847 steps in 9.9s (51 sequences/s)"}, []string{"part 2: 500 sequences, 4847 steps in 17.3s (29 sequences/s)"}, true},
		{[]string{"every property held..."}, []string{"fencing violated"}, false},
		{[]string{"lockprover: starting a RabbitMQ cluster of 3 nodes in the network lab lp12f002, files under /tmp/lockprover-cluster-1372571764"}, []string{"lockprover: starting a RabbitMQ cluster of 3 nodes in the network lab lp05a1c3, files under /tmp/lockprover-cluster-99"}, true},
		{[]string{"files under /tmp/lockprover-cluster-1372571764"}, []string{"files under /tmp/lockprover-other-1"}, false},
		{[]string{"prove it with lockprover prove --impl ..."}, []string{"prove it with lockprover prove --impl ..."}, true},
		{[]string{"  shard 2/3  violated    99 plans    13.2s  x"}, []string{"  shard 2/3  violated    99 plans     9.2s  x"}, true},
		{[]string{"  shard 2/3"}, []string{"shard 2/3"}, false},
		{[]string{"| acquire | 2260 µs | 8 (3 select) | 1.21x |"}, []string{"| acquire | 2490 µs | 8 (3 select) | 1.19x |"}, true},
		{[]string{"| acquire | 2260 µs | 8 (3 select) | 1.21x |"}, []string{"| acquire | 2490 µs | 9 (4 select) | 1.19x |"}, false},
		{[]string{"a"}, []string{"bench: master-row took long", "a"}, false},
		{[]string{"queues lpconf-9c271b68-*"}, []string{"queues lpconf-daeff55b-*"}, true},
		{[]string{"queues lpconf-9c271b68-*"}, []string{"queues lpconf-*"}, false},
	} {
		if ok, _ := matches(c.want, c.got); ok != c.ok {
			t.Errorf("matches(%q, %q) = %v", c.want, c.got, ok)
		}
	}
}

// A command continued with a backslash is one command, its output what
// follows its last line.
func TestTranscriptContinuation(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	page := "```\n$ echo a \\\n    b\na b\n$ echo c\nc\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	trs := transcripts(t, dir)
	if len(trs) != 2 || trs[0].cmd != "echo a \\\n    b" || fmt.Sprint(trs[0].want) != "[a b]" || trs[1].cmd != "echo c" {
		t.Errorf("transcripts %+v", trs)
	}
}
