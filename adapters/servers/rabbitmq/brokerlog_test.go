package rabbitmq_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	faultproxy "github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// LogReasons gives each connection's errors and warnings by its client's
// address, from since on: a missed heartbeat, a client's socket closing;
// not a channel's error, not what came before since, not a line that is
// not RabbitMQ's.
func TestLogReasons(t *testing.T) {
	since := time.Date(2026, 11, 23, 11, 57, 0, 0, time.UTC)
	got, err := rabbitmq.LogReasons("testdata/rabbit.log", since)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"127.0.0.1:37001": {"missed heartbeats from client, timeout: 1s"},
		"127.0.0.1:37540": {"missed heartbeats from client, timeout: 1s"},
		"127.0.0.1:37600": {"client unexpectedly closed TCP connection"},
		"127.0.0.1:37700": {"client unexpectedly closed TCP connection", "(a second line of the same record)"},
	}
	if len(got) != len(want) {
		t.Errorf("reasons for %d connections, want %d: %q", len(got), len(want), got)
	}
	for a, w := range want {
		if !slices.Equal(got[a], w) {
			t.Errorf("%s: %q, want %q", a, got[a], w)
		}
	}
	later, err := rabbitmq.LogReasons("testdata/rabbit.log", since.Add(11*time.Second))
	if err != nil || len(later["127.0.0.1:37001"]) > 0 || len(later["127.0.0.1:37540"]) > 0 {
		t.Errorf("from 11 s later: %q, %v; want nothing of 37001 or 37540", later, err)
	}
	if _, err := rabbitmq.LogReasons("testdata/no-such.log", since); err == nil || !strings.Contains(err.Error(), "no-such.log") {
		t.Errorf("a missing log: %v, want an error naming it", err)
	}
}

// On the real broker: a connection whose client falls silent (a
// partition in its proxy) is closed for missed heartbeats, and the
// broker's log says so under the address the proxy reports.
func TestLogReasonsOnRabbitMQ(t *testing.T) {
	t.Parallel()
	url := rabbitmqtest.URL(t)
	ctl := newCtl(t, url, true)
	ctx := ctlCtx(t)
	path, err := ctl.LogFile(ctx)
	if err != nil {
		t.Skipf("the broker's log: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the broker's log is not readable here: %v", err)
	}
	since := time.Now().Add(-time.Second)
	px, through, err := faultproxy.ListenURL(url)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	c, err := rabbitmq.New(through).Dial(ctx, broker.Config{Name: rabbitmq.UniqueName("lp-log-test-"), Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	side := px.BrokerSide()
	if len(side) != 1 {
		t.Fatalf("broker side %v, want one connection", side)
	}
	px.Partition()
	defer px.Kill() // before c.Close, which would wait on a partition
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got, err := rabbitmq.LogReasons(path, since)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got[side[0]] {
			if strings.Contains(r, "missed heartbeats from client") {
				return
			}
		}
	}
	t.Errorf("30 s after the partition, the log names no missed heartbeat of %s", side[0])
}
