package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"go.yaml.in/yaml/v3"
)

// The recipes in examples/ci are checked for what can be checked without
// GitHub, a cluster or a Docker engine: the YAML parses, every lockprover
// command in them names a verb that exists with flags it has, they shard
// with --shard auto and pass the shard in, and the Dockerfile's build step
// builds lockprover. The Docker-only GitHub recipe's prove also runs, where
// a Docker engine is.

const examples = "../../../examples/ci"

// flagsOf is the flags VERB -h prints, by name without dashes.
func flagsOf(t *testing.T, verb string) map[string]bool {
	t.Helper()
	code, help, _ := lockprover(verb, "-h")
	if code != exitOK {
		t.Fatalf("lockprover %s -h: exit %d", verb, code)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z][a-z-]*)`).FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	return flags
}

// checkCommand checks one lockprover command line (its words after
// "lockprover"): a verb that exists, and flags it has, each with a value
// where it takes one. It returns the flags, by name, with their values.
func checkCommand(t *testing.T, where string, words []string) map[string]string {
	t.Helper()
	if len(words) == 0 {
		t.Errorf("%s: lockprover with no verb", where)
		return nil
	}
	verb := words[0]
	known := false
	for _, c := range commands() {
		known = known || c.name == verb
	}
	if !known {
		t.Errorf("%s: lockprover has no verb %q", where, verb)
		return nil
	}
	flags := flagsOf(t, verb)
	got := map[string]string{}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: lockprover %s has no flag --%s", where, verb, name)
			continue
		}
		if !hasValue && name != "quiet" && name != "v" && name != "allow-restart" && i+1 < len(words) {
			i++
			value = words[i]
		}
		got[name] = value
	}
	return got
}

// shellWords splits a shell line into words, dropping quotes (enough for
// the recipes' lines: no escapes inside quotes).
func shellWords(line string) []string {
	var words []string
	for _, m := range regexp.MustCompile(`"[^"]*"|'[^']*'|[^\s"']+`).FindAllString(line, -1) {
		words = append(words, strings.Trim(m, `"'`))
	}
	return words
}

func readYAML(t *testing.T, name string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(examples, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, doc)
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no YAML document", name)
	}
	return docs
}

// get walks a YAML tree by keys (strings) and list indexes (ints).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestGitHubActionsRecipe(t *testing.T) {
	wf := readYAML(t, "github-actions.yaml")[0]
	jobs, _ := wf["jobs"].(map[string]any)
	prove, merge := jobs["prove"], jobs["merge"]
	if prove == nil || merge == nil {
		t.Fatalf("want jobs prove and merge, got %v", jobs)
	}
	if shards, _ := get(prove, "strategy", "matrix", "shard").([]any); len(shards) < 2 {
		t.Errorf("the prove job's matrix has shards %v", shards)
	}
	if get(merge, "needs") != "prove" || get(merge, "if") != "always()" {
		t.Errorf("the merge job must need prove and run always: needs %v, if %v", get(merge, "needs"), get(merge, "if"))
	}
	// Every lockprover line of every run step.
	verbs := map[string]map[string]string{}
	for _, name := range []string{"prove", "merge"} {
		steps, _ := get(jobs[name], "steps").([]any)
		var uses []string
		for i, st := range steps {
			if u, ok := get(st, "uses").(string); ok {
				uses = append(uses, u)
			}
			run, _ := get(st, "run").(string)
			for _, line := range strings.Split(run, "\n") {
				words := shellWords(line)
				if len(words) > 0 && words[0] == "lockprover" {
					where := fmt.Sprintf("github-actions.yaml: job %s, step %d", name, i+1)
					verbs[words[1]] = checkCommand(t, where, words[1:])
					if words[1] == "prove" {
						env, _ := get(st, "env").(map[string]any)
						if env["LOCKPROVER_SHARD_INDEX"] == nil || env["LOCKPROVER_SHARD_COUNT"] == nil {
							t.Errorf("%s: --shard auto without LOCKPROVER_SHARD_INDEX and _COUNT in the step's env", where)
						}
					}
				}
			}
		}
		want := map[string][]string{"prove": {"actions/upload-artifact"}, "merge": {"actions/download-artifact", "actions/upload-artifact"}}[name]
		for _, w := range want {
			if !strings.Contains(strings.Join(uses, " "), w) {
				t.Errorf("job %s does not use %s (uses %v)", name, w, uses)
			}
		}
	}
	p, m := verbs["prove"], verbs["merge"]
	if p == nil || m == nil {
		t.Fatalf("want a lockprover prove and a lockprover merge line, got %v", verbs)
	}
	if p["shard"] != "auto" || p["json"] == "" || p["seed"] == "" {
		t.Errorf("prove runs with %v: want --shard auto, --json and a fixed --seed", p)
	}
	if m["json"] == "" || m["junit"] == "" {
		t.Errorf("merge runs with %v: want --json and --junit", m)
	}
}

func TestKubernetesRecipe(t *testing.T) {
	var job, mergeJob map[string]any
	for _, name := range []string{"kubernetes-job.yaml", "kubernetes-merge.yaml"} {
		for _, doc := range readYAML(t, name) {
			if doc["kind"] != "Job" {
				continue
			}
			c := get(doc, "spec", "template", "spec", "containers", 0)
			args, _ := get(c, "args").([]any)
			var words []string
			for _, a := range args {
				words = append(words, a.(string))
			}
			flags := checkCommand(t, name, words)
			switch words[0] {
			case "prove":
				job = doc
				if flags["shard"] != "auto" {
					t.Errorf("%s: prove runs with --shard %q, want auto", name, flags["shard"])
				}
				if !strings.Contains(flags["json"], "$(JOB_COMPLETION_INDEX)") || !strings.Contains(flags["out"], "$(JOB_COMPLETION_INDEX)") {
					t.Errorf("%s: each shard must write where the others do not: --json %s, --out %s", name, flags["json"], flags["out"])
				}
				completions := get(doc, "spec", "completions")
				found := false
				for _, e := range get(c, "env").([]any) {
					if get(e, "name") == "JOB_COMPLETIONS" {
						found = true
						if v, _ := get(e, "value").(string); v != fmt.Sprint(completions) {
							t.Errorf("%s: JOB_COMPLETIONS is %q but spec.completions is %v", name, v, completions)
						}
					}
				}
				if !found {
					t.Errorf("%s: no JOB_COMPLETIONS in the container's env (--shard auto needs the count)", name)
				}
				if get(doc, "spec", "completionMode") != "Indexed" || get(doc, "spec", "template", "spec", "restartPolicy") != "Never" {
					t.Errorf("%s: want an Indexed Job with restartPolicy Never", name)
				}
			case "merge":
				mergeJob = doc
			}
		}
	}
	if job == nil || mergeJob == nil {
		t.Fatal("want a prove Job and a merge Job")
	}
}

// The Dockerfile's build step builds lockprover as it says: run here, with
// its output moved to a temporary directory (no Docker engine runs here).
// That the Dockerfile has such a step, and lockprover as its entry point,
// is checked in every run. The build itself (staticBinary) compiles the
// standard library and every package again for CGO_ENABLED=0 -trimpath:
// 2m40s on two cores at a load of 4, and 8 minutes of the package's 15
// beside the suite, where each change to the tree makes it start over. So
// it runs in a job of its own (make static, which .ci/run runs before make
// test), and make test skips it.
func TestDockerfileBuilds(t *testing.T) {
	t.Parallel()
	dockerfileBuild(t)
	out := staticBinary(t)
	if b, err := exec.Command(out, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "lockprover ") {
		t.Errorf("the image's binary: %v, %s", err, b)
	}
}

// dockerfileBuild is the Dockerfile's go build step (its RUN line), after
// checking that it builds ./cmd/lockprover to /out/lockprover, the image's
// entry point.
func dockerfileBuild(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var build string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build") {
			build = strings.TrimPrefix(line, "RUN ")
		}
	}
	if build == "" || !strings.Contains(build, "./cmd/lockprover") || !strings.Contains(build, "/out/lockprover") ||
		!strings.Contains(string(data), "ENTRYPOINT [\"/usr/local/bin/lockprover\"]") {
		t.Fatalf("the Dockerfile has no go build of ./cmd/lockprover to /out/lockprover with lockprover as its entry point:\n%s", data)
	}
	return build
}

// The binary the Dockerfile's build step makes, built here once per test
// process (its output moved to a temporary directory), for
// TestDockerfileBuilds and TestProveDockerAuto, which runs it in a
// container.
var static struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// staticBinary runs the Dockerfile's build step, once, and returns the
// binary's path; it skips the test unless LOCKPROVER_STATIC_BUILD=1 (make
// static), since that build compiles everything again (TestDockerfileBuilds).
func staticBinary(t *testing.T) string {
	t.Helper()
	if os.Getenv("LOCKPROVER_STATIC_BUILD") != "1" {
		t.Skip("the Dockerfile's static build runs in a job of its own: make static (LOCKPROVER_STATIC_BUILD=1), which .ci/run runs before make test")
	}
	build := dockerfileBuild(t)
	static.once.Do(func() {
		if static.dir, static.err = os.MkdirTemp("", "lockprover-static-"); static.err != nil {
			return
		}
		static.path = filepath.Join(static.dir, "lockprover")
		cmd := exec.Command("sh", "-c", strings.Replace(build, "/out/lockprover", static.path, 1))
		cmd.Dir = filepath.Join("..", "..", "..")
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			static.err = fmt.Errorf("%s: %v\n%s", build, err, b)
		}
		t.Logf("the Dockerfile's build step took %v", time.Since(start).Round(time.Second))
	})
	if static.err != nil {
		t.Fatal(static.err)
	}
	return static.path
}

// TestGitHubActionsDockerRecipe checks the Docker-only recipe: one job, no
// services (no broker but Docker's), a prove of an implementation naming
// no broker; and runs its prove line where Docker and the image are here,
// for three plans, with --docker always added (a broker answers on
// 127.0.0.1:5672 on this machine, where a runner has none).
func TestGitHubActionsDockerRecipe(t *testing.T) {
	wf := readYAML(t, "github-actions-docker.yaml")[0]
	job := get(wf, "jobs", "prove")
	if job == nil || get(job, "services") != nil {
		t.Fatalf("want a job prove with no services, got %v", job)
	}
	impl, _ := get(job, "env", "IMPL").(string)
	var line []string
	steps, _ := get(job, "steps").([]any)
	for i, st := range steps {
		run, _ := get(st, "run").(string)
		words := shellWords(run)
		if len(words) > 1 && words[0] == "lockprover" && words[1] == "prove" {
			p := checkCommand(t, fmt.Sprintf("github-actions-docker.yaml: step %d", i+1), words[1:])
			if p["impl"] != "$IMPL" || p["amqp-url"] != "" || p["docker"] != "" || p["target"] != "" {
				t.Errorf("prove runs with %v: want --impl \"$IMPL\" and no broker, target or --docker named", p)
			}
			line = words[1:]
		}
	}
	if line == nil || impl == "" {
		t.Fatalf("want a lockprover prove step and IMPL in the job's env")
	}
	if testing.Short() {
		t.Skip("running the recipe's prove starts a broker container")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := docker.Connect(ctx, "")
	if err != nil {
		t.Skipf("%v (as root, .ci/docker up starts one and prints its DOCKER_HOST)", err)
	}
	if ok, err := e.HasImage(ctx, dockerImage()); err != nil || !ok {
		t.Skipf("the engine has no %s (%v): set LOCKPROVER_RABBITMQ_IMAGE to one it has (.ci/docker up builds one)", dockerImage(), err)
	}
	bin := builtBinary(t)
	dir := t.TempDir()
	var args []string
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case "$IMPL":
			args = append(args, strings.Replace(impl, "lockprover", bin, 1))
		case "--time":
			args = append(args, "--runs", "3")
			i++
		default:
			args = append(args, line[i])
		}
	}
	args = append(args, "--docker", "always", "--docker-image", dockerImage())
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		// What the counterexample says of the broker's and the clients'
		// ends of each connection (a false available FAIL beside a busy
		// suite left an admin's unknown outcome unexcused once, and the
		// test's directory went with it).
		t.Fatalf("lockprover %v: %v\n%s%s", args, err, out, counterexampleFiles(filepath.Join(dir, "counterexample")))
	}
	for _, w := range []string{"started RabbitMQ container", "every property held", "removed RabbitMQ container"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("the recipe's prove did not say %q:\n%s", w, out)
		}
	}
	if ids, err := e.Labelled(ctx, rabbitmq.ContainerLabel, strconv.Itoa(cmd.Process.Pid)); err != nil || len(ids) != 0 {
		t.Errorf("containers left: %v %v", ids, err)
	}
}

// counterexampleFiles is the text of a counterexample directory's
// summary, history and proxies' trace, for a failing test's log.
func counterexampleFiles(dir string) string {
	var b strings.Builder
	for _, f := range []string{"summary.txt", "history.jsonl", "trace.txt"} {
		if data, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			fmt.Fprintf(&b, "\n--- %s\n%s", filepath.Join(dir, f), data)
		}
	}
	return b.String()
}
