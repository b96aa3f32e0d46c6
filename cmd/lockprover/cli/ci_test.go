package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lockprover/lockprover/histories/results"
	"github.com/lockprover/lockprover/internal/quick"
)

// runBinary runs the built lockprover with args in dir and returns its
// exit status and output.
func runBinary(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// shardRuns proves the same search once in one process and as n shards in
// n processes side by side (each in a directory of its own, as CI jobs
// would), and merges the shards' results with lockprover merge.
func shardRuns(t *testing.T, n int, args ...string) (one, merged *results.Summary, shards []*results.Summary, dir string) {
	t.Helper()
	bin := builtBinary(t)
	dir = t.TempDir()
	env := []string{"GITHUB_ACTIONS="}
	var wg sync.WaitGroup
	codes := make([]int, n+1)
	outs := make([]string, n+1)
	for i := 0; i <= n; i++ {
		sub := filepath.Join(dir, "one")
		a := append([]string{"prove"}, args...)
		if i > 0 {
			sub = filepath.Join(dir, "shards", fmt.Sprintf("shard-%d", i))
			a = append(a, "--shard", fmt.Sprintf("%d/%d", i, n))
		}
		os.MkdirAll(sub, 0o755)
		a = append(a, "--json", "results.json", "--out", "out")
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, errOut := runBinary(t, bin, sub, env, a...)
			codes[i], outs[i] = code, out+errOut
		}()
	}
	wg.Wait()
	read := func(path string) *results.Summary {
		s, err := results.ReadJSON(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	one = read(filepath.Join(dir, "one", "results.json"))
	if codes[0] != one.ExitCode {
		t.Errorf("one process: exit %d, summary says %d:\n%s", codes[0], one.ExitCode, outs[0])
	}
	for i := 1; i <= n; i++ {
		s := read(filepath.Join(dir, "shards", fmt.Sprintf("shard-%d", i), "results.json"))
		if codes[i] != s.ExitCode || s.Shard == nil || s.Shard.Index != i || s.Shard.Count != n {
			t.Errorf("shard %d: exit %d, summary %+v:\n%s", i, codes[i], s.Shard, outs[i])
		}
		shards = append(shards, s)
	}
	code, out, errOut := runBinary(t, bin, dir, env, "merge", "--json", "merged.json", "--junit", "merged.xml", "shards")
	t.Logf("lockprover merge shards:\n%s%s", out, errOut)
	merged = read(filepath.Join(dir, "merged.json"))
	if code != merged.ExitCode || code != one.ExitCode {
		t.Errorf("merge: exit %d, summary says %d, one process exited %d", code, merged.ExitCode, one.ExitCode)
	}
	return one, merged, shards, dir
}

// coverage is the plans a run drew, batch by batch, with their digests.
func coverage(batches []results.Batch) map[int]results.Batch {
	m := map[int]results.Batch{}
	for _, b := range batches {
		m[b.Number] = b
	}
	return m
}

// n shards in n processes run exactly the plans one process runs: the
// same batches, each once, with the same plans in them (their digests),
// and merge says so in one verdict.
func TestShardsCoverOneRun(t *testing.T) {
	quick.Skip(t, "three shard processes of many seconds")
	t.Parallel()
	one, merged, shards, dir := shardRuns(t, 3, "--runs", "1800", "--seed", "5", "--clients", "2", "--ops", "4")
	if one.Result != results.Held || merged.Result != results.Held {
		t.Fatalf("one process %s, merged %s; want both held", one.Result, merged.Result)
	}
	if len(one.Batches) != 4 { // 500, 500, 500, 300
		t.Fatalf("one process ran batches %+v", one.Batches)
	}
	union := map[int]results.Batch{}
	for i, s := range shards {
		for _, b := range s.Batches {
			if _, twice := union[b.Number]; twice {
				t.Errorf("batch %d ran twice (again in shard %d)", b.Number, i+1)
			}
			union[b.Number] = b
		}
	}
	if !reflect.DeepEqual(union, coverage(one.Batches)) || !reflect.DeepEqual(coverage(merged.Batches), coverage(one.Batches)) {
		t.Errorf("the shards ran\n%+v\none process\n%+v\nmerged\n%+v", union, one.Batches, merged.Batches)
	}
	if merged.Plans != one.Plans || merged.Operations != one.Operations || merged.Verdicts != one.Verdicts || !reflect.DeepEqual(merged.Properties, one.Properties) {
		t.Errorf("merged %d plans, %d operations, %d verdicts, %+v; one process %d, %d, %d, %+v",
			merged.Plans, merged.Operations, merged.Verdicts, merged.Properties, one.Plans, one.Operations, one.Verdicts, one.Properties)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "merged.xml"))
	if !strings.Contains(string(data), `tests="9" failures="0" errors="0"`) {
		t.Errorf("merged JUnit:\n%s", data)
	}

	// A shard missing, or from another search, is named.
	bin := builtBinary(t)
	os.Rename(filepath.Join(dir, "shards", "shard-2"), filepath.Join(dir, "shard-2"))
	code, _, errOut := runBinary(t, bin, dir, nil, "merge", "shards")
	if code != exitUsage || !strings.Contains(errOut, "shard 2/3 is missing") {
		t.Errorf("merge without shard 2: exit %d, %s", code, errOut)
	}
	other := filepath.Join(dir, "other")
	os.MkdirAll(other, 0o755)
	runBinary(t, bin, other, nil, "prove", "--runs", "1800", "--seed", "6", "--clients", "2", "--ops", "4", "--shard", "2/3", "--json", "results.json")
	code, _, errOut = runBinary(t, bin, dir, nil, "merge", "shards", "other")
	if code != exitUsage || !strings.Contains(errOut, filepath.Join("other", "results.json")+": seed 6, but") {
		t.Errorf("merge with a shard of seed 6: exit %d, %s", code, errOut)
	}
}

// Shards find the counterexample one process finds first: the same plan,
// at the same batch and index, whichever shard drew it.
func TestShardsFindTheFirstCounterexample(t *testing.T) {
	t.Parallel()
	one, merged, shards, dir := shardRuns(t, 3, "--mutant", "silent-reconnect", "--runs", "1800", "--seed", "104", "--clients", "2", "--ops", "4", "--shrink-time", "0")
	if one.Result != results.Violated || merged.Result != results.Violated {
		t.Fatalf("one process %s, merged %s; want both violated", one.Result, merged.Result)
	}
	a, b := one.Counterexample, merged.Counterexample
	if a.Property != b.Property || a.Batch != b.Batch || a.Index != b.Index || a.Explanation != b.Explanation {
		t.Errorf("one process found %+v\nthe shards %+v", a, b)
	}
	if a.Batch < 1 {
		t.Errorf("the counterexample is in batch %d: the test wants one past the first batch", a.Batch)
	}
	planOne, err1 := os.ReadFile(filepath.Join(dir, "one", a.Plan))
	planMerged, err2 := os.ReadFile(filepath.Join(dir, b.Plan)) // rebased beside the shard's summary
	if err1 != nil || err2 != nil || !bytes.Equal(planOne, planMerged) {
		t.Errorf("plans differ (%v, %v)", err1, err2)
	}
	if !strings.Contains(b.Replay, b.Plan) {
		t.Errorf("merged replay %q does not name %s", b.Replay, b.Plan)
	}
	// What one process ran up to its counterexample, the shards ran too.
	union := map[int]results.Batch{}
	for _, s := range shards {
		for k, v := range coverage(s.Batches) {
			union[k] = v
		}
	}
	for _, want := range one.Batches {
		if got := union[want.Number]; got != want {
			t.Errorf("batch %d: the shards ran %+v, one process %+v", want.Number, got, want)
		}
	}
}

// --shard auto takes the shard from a Kubernetes Indexed Job's index (or
// the variables a CI sets), and says which are missing.
func TestShardAuto(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"LOCKPROVER_SHARD_INDEX", "LOCKPROVER_SHARD_COUNT", "JOB_COMPLETION_INDEX", "JOB_COMPLETIONS", "CI_NODE_INDEX", "CI_NODE_TOTAL"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("JOB_COMPLETIONS", "2")
	js := filepath.Join(dir, "r.json")
	code, out, errOut := lockprover("prove", "--runs", "600", "--seed", "2", "--shard", "auto", "--json", js, "--out", filepath.Join(dir, "out"))
	s, err := results.ReadJSON(js)
	if code != exitOK || err != nil || s.Shard.String() != "2/2" || len(s.Batches) != 1 || s.Batches[0].Number != 1 || s.Plans != 100 {
		t.Fatalf("JOB_COMPLETION_INDEX=1 of 2: exit %d, %v, %+v\n%s%s", code, err, s, out, errOut)
	}
	t.Setenv("CI_NODE_INDEX", "3") // GitLab's, from 1: the Job's variables come first
	t.Setenv("CI_NODE_TOTAL", "3")
	os.Unsetenv("JOB_COMPLETIONS")
	code, _, errOut = lockprover("prove", "--runs", "10", "--shard", "auto")
	if code != exitUsage || !strings.Contains(errOut, "--shard: auto: JOB_COMPLETION_INDEX is set but JOB_COMPLETIONS is not") {
		t.Errorf("index without count: exit %d, %s", code, errOut)
	}
	os.Unsetenv("JOB_COMPLETION_INDEX")
	code, out, _ = lockprover("prove", "--runs", "1200", "--seed", "2", "--shard", "auto", "--json", js, "--quiet")
	if s, err := results.ReadJSON(js); code != exitOK || err != nil || s.Shard.String() != "3/3" || s.Plans != 200 {
		t.Errorf("CI_NODE_INDEX=3 of 3: exit %d, %v, %+v\n%s", code, err, s, out)
	}
	t.Setenv("LOCKPROVER_SHARD_INDEX", "3")
	t.Setenv("LOCKPROVER_SHARD_COUNT", "3")
	code, _, errOut = lockprover("prove", "--runs", "10", "--shard", "auto")
	if code != exitUsage || !strings.Contains(errOut, `LOCKPROVER_SHARD_INDEX="3" and LOCKPROVER_SHARD_COUNT="3" do not make a shard`) {
		t.Errorf("index 3 of 3 from 0: exit %d, %s", code, errOut)
	}
	for _, v := range []string{"LOCKPROVER_SHARD_INDEX", "LOCKPROVER_SHARD_COUNT", "CI_NODE_INDEX", "CI_NODE_TOTAL"} {
		os.Unsetenv(v)
	}
	code, _, errOut = lockprover("prove", "--runs", "10", "--shard", "auto")
	if code != exitUsage || !strings.Contains(errOut, "no shard in the environment") {
		t.Errorf("no variables: exit %d, %s", code, errOut)
	}
}

// Under GitHub Actions a violation is annotated on the file to open: the
// counterexample's plan, the history checked; elsewhere nothing is.
func TestGitHubAnnotations(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join("..", "..", "..", "testdata", "histories", "20-double-holder.jsonl")
	t.Setenv("GITHUB_ACTIONS", "true")
	_, out, _ := lockprover("prove", "--mutant", "trust-scan", "--seed", "1", "--runs", "50", "--out", filepath.Join(dir, "cx"))
	if want := "::error file=" + filepath.Join(dir, "cx", "plan.json") + ",title=slot-exclusive violated::slot 1: "; !strings.Contains(out, want) || !strings.Contains(out, "%0Areplay: lockprover replay ") {
		t.Errorf("prove: no %q in\n%s", want, out)
	}
	_, out, _ = lockprover("check", hist)
	if want := "::error file=" + hist + ",line=5,title=slot-exclusive FAIL (lock sem)::slot 1: c2 acquire"; !strings.Contains(out, want) {
		t.Errorf("check: no %q in\n%s", want, out)
	}
	_, out, _ = lockprover("replay", filepath.Join(dir, "cx", "plan.json"))
	if !strings.Contains(out, "::error file="+filepath.Join(dir, "cx", "plan.json")+",title=slot-exclusive FAIL") {
		t.Errorf("replay: no annotation in\n%s", out)
	}
	t.Setenv("GITHUB_ACTIONS", "")
	if _, out, _ = lockprover("check", hist); strings.Contains(out, "::error") {
		t.Errorf("annotated outside GitHub Actions:\n%s", out)
	}
	if got := escapeProperty("a,b:c%d\ne"); got != "a%2Cb%3Ac%25d%0Ae" {
		t.Errorf("escapeProperty: %q", got)
	}
}

// --quiet prints the result and what failed, not the banner, the progress
// or what passed; the JSON and JUnit files are written either way.
func TestQuiet(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := lockprover("prove", "--runs", "20", "--seed", "1", "--quiet", "--junit", filepath.Join(dir, "p.xml"))
	if code != exitOK || strings.Contains(out, "proving") || !strings.Contains(out, "every property held") {
		t.Errorf("prove --quiet: exit %d\n%s", code, out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "p.xml")); err != nil || !strings.Contains(string(data), "20 plans") {
		t.Errorf("prove --junit: %v\n%s", err, data)
	}
	pass := filepath.Join("..", "..", "..", "testdata", "histories", "01-turns.jsonl")
	fail := filepath.Join("..", "..", "..", "testdata", "histories", "20-double-holder.jsonl")
	code, out, _ = lockprover("check", "--quiet", pass, fail)
	if code != exitViolation || strings.Contains(out, pass) || !strings.Contains(out, fail) || !strings.HasSuffix(out, "2 histories checked: FAIL\n") {
		t.Errorf("check --quiet: exit %d\n%s", code, out)
	}
	js := filepath.Join(dir, "c.json")
	code, _, _ = lockprover("check", "--json", js, pass, fail)
	s, err := results.ReadJSON(js)
	if code != exitViolation || err != nil || len(s.Histories) != 2 || s.Histories[0].Result != results.Held || s.Histories[1].Result != results.Violated || s.Result != results.Violated {
		t.Errorf("check --json: exit %d, %v, %+v", code, err, s)
	}
}

// Output files that cannot be written are refused before anything runs.
func TestOutputFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	os.WriteFile(file, nil, 0o644)
	hist := filepath.Join("..", "..", "..", "testdata", "histories", "20-double-holder.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--json", dir}, "--json: " + dir + " is a directory"},
		{[]string{"prove", "--junit", filepath.Join(file, "x.xml")}, "--junit: " + file + " is a file"},
		{[]string{"check", "--json", "/proc/r.json", hist}, "--json: cannot write in /proc"},
		{[]string{"replay", "--junit", "x.xml", "--json", "x.xml", "plan.json"}, "--json and --junit name the same file"},
		{[]string{"mutants", "--json", "m.json"}, "--json and --junit go with --detect"},
		{[]string{"merge"}, "give the directories"},
		{[]string{"merge", dir}, dir + " holds no lockprover summary"},
		{[]string{"merge", file}, file + ": not JSON"},
		{[]string{"prove", "--shard", "4/3"}, "--shard: want i/n with 1 <= i <= n, or auto"},
	} {
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
