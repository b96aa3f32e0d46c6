package rabbitmqsim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

var bg = context.Background()

// workload runs clients of the reference semaphore, an admin and a nemesis.
func workload(w *rabbitmqsim.World) {
	w.Go("admin", func(b broker.Broker) {
		c, _ := amqplocks.Dial(bg, b, amqplocks.Options{Heartbeat: time.Second})
		c.Admin("sem").Create(bg, 2)
		b.Sleep(bg, 30*time.Millisecond)
		c.Admin("sem").Change(bg, -1)
		c.Admin("sem").Change(bg, +2)
		c.Close()
	})
	for i := 1; i <= 4; i++ {
		w.Go(fmt.Sprintf("c%d", i), func(b broker.Broker) {
			c, err := amqplocks.Dial(bg, b, amqplocks.Options{Heartbeat: time.Second})
			if err != nil {
				return
			}
			sem := c.Semaphore("sem")
			for j := 0; j < 5; j++ {
				if slot, err := sem.Acquire(bg); err == nil {
					sem.Verify(bg, slot)
					b.Sleep(bg, 5*time.Millisecond)
					sem.Release(bg, slot)
				}
				b.Sleep(bg, 3*time.Millisecond)
			}
		})
	}
	w.Go("nemesis", func(b broker.Broker) {
		for _, fault := range []func(){
			func() { w.Partition("c1") }, func() { w.Pause("c2") }, func() { w.DropReply("c4") },
			func() { w.Kill("c3") }, func() { w.ForceClose("admin") }, func() { w.Heal("c1") },
			func() { w.Resume("c2") }, func() { w.RestartBroker() },
		} {
			b.Sleep(bg, 7*time.Millisecond)
			fault()
		}
	})
}

func trace(t *testing.T, seed uint64) string {
	var buf bytes.Buffer
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed), Trace: &buf})
	workload(w)
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	for _, q := range w.Queues() {
		fmt.Fprintf(&buf, "%+v\n", q)
	}
	return buf.String()
}

func TestSameSeedSameTrace(t *testing.T) {
	for seed := uint64(0); seed < 5; seed++ {
		a, b := trace(t, seed), trace(t, seed)
		if a != b {
			t.Fatalf("seed %d: two runs differ:\n%s", seed, firstDiff(a, b))
		}
		if strings.Count(a, "\n") < 50 {
			t.Fatalf("seed %d: trace too short to mean anything:\n%s", seed, a)
		}
	}
	if trace(t, 1) == trace(t, 2) {
		t.Error("seeds 1 and 2 gave the same trace: the decider is not consulted")
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, la[i], lb[min(i, len(lb)-1)])
		}
	}
	return "second is longer"
}

// Case R of broker-semantics.md: K connections exclusive-declare the same
// fresh name at the same time; exactly one wins, the others get 405.
func TestRacingExclusiveDeclaresHaveOneWinner(t *testing.T) {
	for _, k := range []int{2, 4, 8} {
		for seed := uint64(0); seed < 50; seed++ {
			w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed)})
			ok, locked := 0, 0
			for i := 0; i < k; i++ {
				w.Go(fmt.Sprint(i), func(b broker.Broker) {
					c, _ := b.Dial(bg, broker.Config{})
					ch, _ := c.Channel(bg)
					_, err := ch.Declare(bg, "X", broker.DeclareOptions{Exclusive: true})
					switch broker.Code(err) {
					case 0:
						ok++
					case broker.ResourceLocked:
						locked++
					default:
						t.Error(err)
					}
				})
			}
			if err := w.Run(); err != nil {
				t.Fatal(err)
			}
			if ok != 1 || locked != k-1 {
				t.Fatalf("K=%d seed %d: %d ok, %d locked", k, seed, ok, locked)
			}
		}
	}
}

func TestCostCountsMethodsAndRoundTrips(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	w.Go("c", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{})
		ch, _ := c.Channel(bg)
		ch.Confirm(bg)
		ch.Publish(bg, broker.Publishing{Key: "missing", Mandatory: true})
		ch.Declare(bg, "missing", broker.DeclareOptions{Passive: true}) // 404 closes the channel
		ch.Declare(bg, "x", broker.DeclareOptions{})                    // 504: not sent
		c.Close()
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	got := w.Cost("c")
	want := map[string]int{
		"connection.start-ok": 1, "connection.tune-ok": 1, "connection.open": 1, "connection.close": 1,
		"channel.open": 1, "channel.close-ok": 1, "confirm.select": 1, "basic.publish": 1, "queue.declare": 1,
	}
	for name, n := range want {
		if got.Methods[name] != n {
			t.Errorf("%s = %d, want %d (%v)", name, got.Methods[name], n, got)
		}
	}
	if rt := w.RoundTrips("c"); got.Connections != 1 || got.Channels != 1 || rt != 7 {
		t.Errorf("connections, channels, round trips = %d, %d, %d; want 1, 1, 7", got.Connections, got.Channels, rt)
	}
	if got.Class("queue") != 1 || got.Class("connection") != 4 {
		t.Errorf("class counts queue=%d connection=%d", got.Class("queue"), got.Class("connection"))
	}
}

// A zombie: paused past the broker's heartbeat timeout, its queue is given
// away; when it wakes, its connection is dead and it learns so on first use.
func TestPausedPastTheTimeoutWakesToADeadConnection(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	var zombieErr error
	var takenAt int64
	w.Go("zombie", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{Heartbeat: time.Second})
		ch, _ := c.Channel(bg)
		ch.Declare(bg, "X", broker.DeclareOptions{Exclusive: true})
		b.Sleep(bg, 100*time.Millisecond)
		ch.Confirm(bg)
		_, zombieErr = ch.Declare(bg, "X", broker.DeclareOptions{Passive: true})
	})
	w.Go("other", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{Heartbeat: time.Second})
		for {
			ch, _ := c.Channel(bg)
			if _, err := ch.Declare(bg, "X", broker.DeclareOptions{Exclusive: true}); err == nil {
				takenAt = w.Now()
				return
			}
			b.Sleep(bg, 50*time.Millisecond)
		}
	})
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(bg, 50*time.Millisecond)
		w.Pause("zombie")
		b.Sleep(bg, 5*time.Second)
		w.Resume("zombie")
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if takenAt == 0 || takenAt > int64(5*time.Second) {
		t.Errorf("the paused holder's queue was taken at %v, want before the resume at 5.05s", time.Duration(takenAt))
	}
	if !broker.ConnectionLost(zombieErr) {
		t.Errorf("zombie's first call after resume = %v, want a connection error", zombieErr)
	}
}

func TestShortPauseKeepsTheConnection(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	var err error
	w.Go("p", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{Heartbeat: 10 * time.Second})
		ch, _ := c.Channel(bg)
		ch.Declare(bg, "X", broker.DeclareOptions{Exclusive: true})
		b.Sleep(bg, 100*time.Millisecond)
		_, err = ch.Declare(bg, "X", broker.DeclareOptions{Passive: true})
	})
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(bg, 50*time.Millisecond)
		w.Pause("p")
		b.Sleep(bg, 5*time.Second)
		w.Resume("p")
	})
	if e := w.Run(); e != nil {
		t.Fatal(e)
	}
	if err != nil {
		t.Errorf("after a 5 s pause with a 10 s heartbeat: %v, want the connection alive", err)
	}
}

// DropReply: the broker applies the method, the client never hears back
// and its connection dies; what it held is released a few ms later.
func TestDroppedReplyIsAppliedButNeverHeard(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	var err error
	w.Go("c", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{})
		ch, _ := c.Channel(bg)
		ch.Declare(bg, "held", broker.DeclareOptions{Exclusive: true})
		w.DropReply("c")
		_, err = ch.Declare(bg, "shared", broker.DeclareOptions{Durable: true})
	})
	if e := w.Run(); e != nil {
		t.Fatal(e)
	}
	if !broker.ConnectionLost(err) {
		t.Errorf("declare with a dropped reply = %v, want a connection error", err)
	}
	if _, ok := w.Queue("shared"); !ok {
		t.Error("the method whose reply was dropped was not applied")
	}
	if _, ok := w.Queue("held"); ok {
		t.Error("the severed connection's exclusive queue was not released")
	}
}

// A partition healed before any heartbeat timeout delays a call; it does
// not fail it.
func TestHealBeforeTimeoutDeliversTheHeldCall(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	var err error
	var doneAt int64
	w.Go("c", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{Heartbeat: 10 * time.Second})
		ch, _ := c.Channel(bg)
		b.Sleep(bg, 100*time.Millisecond)
		_, err = ch.Declare(bg, "X", broker.DeclareOptions{Exclusive: true})
		doneAt = w.Now()
	})
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(bg, 50*time.Millisecond)
		w.Partition("c")
		b.Sleep(bg, 3*time.Second)
		w.Heal("c")
	})
	if e := w.Run(); e != nil {
		t.Fatal(e)
	}
	if err != nil || doneAt < int64(3*time.Second) {
		t.Errorf("held declare = %v at %v, want ok after the heal at 3.05s", err, time.Duration(doneAt))
	}
	if q, ok := w.Queue("X"); !ok || q.Owner == "" {
		t.Errorf("queue after heal: %+v, %v", q, ok)
	}
}

func TestVirtualDeadlines(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{ServerHeartbeat: -1})
	var sleepErr, callErr error
	var sleptUntil, gaveUpAt int64
	w.Go("c", func(b broker.Broker) {
		ctx, cancel := w.WithTimeout(bg, time.Second)
		defer cancel()
		sleepErr = b.Sleep(ctx, time.Hour)
		sleptUntil = w.Now()
		c, _ := b.Dial(bg, broker.Config{})
		ch, _ := c.Channel(bg)
		w.Partition("c")
		ctx, cancel = w.WithTimeout(bg, 2*time.Second)
		defer cancel()
		_, callErr = ch.Declare(ctx, "X", broker.DeclareOptions{})
		gaveUpAt = w.Now()
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(sleepErr, context.DeadlineExceeded) || sleptUntil != int64(time.Second) {
		t.Errorf("sleep = %v until %v, want DeadlineExceeded at 1s", sleepErr, time.Duration(sleptUntil))
	}
	if !errors.Is(callErr, context.DeadlineExceeded) || !broker.ConnectionLost(callErr) {
		t.Errorf("held call = %v, want DeadlineExceeded and connection-level", callErr)
	}
	if d := time.Duration(gaveUpAt - sleptUntil); d < 2*time.Second || d > 2*time.Second+10*time.Millisecond {
		t.Errorf("held call gave up %v after it began, want 2s", d)
	}
}

func TestKilledProcessRunsNoMoreBrokerCalls(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	after := false
	w.Go("victim", func(b broker.Broker) {
		c, _ := b.Dial(bg, broker.Config{})
		defer func() { after = true; c.Close() }() // a defer runs; its broker call does not
		b.Sleep(bg, time.Hour)
	})
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(bg, time.Second)
		if err := w.Kill("victim"); err != nil {
			t.Error(err)
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if c := w.Cost("victim"); c.Methods["connection.close"] != 0 {
		t.Errorf("a killed process closed its connection: %v", c)
	}
	if !after {
		t.Error("the victim's goroutine did not unwind")
	}
}

func TestPanicInAProcessIsReported(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	w.Go("bad", func(broker.Broker) { panic("boom") })
	if err := w.Run(); err == nil || !strings.Contains(err.Error(), "bad panicked: boom") {
		t.Errorf("Run = %v", err)
	}
}

func TestFaultOnUnknownTargetIsAnError(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	if err := w.Kill("nobody"); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("Kill(nobody) = %v", err)
	}
}

// No goroutine outlives Run but the idle coroutines the worlds share
// (sched.Pool): once a first world has filled the pool, twenty more
// worlds, each with a process held for ever and killed at the end, leave
// no more goroutines than there were.
func TestNoGoroutineOutlivesRun(t *testing.T) {
	run := func(seed uint64) {
		w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed), ServerHeartbeat: -1})
		workload(w)
		w.Go("forever", func(b broker.Broker) {
			c, _ := b.Dial(bg, broker.Config{})
			ch, _ := c.Channel(bg)
			w.Partition("forever")
			ch.Declare(bg, "X", broker.DeclareOptions{}) // held for ever: heartbeats are off
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
	}
	run(0)
	before := runtime.NumGoroutine()
	for seed := uint64(1); seed < 21; seed++ {
		run(seed)
	}
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after 20 more worlds, %d after the first", n, before)
	}
}

// fixedRelease is a Decider that answers the pick of a 4.3.6 close's
// release delay (one of four) with k, and every other with 0.
type fixedRelease int

func (k fixedRelease) Pick(n int) int {
	if n == 4 {
		return int(k)
	}
	return 0
}

// Row 6.8 by version: on 3.10.8 and 4.0.5 a connection's exclusive queue
// is gone when its close returns; on 4.3.6 it may stay up to 4.3 ms more,
// as the Decider picks (a contender's declare at once 405, then ok), and
// may be gone at once too. Another version is refused.
func TestCloseReleaseByVersion(t *testing.T) {
	for _, c := range []struct {
		version string
		pick    int
		want    string // the contender's declare at once; 5 ms later
	}{
		{"", 2, "ok ok"},
		{"4.0.5", 3, "ok ok"},
		{"4.3.6", 0, "ok ok"},
		{"4.3.6", 2, "405 ok"},
		{"4.3.6", 3, "405 ok"},
	} {
		w := rabbitmqsim.New(rabbitmqsim.Options{Version: c.version, Decider: fixedRelease(c.pick)})
		var got []string
		w.Go("p", func(b broker.Broker) {
			holder, _ := b.Dial(bg, broker.Config{})
			contender, _ := b.Dial(bg, broker.Config{})
			hch, _ := holder.Channel(bg)
			if _, err := hch.Declare(bg, "q", broker.DeclareOptions{Exclusive: true}); err != nil {
				t.Error(err)
			}
			holder.Close()
			for range 2 {
				ch, _ := contender.Channel(bg)
				_, err := ch.Declare(bg, "q", broker.DeclareOptions{Exclusive: true})
				if err == nil {
					got = append(got, "ok")
					ch.Delete(bg, "q", broker.DeleteOptions{})
				} else {
					got = append(got, fmt.Sprint(broker.Code(err)))
				}
				b.Sleep(bg, 5*time.Millisecond)
			}
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("version %q, pick %d: %s, want %s", c.version, c.pick, s, c.want)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "4.9.9") {
			t.Errorf("a version not simulated: %v, want a panic naming it", r)
		}
	}()
	rabbitmqsim.New(rabbitmqsim.Options{Version: "4.9.9"})
}
