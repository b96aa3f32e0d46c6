package amqplocks_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// one runs fn as the only process of a fresh world with a semaphore of n
// slots and returns the world's trace.
func one(t *testing.T, n int, fn func(b broker.Broker, w *rabbitmqsim.World)) (*rabbitmqsim.World, string) {
	t.Helper()
	var buf bytes.Buffer
	w := rabbitmqsim.New(rabbitmqsim.Options{Trace: &buf})
	if n > 0 {
		create(t, w, "sem", n, amqplocks.Options{})
	}
	buf.Reset()
	run(t, w, map[string]func(broker.Broker){"p": func(b broker.Broker) { fn(b, w) }})
	return w, buf.String()
}

func deletes(trace string) []string {
	var out []string
	for _, l := range strings.Split(trace, "\n") {
		if i := strings.Index(l, "queue.delete "); i >= 0 {
			out = append(out, strings.Fields(l[i:])[1])
		}
	}
	return out
}

func TestDeleteOrder(t *testing.T) {
	for _, tc := range []struct {
		order amqplocks.Order
		want  string
	}{
		{amqplocks.Descending, "sem-4-A sem-3-A sem"},
		{amqplocks.Ascending, "sem-3-A sem-4-A sem"},
	} {
		_, tr := one(t, 4, func(b broker.Broker, _ *rabbitmqsim.World) {
			dial(t, b, amqplocks.Options{DeleteOrder: tc.order}).Admin("sem").Change(bg, -2)
		})
		if got := strings.Join(deletes(tr), " "); got != tc.want {
			t.Errorf("order %v: deletes %q, want %q", tc.order, got, tc.want)
		}
	}
}

// An admin that crashes in the middle of an ascending delete leaves swiss
// cheese: a slot above a missing one, invisible to count.
func TestAscendingDeleteCrashLeavesSwissCheese(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	create(t, w, "sem", 4, amqplocks.Options{})
	run(t, w, map[string]func(broker.Broker){
		"admin": func(b broker.Broker) {
			// The admin's connection is forced closed right after its first delete.
			c := dial(t, crashAfterDelete{b, w}, amqplocks.Options{DeleteOrder: amqplocks.Ascending})
			if _, _, err := c.Admin("sem").Change(bg, -2); err == nil {
				t.Error("change survived the crash")
			}
		},
	})
	if _, ok := w.Queue(amqplocks.SlotQueue("sem", 3)); ok {
		t.Error("A[3] survived the first delete")
	}
	if _, ok := w.Queue(amqplocks.SlotQueue("sem", 4)); !ok {
		t.Error("A[4] should remain above the hole at A[3]")
	}
}

// crashAfterDelete is a broker whose connections are forced closed right
// after their first queue.delete-ok.
type crashAfterDelete struct {
	broker.Broker
	w *rabbitmqsim.World
}

func (b crashAfterDelete) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	cfg.Name = "crashing"
	c, err := b.Broker.Dial(ctx, cfg)
	return crashConn{c, b.w}, err
}

type crashConn struct {
	broker.Conn
	w *rabbitmqsim.World
}

func (c crashConn) Channel(ctx context.Context) (broker.Channel, error) {
	ch, err := c.Conn.Channel(ctx)
	return crashChannel{ch, c.w}, err
}

type crashChannel struct {
	broker.Channel
	w *rabbitmqsim.World
}

func (c crashChannel) Delete(ctx context.Context, q string, o broker.DeleteOptions) (int, error) {
	n, err := c.Channel.Delete(ctx, q, o)
	c.w.ForceClose("crashing")
	return n, err
}

func TestScanStartFromLastKnown(t *testing.T) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	create(t, w, "sem", 3, amqplocks.Options{})
	run(t, w, map[string]func(broker.Broker){"p": func(b broker.Broker) {
		other := dial(t, b, amqplocks.Options{}).Semaphore("sem")
		other.Acquire(bg) // slot 1
		sem := dial(t, b, amqplocks.Options{ScanStart: amqplocks.FromLastKnown}).Semaphore("sem")
		s, _ := sem.Acquire(bg)
		sem.Release(bg, s)
		other.Release(bg, 1)
		if again, _ := sem.Acquire(bg); again != 2 {
			t.Errorf("from last known: acquired %d, want 2 (the slot last held)", again)
		}
		if s, _ := other.Acquire(bg); s != 1 {
			t.Errorf("from first: acquired %d, want 1", s)
		}
	}})
}

func TestScanStartFromRandomReachesEverySlot(t *testing.T) {
	one(t, 3, func(b broker.Broker, _ *rabbitmqsim.World) {
		sem := dial(t, b, amqplocks.Options{ScanStart: amqplocks.FromRandom, Rand: rand.New(rand.NewPCG(1, 2))}).Semaphore("sem")
		seen := map[int]bool{}
		for i := 0; i < 30; i++ {
			s, err := sem.Acquire(bg)
			if err != nil {
				t.Fatal(err)
			}
			seen[s] = true
			sem.Release(bg, s)
		}
		if len(seen) != 3 {
			t.Errorf("random starts took slots %v, want all of 1..3", seen)
		}
	})
}

// Without retries a lost race is ErrContended; jitter sleeps before a retry.
func TestContentionRetriesAndJitter(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    amqplocks.Options
		want error
	}{
		{"no retries", amqplocks.Options{ContentionRetries: -1}, amqplocks.ErrContended},
		{"jitter", amqplocks.Options{Jitter: 10 * time.Second, Rand: rand.New(rand.NewPCG(3, 4))}, amqplocks.ErrFull},
	} {
		raced := false
		for seed := uint64(0); seed < 100 && !raced; seed++ {
			w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed)})
			create(t, w, "sem", 1, amqplocks.Options{})
			errs := map[string]error{}
			took := map[string]time.Duration{}
			for _, p := range []string{"a", "b"} {
				w.Go(p, func(b broker.Broker) {
					c := dial(t, b, tc.o)
					b.Sleep(bg, 100*time.Millisecond-time.Duration(w.Now())) // line up
					start := w.Now()
					_, errs[p] = c.Semaphore("sem").Acquire(bg)
					took[p] = time.Duration(w.Now() - start)
					b.Sleep(bg, time.Minute)
				})
			}
			if err := w.Run(); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"a", "b"} {
				if w.Cost(p).Methods["channel.close-ok"] == 0 {
					continue // p got no RESOURCE_LOCKED: it did not lose a race
				}
				raced = true
				if !errors.Is(errs[p], tc.want) {
					t.Errorf("%s: race loser got %v, want %v", tc.name, errs[p], tc.want)
				}
				if tc.o.Jitter > 0 && took[p] < time.Millisecond*50 {
					t.Errorf("%s: loser retried after %v; jitter should delay the retry", tc.name, took[p])
				}
			}
		}
		if !raced {
			t.Errorf("%s: no seed produced a race", tc.name)
		}
	}
}

func TestSkipVerifyAfterAcquireSavesOnePublish(t *testing.T) {
	for _, tc := range []struct {
		skip bool
		want int
	}{{false, 3}, {true, 2}} {
		w, _ := one(t, 1, func(b broker.Broker, _ *rabbitmqsim.World) {
			dial(t, b, amqplocks.Options{SkipVerifyAfterAcquire: tc.skip}).Semaphore("sem").Acquire(bg)
		})
		if got := w.Cost("p").Methods["basic.publish"]; got != tc.want {
			t.Errorf("skip=%v: %d publishes for an acquire at slot 1, want %d", tc.skip, got, tc.want)
		}
	}
}

func TestVerifyPassive(t *testing.T) {
	w, _ := one(t, 2, func(b broker.Broker, w *rabbitmqsim.World) {
		sem := dial(t, b, amqplocks.Options{VerifyMethod: amqplocks.VerifyPassive, SkipVerifyAfterAcquire: true}).Semaphore("sem")
		sem.Acquire(bg)
		s, _ := sem.Acquire(bg)
		if err := sem.Verify(bg, s); err != nil {
			t.Errorf("passive verify of a held slot: %v", err)
		}
		dial(t, b, amqplocks.Options{}).Admin("sem").Change(bg, -1)
		if err := sem.Verify(bg, s); !errors.Is(err, amqplocks.ErrLost) {
			t.Errorf("passive verify of a removed slot: %v, want ErrLost", err)
		}
		// The 404 closed the channel; the next operation opens another.
		if err := sem.Verify(bg, 1); err != nil {
			t.Errorf("verify after the 404: %v", err)
		}
	})
	if c := w.Cost("p"); c.Methods["queue.declare"] < 5 || c.Channels != 3 {
		t.Errorf("counters %v: want passive declares and a reopened channel", c)
	}
}

func TestAdminMutex(t *testing.T) {
	for _, noMutex := range []bool{false, true} {
		w, tr := one(t, 1, func(b broker.Broker, _ *rabbitmqsim.World) {
			dial(t, b, amqplocks.Options{NoAdminMutex: noMutex}).Admin("sem").Count(bg)
		})
		declared := strings.Contains(tr, "queue.declare sem ")
		if declared == noMutex {
			t.Errorf("NoAdminMutex=%v: mutex declared = %v\n%s", noMutex, declared, tr)
		}
		if _, ok := w.Queue("sem"); ok {
			t.Error("the administration mutex outlived the operation")
		}
	}
	one(t, 1, func(b broker.Broker, _ *rabbitmqsim.World) {
		holder := dial(t, b, amqplocks.Options{})
		holder.Mutex("sem").Acquire(bg) // another admin is busy
		_, _, err := dial(t, b, amqplocks.Options{PollInterval: time.Millisecond}).Admin("sem").Change(bg, 1)
		if !errors.Is(err, amqplocks.ErrContended) {
			t.Errorf("change while the mutex is held: %v, want ErrContended", err)
		}
	})
}

func TestCreateOnAnExistingSemaphore(t *testing.T) {
	w, _ := one(t, 2, func(b broker.Broker, _ *rabbitmqsim.World) {
		if err := dial(t, b, amqplocks.Options{}).Admin("sem").Create(bg, 3); !errors.Is(err, amqplocks.ErrExists) {
			t.Errorf("create on a 2-slot semaphore: %v, want ErrExists", err)
		}
	})
	if _, ok := w.Queue("sem"); ok {
		t.Error("a failed create left the administration mutex held")
	}
	if _, ok := w.Queue(amqplocks.SlotQueue("sem", 3)); ok {
		t.Error("a failed create added a slot")
	}
}

func TestTransientSlotsDoNotSurviveARestart(t *testing.T) {
	for _, transient := range []bool{false, true} {
		w := rabbitmqsim.New(rabbitmqsim.Options{})
		create(t, w, "sem", 2, amqplocks.Options{TransientSlots: transient})
		w.RestartBroker()
		w.Advance(time.Minute)
		if got := len(w.Queues()); (got == 0) != transient {
			t.Errorf("TransientSlots=%v: %d queues after a restart", transient, got)
		}
	}
}

func TestLengthLimitKeepsProbesFromPilingUp(t *testing.T) {
	for _, noLimit := range []bool{false, true} {
		w := rabbitmqsim.New(rabbitmqsim.Options{})
		create(t, w, "sem", 1, amqplocks.Options{NoLengthLimit: noLimit})
		run(t, w, map[string]func(broker.Broker){"p": func(b broker.Broker) {
			sem := dial(t, b, amqplocks.Options{NoLengthLimit: noLimit}).Semaphore("sem")
			s, _ := sem.Acquire(bg)
			sem.Verify(bg, s)
			dial(t, b, amqplocks.Options{}).Semaphore("sem").Acquire(bg) // probes B[1]
			sem.Release(bg, s)
		}})
		q, _ := w.Queue(amqplocks.SlotQueue("sem", 1))
		if (q.Messages > 0) != noLimit {
			t.Errorf("NoLengthLimit=%v: A[1] holds %d messages", noLimit, q.Messages)
		}
	}
}

func TestHeartbeatOption(t *testing.T) {
	for _, tc := range []struct {
		hb   time.Duration
		want string
	}{{0, "heartbeat=10s"}, {-1, "heartbeat=1m0s"}, {3 * time.Second, "heartbeat=3s"}} {
		_, tr := one(t, 0, func(b broker.Broker, _ *rabbitmqsim.World) { dial(t, b, amqplocks.Options{Heartbeat: tc.hb}) })
		if !strings.Contains(tr, tc.want) {
			t.Errorf("Heartbeat %v: trace lacks %q:\n%s", tc.hb, tc.want, tr)
		}
	}
}

func TestLostConnection(t *testing.T) {
	one(t, 1, func(b broker.Broker, w *rabbitmqsim.World) {
		c := dial(t, b, amqplocks.Options{})
		sem := c.Semaphore("sem")
		s, _ := sem.Acquire(bg)
		w.ForceClose("p")
		if err := sem.Verify(bg, s); !errors.Is(err, amqplocks.ErrLost) {
			t.Errorf("verify after a forced close: %v, want ErrLost", err)
		}
		if c.Err() == nil {
			t.Error("Client.Err is nil after a forced close")
		}
		if _, err := sem.Acquire(bg); !errors.Is(err, amqplocks.ErrLost) || !broker.ConnectionLost(err) {
			t.Errorf("acquire on a lost connection: %v, want ErrLost wrapping the connection error", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close of a lost client: %v", err)
		}
	})
}

func TestReleaseOfASlotNotHeld(t *testing.T) {
	w, _ := one(t, 1, func(b broker.Broker, _ *rabbitmqsim.World) {
		if err := dial(t, b, amqplocks.Options{}).Semaphore("sem").Release(bg, 1); !errors.Is(err, amqplocks.ErrLost) {
			t.Errorf("release of a slot never acquired: %v, want ErrLost", err)
		}
	})
	if n := w.Cost("p").Methods["queue.delete"]; n != 0 {
		t.Errorf("release of a slot not held sent %d deletes", n)
	}
}

func TestWaitHonoursItsContext(t *testing.T) {
	one(t, 1, func(b broker.Broker, w *rabbitmqsim.World) {
		dial(t, b, amqplocks.Options{}).Semaphore("sem").Acquire(bg)
		ctx, cancel := w.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := dial(t, b, amqplocks.Options{}).Admin("sem").Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait on a slot held for ever: %v, want DeadlineExceeded", err)
		}
	})
}

func TestPersistentMutexLooksAtOneSlotOnly(t *testing.T) {
	w, _ := one(t, 2, func(b broker.Broker, _ *rabbitmqsim.World) {
		dial(t, b, amqplocks.Options{}).PersistentMutex("sem").Acquire(bg)
		if _, err := dial(t, b, amqplocks.Options{}).PersistentMutex("sem").Acquire(bg); !errors.Is(err, amqplocks.ErrFull) {
			t.Errorf("second persistent-mutex acquire: %v, want ErrFull", err)
		}
	})
	if _, ok := w.Queue(amqplocks.HolderQueue("sem", 2)); ok {
		t.Error("a persistent mutex took slot 2")
	}
}

func TestTrueMutex(t *testing.T) {
	one(t, 0, func(b broker.Broker, w *rabbitmqsim.World) {
		a := dial(t, b, amqplocks.Options{}).Mutex("m")
		other := dial(t, b, amqplocks.Options{}).Mutex("m")
		if err := a.Acquire(bg); err != nil {
			t.Fatal(err)
		}
		if err := other.Acquire(bg); !errors.Is(err, amqplocks.ErrHeld) {
			t.Errorf("second acquire: %v, want ErrHeld", err)
		}
		if err := a.Verify(bg); err != nil {
			t.Errorf("holder verify: %v", err)
		}
		if err := other.Verify(bg); !errors.Is(err, amqplocks.ErrLost) {
			t.Errorf("non-holder verify: %v, want ErrLost", err)
		}
		if err := a.Release(bg); err != nil {
			t.Errorf("release: %v", err)
		}
		if err := a.Verify(bg); !errors.Is(err, amqplocks.ErrLost) {
			t.Errorf("verify after release: %v, want ErrLost", err)
		}
		if err := other.Acquire(bg); err != nil {
			t.Errorf("acquire after release: %v", err)
		}
	})
}
