package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// benchBrokerURL is LOCKPROVER_AMQP_URL, or the local broker if it answers;
// otherwise the test is skipped.
func benchBrokerURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("LOCKPROVER_AMQP_URL"); u != "" {
		return u
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:5672", 500*time.Millisecond)
	if err != nil {
		t.Skip("no RabbitMQ broker: set LOCKPROVER_AMQP_URL or start RabbitMQ on 127.0.0.1:5672")
	}
	c.Close()
	return rabbitmq.DefaultURL
}

func TestBench(t *testing.T) {
	quick.Skip(t, "RabbitMQ")
	t.Parallel()
	u := benchBrokerURL(t)
	const slots = 3
	var out, errOut bytes.Buffer
	code := runBench([]string{"--amqp-url", u, "--n", "3", "--warmup", "1", "--slots", "3"}, &out, &errOut)
	t.Logf("\n%s", out.String())
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	text := out.String()

	cells := map[string][]string{} // row name -> its cells
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		f := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		cells[f[0]] = f
	}
	rows := []string{
		"acquire, slot 1, all free (default: verify after)",
		"acquire, slot 1, all free (SkipVerifyAfterAcquire)",
		"acquire, slot 3, 2 held (default: verify after)",
		"acquire, slot 3, 2 held (SkipVerifyAfterAcquire)",
		"verify", "release",
		"admin change +1 (3 to 4 slots)", "admin change -1 (4 to 3 slots)", "admin count (3 slots)",
	}
	for _, r := range rows {
		if len(cells[r]) != 7 {
			t.Errorf("row %q: %q", r, cells[r])
		}
	}
	for _, f := range []string{"F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10"} {
		if len(cells[f]) != 6 {
			t.Errorf("floor %s: %q", f, cells[f])
		}
	}
	methods := map[string]string{
		"verify":  "1 (1 basic.publish)",
		"release": "1 (1 queue.delete)",
		"acquire, slot 1, all free (default: verify after)":  "4 (3 basic.publish, 1 queue.declare)",
		"acquire, slot 1, all free (SkipVerifyAfterAcquire)": "3 (2 basic.publish, 1 queue.declare)",
		"acquire, slot 3, 2 held (SkipVerifyAfterAcquire)":   "7 (6 basic.publish, 1 queue.declare)",
	}
	for r, want := range methods {
		if c := cells[r]; len(c) > 4 && c[4] != want {
			t.Errorf("%s: methods/op %q, want %q", r, c[4], want)
		}
	}
	if c := cells["F1"]; len(c) > 5 && c[5] != "1 (1 basic.publish)" {
		t.Errorf("F1: methods/op %q", c[5])
	}
	for _, s := range []string{"Targets", "verify within 1.3x", "judged on SkipVerifyAfterAcquire"} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q", s)
		}
	}

	// Nothing with the run's prefix is left.
	m := regexp.MustCompile(`queue prefix (lp-bench-[0-9a-f]+-)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no queue prefix in the output")
	}
	prefix := m[1]
	sem := prefix + "sem"
	names := []string{sem, prefix + "floor-B"}
	for l := 1; l <= slots+1; l++ {
		names = append(names, amqplocks.SlotQueue(sem, l), amqplocks.HolderQueue(sem, l))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := rabbitmq.New(u).Dial(ctx, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range names {
		ch, err := conn.Channel(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.Declare(ctx, q, broker.DeclareOptions{Passive: true})
		if broker.Code(err) != broker.NotFound {
			t.Errorf("queue %s left behind (passive declare: %v)", q, err)
			ch.Close()
		}
	}
	// And a listing, where rabbitmqctl can reach the broker.
	if path, err := exec.LookPath("rabbitmqctl"); err == nil {
		lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
		defer lcancel()
		if list, err := exec.CommandContext(lctx, path, "-q", "list_queues", "name").Output(); err == nil {
			for _, q := range strings.Fields(string(list)) {
				if strings.HasPrefix(q, prefix) {
					t.Errorf("rabbitmqctl list_queues: %s left behind", q)
				}
			}
		}
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--n", "0"},
		{"--slots", "1"},
		{"extra"},
		{"--amqp-url", "amqps://guest:guest@127.0.0.1:5671/"},
		{"--amqp-url", "amqp://guest:guest@127.0.0.1:1/"}, // nothing listens on port 1
	} {
		var out, errOut bytes.Buffer
		if code := runBench(args, &out, &errOut); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, errOut.String())
		}
	}
}
