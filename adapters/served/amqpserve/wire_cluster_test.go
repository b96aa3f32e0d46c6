package amqpserve_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// wireClusterEnv is conform.ClusterEnv on the simulated cluster served on
// the wire: each client of a sequence dials its node's port with
// amqp091-go; the sequence's clock, its faults and its timeouts are the
// World's, taken in the served process's coroutine (Process.Do).
type wireClusterEnv struct {
	p *amqpserve.Process
	w *rabbitmqsim.World
	// urls are the process's ports, by node.
	urls map[string]string
}

func (e wireClusterEnv) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	return rabbitmq.New(e.urls[conform.ClusterNodeOf(cfg.Name)]).Dial(ctx, cfg)
}

// Sleep lets d pass on the World's clock, then 10 ms of real time for the
// clients to take in what the broker did meanwhile: a connection whose
// client's heartbeats timed out (the World decides, the served broker
// resets the socket), which amqp091-go's reader learns on its own
// goroutine. On a real cluster the client's own timer has found it out
// long before the sequence's next step.
func (e wireClusterEnv) Sleep(ctx context.Context, d time.Duration) error {
	var err error
	e.p.Do(func() { err = e.p.Sleep(ctx, d) })
	time.Sleep(10 * time.Millisecond)
	return err
}

func (e wireClusterEnv) Fault(fault, target string) error {
	var err error
	e.p.Do(func() { err = e.w.Strike(fault, target) })
	return err
}

// Timeout is a context that ends d later on the World's clock: what the
// sequence's client waits for a reply, as the simulator's own harness
// waits (rabbitmqsim's WithTimeout), here ended by an event of the World.
func (e wireClusterEnv) Timeout(d time.Duration) (context.Context, context.CancelFunc) {
	ctx := &worldCtx{Context: context.Background(), done: make(chan struct{})}
	e.p.Do(func() {
		e.w.After(d, func() {
			if ctx.Err() == nil {
				// As the real client does: amqp091-go's caller, its
				// time up, tears the connection down (rabbitmq's conn.call).
				e.p.Abandon()
			}
			ctx.end(context.DeadlineExceeded)
		})
	})
	return ctx, func() { ctx.end(context.Canceled) }
}

// worldCtx is a context ended by the World: done at an event of virtual
// time, its Err then context.DeadlineExceeded, as a real deadline's.
type worldCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	err  error
}

func (c *worldCtx) Done() <-chan struct{} { return c.done }

func (c *worldCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *worldCtx) end(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	})
}

// runWireCluster is conform.RunSimCluster with the cluster served on the
// wire: the sequence's clients are amqp091-go's, each through its node's
// port.
func runWireCluster(mode, version string, tick, steady time.Duration, seed uint64, steps []conform.ClusterStep) ([]string, error) {
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed), Version: version, Cluster: &rabbitmqsim.ClusterOptions{
		Nodes: []string{"n1", "n2", "n3"}, PartitionHandling: mode, NetTicktime: tick}})
	s := amqpserve.New(w, amqpserve.Options{Speedup: -1, Version: version})
	defer s.Close()
	var out []string
	var err error
	w.Go("driver", func(b broker.Broker) {
		p, perr := s.Process("driver", b)
		if perr != nil {
			err = perr
			return
		}
		urls := map[string]string{}
		for i, node := range append([]string{w.NodeOf("driver")}, otherNodes(w)...) {
			urls[node] = p.URLs()[i]
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			out = conform.RunClusterSteps(wireClusterEnv{p: p, w: w, urls: urls}, "cd-", steps, steady)
		}()
		if p.Await(done, time.After(10*time.Minute), nil) != 0 {
			err = fmt.Errorf("the sequence did not end in ten minutes")
		}
	})
	if rerr := w.Run(); rerr != nil {
		return nil, rerr
	}
	if u := s.Unserved(); len(u) > 0 {
		return out, fmt.Errorf("unserved: %v", u)
	}
	return out, err
}

// otherNodes are the cluster's nodes but the driver's own, in order: the
// order of Process.URLs after the first.
func otherNodes(w *rabbitmqsim.World) []string {
	var out []string
	for _, n := range w.Nodes() {
		if n != w.NodeOf("driver") {
			out = append(out, n)
		}
	}
	return out
}

// The simulated cluster served on the wire gives what real clusters
// observed, through amqp091-go, for the recorded runs of conform's
// cluster differential (adapters/conform/testdata/cluster-real.jsonl:
// RabbitMQ 3.10.8 under ignore, pause_minority and autoheal, 4.3.6 and
// 4.0.5 with Khepri), as the simulator in process does
// (TestSimClusterGivesEveryRecordedRun): one of conform.SimSeeds seeds
// must give each record's observations. make test holds a few records of
// each mode; $LOCKPROVER_WIRE_RECORDS=all (or a count a mode) holds more.
func TestWireClusterGivesTheRecordedRuns(t *testing.T) {
	f, err := os.Open("../../conform/testdata/cluster-real.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := conform.ReadClusterRecords(f, f.Name())
	if err != nil {
		t.Fatal(err)
	}
	per := 2
	switch v := os.Getenv("LOCKPROVER_WIRE_RECORDS"); v {
	case "":
	case "all":
		per = len(recs)
	default:
		if per, err = strconv.Atoi(v); err != nil || per < 1 {
			t.Fatalf("LOCKPROVER_WIRE_RECORDS=%q: want all or a count", v)
		}
	}
	only := os.Getenv("LOCKPROVER_WIRE_RECORD") // seed/sequence: that record alone
	taken, given, diverged := map[string]int{}, map[string]int{}, 0
	start := time.Now()
	for _, rec := range recs {
		mode := rec.Mode + " " + rec.Version
		if taken[mode] >= per || only != "" && only != fmt.Sprintf("%d/%d", rec.Seed, rec.Sequence) {
			continue
		}
		taken[mode]++
		_, d, err := conform.MatchClusterRecordsOn(runWireCluster, []conform.ClusterRecord{rec})
		if err != nil {
			t.Fatalf("%s seed %d sequence %d: %v", mode, rec.Seed, rec.Sequence, err)
		}
		if d != nil {
			diverged++
			t.Errorf("%s seed %d: the served cluster does not give what the real one observed:\n%s", mode, rec.Seed, d)
			continue
		}
		given[mode]++
	}
	t.Logf("given %v of %v recorded runs, %d not, in %v", given, taken, diverged, time.Since(start).Round(time.Second))
}

// A client that gives up on a method the World holds (a declare of a
// queue whose node was killed, the Khepri leader with it; a write through
// a node cut off from the store) tears its connection down, as amqp091-go's
// callers do: the served broker's Abandon ends the held method at the
// client's deadline on the World's clock as the World ends one at a
// context's deadline (World.Expire: the write kept, to commit at the
// heal), so that the sequence goes on as on the real cluster, rather than
// its process being held until the World, with nothing left to do, kills
// it as stuck (conform seed 2026112801, sequence 46), or the write being
// lost with the connection (seed 2026112802, sequence 44: d1 declared
// after the heal, its publishes acked), or a dial to a paused node held
// past the client's deadline (4.0.5, seed 2026112901, sequence 81: the
// sequence's clock then ran late, and q2's node was freed of it).
func TestWireClusterClientGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		steps         []conform.ClusterStep
		real          []string
	}{
		{"2026112801/46", "", []conform.ClusterStep{{On: "B", Do: "declare-durable", Arg: "d1"}, {On: "C", Do: "declare-durable", Arg: "d1"},
			{On: "B", Do: "delete", Arg: "q1"}, {Do: "kill", Arg: "n3"}, {On: "B", Do: "declare-passive", Arg: "q1"}, {Do: "start", Arg: "n3"},
			{Do: "kill", Arg: "n2"}, {On: "C", Do: "delete", Arg: "q1"}, {On: "C", Do: "declare-passive", Arg: "d1"}, {On: "A", Do: "publish", Arg: "d1"}},
			[]string{"ok", "ok", "ok", "done", "404", "done", "done", "ok", "timeout", "nacked"}},
		{"2026112802/44", "", []conform.ClusterStep{{On: "B", Do: "declare-passive", Arg: "d1"}, {Do: "bridge", Arg: "n3"},
			{On: "A", Do: "declare-durable", Arg: "d1"}, {On: "A", Do: "declare-durable", Arg: "d1"}, {Do: "heal"}, {On: "C", Do: "declare-exclusive", Arg: "q2"},
			{On: "B", Do: "publish", Arg: "d1"}, {On: "C", Do: "publish", Arg: "d1"}, {Do: "pause", Arg: "n3"}, {On: "A", Do: "declare-passive", Arg: "q2"}},
			[]string{"404", "done", "timeout", "timeout", "done", "ok", "acked", "acked", "done", "timeout"}},
		{"2026112901/81", "4.0.5", []conform.ClusterStep{{On: "C", Do: "declare-exclusive", Arg: "q2"}, {Do: "cut-one-way", Arg: "n3"},
			{Do: "heal"}, {On: "C", Do: "publish", Arg: "d1"}, {On: "C", Do: "declare-exclusive", Arg: "q2"}, {Do: "pause", Arg: "n3"},
			{On: "C", Do: "declare-durable", Arg: "d1"}, {On: "A", Do: "declare-durable", Arg: "d1"}, {On: "A", Do: "reconnect"}, {On: "B", Do: "publish", Arg: "q2"}},
			[]string{"ok", "done", "done", "returned", "ok", "done", "dial: timeout", "ok", "ok", "timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, k, err := conform.ClusterMatchOn(runWireCluster, rabbitmqsim.Khepri, tc.version, 5*time.Second, conform.ClusterSteady, tc.steps, tc.real)
			if err != nil {
				t.Fatal(err)
			}
			if k >= 0 {
				t.Fatalf("through the wire, step %d: %q, the real cluster: %q", k+1, got, tc.real)
			}
		})
	}
}
