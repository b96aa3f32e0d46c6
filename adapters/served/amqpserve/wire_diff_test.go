package amqpserve_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// wireEnv is semantics.Env on the served simulator: the sequence's
// connections are amqp091-go's, through the wire; its broker-side steps
// (the clock, a queue's listing, a fault) are steps of the World, taken in
// the served process's coroutine (Process.Do).
type wireEnv struct {
	broker.Broker // amqp091-go (or pika, amqplib), dialling the served port
	p             *amqpserve.Process
	w             *rabbitmqsim.World
	// noticed, if set, waits after a fault until the client knows its
	// connection closed; without it, the fault waits 25 ms of real time.
	noticed func(conn string) error
}

func (e wireEnv) Sleep(ctx context.Context, d time.Duration) error {
	var err error
	e.p.Do(func() { err = e.p.Sleep(ctx, d) })
	return err
}

func (e wireEnv) Now() time.Duration {
	var now int64
	e.p.Do(func() { now = e.w.Now() })
	return time.Duration(now)
}

func (e wireEnv) Inspect(q string) (semantics.QueueState, bool, error) {
	var info rabbitmqsim.QueueInfo
	var ok bool
	e.p.Do(func() { info, ok = e.w.Queue(q) })
	// The World names a served connection process#connection_name.
	_, owner, _ := strings.Cut(info.Owner, "#")
	return semantics.QueueState{Durable: info.Durable, AutoDelete: info.AutoDelete, Owner: owner, Messages: info.Messages, Consumers: info.Consumers}, ok, nil
}

// Fault strikes as conform's simulator does, then waits the same 50 ms of
// virtual time for the broker to release the connection, and until the
// client has taken in what the broker sent (a connection.close): 25 ms of
// real time for amqp091-go's reader, or as long as noticed says. On
// RabbitMQ, conform's Env waits until the client knows, and its Settle
// waits for the broker by rabbitmqctl.
func (e wireEnv) Fault(kind, conn string) error {
	var err error
	e.p.Do(func() {
		switch kind {
		case "close-socket":
			err = e.w.CloseSocket("sequence#" + conn)
		case "force-close":
			err = e.w.ForceClose("sequence#" + conn)
		default:
			err = fmt.Errorf("fault %q is not drawn", kind)
		}
		if err == nil {
			err = e.p.Sleep(context.Background(), 50*time.Millisecond)
		}
	})
	switch {
	case err != nil:
		return err
	case e.noticed != nil:
		return e.noticed(conn)
	}
	time.Sleep(25 * time.Millisecond)
	return nil
}

func (e wireEnv) StopBroker() error  { return fmt.Errorf("restarts are not drawn") }
func (e wireEnv) StartBroker() error { return fmt.Errorf("restarts are not drawn") }

// runWire runs ops on a fresh served simulator through client, which
// makes a broker.Broker for the served port's URL: rabbitmq.New
// (amqp091-go), or a wireClient's (pika, amqplib).
func runWire(ops []conform.Op, client func(url string) broker.Broker) ([]string, error) {
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(0)})
	s := amqpserve.New(w, amqpserve.Options{Speedup: -1})
	defer s.Close()
	var res semantics.Result
	var err error
	w.Go("sequence", func(b broker.Broker) {
		p, perr := s.Process("sequence", b)
		if perr != nil {
			err = perr
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			env := wireEnv{Broker: client(p.URL()), p: p, w: w}
			if n, ok := env.Broker.(interface{ noticed(string) error }); ok {
				env.noticed = n.noticed
			}
			res = semantics.Run(context.Background(), env, conform.CaseOf(ops), "s-")
		}()
		if p.Await(done, time.After(time.Minute), nil) != 0 {
			err = fmt.Errorf("the sequence did not end in a minute")
		}
	})
	if rerr := w.Run(); rerr != nil {
		return nil, rerr
	}
	if u := s.Unserved(); len(u) > 0 {
		return res.Observed, fmt.Errorf("unserved: %v", u)
	}
	return res.Observed, err
}

// wireSequences is how many sequences the differential draws:
// $LOCKPROVER_WIRE_SEQUENCES, def by default (docs/served.md gives the
// runs of 300).
func wireSequences(t *testing.T, def int) int {
	if v := os.Getenv("LOCKPROVER_WIRE_SEQUENCES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOCKPROVER_WIRE_SEQUENCES=%q: want a count", v)
		}
		return n
	}
	return def
}

// The served simulator, through amqp091-go on the wire, observes what the
// real broker does, step by step, for conform's drawn sequences (its
// differential's, docs/broker-semantics.md part 2): and what the
// simulator in process observes, so that serving it changed nothing.
//
// $LOCKPROVER_WIRE_VERSION (4.0.5, 4.3.6) runs the real side on a private
// node of that version from its Debian root (root needed) instead of the
// machine's broker, as `conform --server-version` does.
func TestWireDifferential(t *testing.T) {
	url, ctl := wireBroker(t)
	ctx := context.Background()
	tg, err := conform.Open(ctx, conform.Options{URL: url, Ctl: ctl})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	seed := wireSeed(t)
	first, n, steps := wireFirst(t), wireSequences(t, 40), 0
	start := time.Now()
	for i := first; i < first+n; i++ {
		if i > first && (i-first)%25 == 0 {
			t.Logf("seed %d: sequences %d to %d agree (%v)", seed, first, i-1, time.Since(start).Round(time.Second))
		}
		ops, ok := rapidbatch.Case(seed, 0, i, func(rt *rapid.T) []conform.Op { return conform.DrawOps(rt, 24) })
		if !ok {
			continue
		}
		steps += len(ops)
		wire, err := runWire(ops, rabbitmq.New)
		if err != nil {
			t.Fatalf("sequence %d (seed %d): %v", i, seed, err)
		}
		sim, err := conform.RunSimOps(ops)
		if err != nil {
			t.Fatal(err)
		}
		real, err := tg.RunOps(ctx, ops)
		if err != nil {
			t.Fatalf("sequence %d: the real broker's harness: %v", i, err)
		}
		for _, other := range []struct {
			name string
			obs  []string
		}{{"rabbitmq", real}, {"the simulator in process", sim}} {
			if !slices.Equal(wire, other.obs) {
				t.Fatalf("sequence %d of seed %d diverges from %s:\n%s", i, seed, other.name, table(ops, "wire", wire, "other", other.obs))
			}
		}
	}
	t.Logf("seed %d: %d sequences (%d to %d), %d steps, the served simulator observed what RabbitMQ and the simulator did, in %v", seed, n, first, first+n-1, steps, time.Since(start).Round(time.Second))
}

// wireFirst is the first sequence the differential runs:
// $LOCKPROVER_WIRE_FIRST, 0 by default. A long run (a private node's,
// where a queue listing is a rabbitmqctl command of a second) goes on
// from where an earlier one of the same seed stopped: it says every 25
// sequences how far it agreed.
func wireFirst(t *testing.T) int {
	v := os.Getenv("LOCKPROVER_WIRE_FIRST")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("LOCKPROVER_WIRE_FIRST=%q: want a sequence number, 0 or more", v)
	}
	return n
}

// wireSeed is the seed the differential draws from:
// $LOCKPROVER_WIRE_SEED, or the clock's.
func wireSeed(t *testing.T) uint64 {
	v := os.Getenv("LOCKPROVER_WIRE_SEED")
	if v == "" {
		return uint64(time.Now().UnixNano())
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("LOCKPROVER_WIRE_SEED=%q: want a number", v)
	}
	return seed
}

// wireBroker is the real broker of the differential: the machine's
// (rabbitmqtest.URL), or a private node of $LOCKPROVER_WIRE_VERSION, stopped
// at t's end, with its rabbitmqctl command.
func wireBroker(t *testing.T) (url string, ctl []string) {
	name := os.Getenv("LOCKPROVER_WIRE_VERSION")
	if name == "" {
		return rabbitmqtest.URL(t), nil
	}
	v, err := versions.Lookup("rabbitmq", name)
	if err != nil {
		t.Fatalf("LOCKPROVER_WIRE_VERSION=%s: %v", name, err)
	}
	if os.Geteuid() != 0 || !v.Made() {
		t.Skipf("%v runs from a Debian root in a network namespace: needs root and the root made (lockprover servers --make rabbitmq-%s)", v, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := rabbitmq.StartSingle(ctx, t.TempDir(), rabbitmq.ClusterOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the %s node: %v", name, err)
		}
	})
	if ctl, err = s.CtlCommand(); err != nil {
		t.Fatal(err)
	}
	return s.URL(), ctl
}

// table shows ops with what two runs, named a and b, observed of each,
// marking the steps where they differ.
func table(ops []conform.Op, a string, as []string, b string, bs []string) string {
	var sb strings.Builder
	for i, o := range ops {
		mark := "  "
		if at(as, i) != at(bs, i) {
			mark = "!!"
		}
		fmt.Fprintf(&sb, "%s %2d. %-50s %s: %-24s %s: %s\n", mark, i+1, o, a, at(as, i), b, at(bs, i))
	}
	return sb.String()
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "-"
}
