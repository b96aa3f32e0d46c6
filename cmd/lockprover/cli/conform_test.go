package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/quick"
)

// conform agrees on the local broker: the whole table and 50 sequences.
// The table's timed cases (heartbeats) get four more attempts, not two:
// beside the rest of the suite, RabbitMQ's timing strays more often.
func TestConform(t *testing.T) {
	quick.Skip(t, "RabbitMQ")
	t.Parallel()
	u := rabbitmqtest.URL(t)
	var stdout, stderr bytes.Buffer
	// A few untimed cases of part 1: the whole table, timed cases and all,
	// is adapters/conform's TestTableOnRabbitMQ (in CI, beside the suite,
	// it took ten minutes here, and its timed cases strayed).
	code := runConform([]string{"--amqp-url", u, "--cases", "1.1,4.1,9.11", "--sequences", "50", "--seed", "7", "--retries", "4"}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code == exitUsage && strings.Contains(stderr.String(), "rabbitmqctl") {
		t.Skip("rabbitmqctl does not reach the broker's node")
	}
	if code != exitOK {
		t.Fatalf("exit %d, want %d", code, exitOK)
	}
	for _, want := range []string{"part 1:", "1.1 ", "4.1 ", "9.11 ", "part 1: 3 agree", "part 2: 50 sequences", "the simulator agrees with RabbitMQ"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestConformUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--sequences", "-1"},
		{"extra"},
		{"--no-such-flag"},
		{"--amqp-url", "amqps://example.invalid/"},
		{"--cases", "1.1,no-such-case"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runConform(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("conform %q: exit %d, want %d (stderr %s)", args, code, exitUsage, stderr.String())
		}
	}
	// An unknown case is named, with the cases there are.
	var stdout, stderr bytes.Buffer
	runConform([]string{"--cases", "1.1,no-such-case"}, &stdout, &stderr)
	if !strings.Contains(stderr.String(), `--cases: no case "no-such-case"`) || !strings.Contains(stderr.String(), "7b T=1s") {
		t.Errorf("--cases no-such-case: stderr %q", stderr.String())
	}
	// Nothing listens on port 1: a clear error and exit 2.
	stdout.Reset()
	stderr.Reset()
	code := runConform([]string{"--amqp-url", "amqp://guest:guest@127.0.0.1:1/"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "connection refused") {
		t.Errorf("no broker: exit %d, stderr %q", code, stderr.String())
	}
}

// conform --cluster --recorded holds the simulated cluster to a corpus of
// real runs with no cluster: the project's corpus agrees (exit 0, counted
// by mode); a record the simulator cannot give is a divergence (exit 1);
// a run left unsettled is counted apart; a malformed line is refused
// naming the file and line (exit 2).
func TestConformRecorded(t *testing.T) {
	corpus := filepath.Join("..", "..", "..", "adapters", "conform", "testdata", "cluster-real.jsonl")
	var stdout, stderr bytes.Buffer
	if code := runConform([]string{"--cluster", "--recorded", corpus}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "recorded sequences (ignore ") || !strings.Contains(stdout.String(), "the simulated cluster gives what the real one observed on each") {
		t.Fatalf("the corpus: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(strings.Replace(first, `"real":["ok",`, `"real":["405",`, 1)+"\n"), 0o644)
	stdout.Reset()
	stderr.Reset()
	if code := runConform([]string{"--cluster", "--recorded", bad}, &stdout, &stderr); code != exitViolation || !strings.Contains(stdout.String(), "0 recorded sequences agreed") || !strings.Contains(stdout.String(), "step 1 differs") {
		t.Errorf("a 405 the simulator never gives: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitViolation, stdout.String(), stderr.String())
	}
	// A run after whose fault a node did not serve again within the wait
	// is inconclusive from there, counted apart (exit 0: what it saw
	// before agrees).
	var rec conform.ClusterRecord
	if err := json.Unmarshal([]byte(first), &rec); err != nil {
		t.Fatal(err)
	}
	rec.Real[len(rec.Real)-1] = conform.NotServing
	line, _ := json.Marshal(rec)
	unsettled := filepath.Join(t.TempDir(), "unsettled.jsonl")
	os.WriteFile(unsettled, append([]byte(first+"\n"), append(line, '\n')...), 0o644)
	stdout.Reset()
	stderr.Reset()
	if code := runConform([]string{"--cluster", "--recorded", unsettled}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "2 recorded sequences") || !strings.Contains(stdout.String(), "on each of 1; 1 inconclusive") {
		t.Errorf("an unsettled run: exit %d, want %d and it counted apart\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout.String(), stderr.String())
	}
	os.WriteFile(bad, []byte(first+"\n{\"mode\":\"ignore\"\n"), 0o644)
	stdout.Reset()
	stderr.Reset()
	if code := runConform([]string{"--cluster", "--recorded", bad}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), bad+":2: ") {
		t.Errorf("a broken second line: exit %d, want %d naming %s:2\nstderr:\n%s", code, exitUsage, bad, stderr.String())
	}
}
