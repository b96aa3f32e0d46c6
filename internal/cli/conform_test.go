package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/backends/rabbitmq/rabbitmqtest"
)

// conform agrees on the local broker: the whole table and 50 sequences.
// The table's timed cases (heartbeats) get four more attempts, not two:
// beside the rest of the suite, RabbitMQ's timing strays more often.
func TestConform(t *testing.T) {
	t.Parallel()
	u := rabbitmqtest.URL(t)
	var stdout, stderr bytes.Buffer
	code := runConform([]string{"--amqp-url", u, "--sequences", "50", "--seed", "7", "--retries", "4"}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code == exitUsage && strings.Contains(stderr.String(), "rabbitmqctl") {
		t.Skip("rabbitmqctl does not reach the broker's node")
	}
	if code != exitOK {
		t.Fatalf("exit %d, want %d", code, exitOK)
	}
	for _, want := range []string{"part 1:", "7b T=1s", "part 2: 50 sequences", "the simulator agrees with RabbitMQ"} {
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
	} {
		var stdout, stderr bytes.Buffer
		if code := runConform(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("conform %q: exit %d, want %d (stderr %s)", args, code, exitUsage, stderr.String())
		}
	}
	// Nothing listens on port 1: a clear error and exit 2.
	var stdout, stderr bytes.Buffer
	code := runConform([]string{"--amqp-url", "amqp://guest:guest@127.0.0.1:1/"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "connection refused") {
		t.Errorf("no broker: exit %d, stderr %q", code, stderr.String())
	}
}
