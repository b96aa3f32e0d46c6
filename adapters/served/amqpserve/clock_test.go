package amqpserve_test

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// bounded is what a wait on a consumer that never delivers ended as: how,
// after how much real time and how much of the World's.
type bounded struct {
	woke          process.Woke
	real, virtual time.Duration
}

// boundConsumerWait has a client consume from a queue no one publishes
// to, then bounds the wait for its delivery by virtual of the World's
// time (Deadline) and real of the machine's, as process.Client bounds an
// operation of a process waiting through a served broker.
func boundConsumerWait(t *testing.T, o amqpserve.Options, virtual, real time.Duration) (bounded, *amqpserve.Broker) {
	return boundWait(t, o, consumes, virtual, real)
}

// How a client waits once it declared its queue: on a consumer of it,
// silent (as one computing would), or polling the queue every 20 ms (as
// one waiting on a timer of its own between requests).
const (
	consumes = "consumes"
	silent   = "silent"
	polls    = "polls"
)

// boundWait is boundConsumerWait for a client that waits as how says.
func boundWait(t *testing.T, o amqpserve.Options, how string, virtual, real time.Duration) (bounded, *amqpserve.Broker) {
	t.Helper()
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	s := amqpserve.New(w, o)
	defer s.Close()
	consuming, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var got bounded
	var cerr error
	w.Go("c1", func(b broker.Broker) {
		p, err := s.Process("c1", b)
		if err != nil {
			cerr = err
			return
		}
		go func() {
			defer close(done)
			cerr = onChannel(func(ch *amqp.Channel) error {
				if _, err := ch.QueueDeclare("lock-1-A", false, false, true, false, nil); err != nil {
					return err
				}
				if how == consumes {
					if _, err := ch.Consume("lock-1-A", "", false, false, false, false, nil); err != nil {
						return err
					}
				}
				close(consuming)
				for how == polls {
					select {
					case <-stop:
						return nil
					case <-time.After(20 * time.Millisecond):
					}
					if _, err := ch.QueueDeclarePassive("lock-1-A", false, false, true, false, nil); err != nil {
						return err
					}
				}
				<-stop
				return nil
			})(p.URL())
		}()
		if p.Await(consuming, time.After(20*time.Second), nil) == process.Ready {
			from, start := w.Now(), time.Now()
			got.woke = p.AwaitUntil(p.Deadline(virtual), nil, time.After(real), nil)
			got.real, got.virtual = time.Since(start), time.Duration(w.Now()-from)
		}
		close(stop)
		p.Await(done, time.After(20*time.Second), nil)
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if cerr != nil {
		t.Fatal(cerr)
	}
	return got, s
}

// In a search's run (Settle), an operation waiting on a consumer is
// bounded by the World's clock alone, at the same virtual time in every
// run, however slowly its idle turns pass on the machine: its real-time
// bound, which on a loaded machine passed first and failed an admin's
// wait falsely, is not heeded; outside a search, whichever ends first
// does, as process.ClockedWaiter says.
func TestAWaitIsBoundedByTheWorldsClock(t *testing.T) {
	t.Parallel()
	// Idle turns of 10 ms of the World's time, each 20 ms of the
	// machine's: 200 ms of the World's take 400 ms or more.
	slow := amqpserve.Options{Quiet: 20 * time.Millisecond, Idle: 10 * time.Millisecond, Speedup: -1}
	search := slow
	search.Settle = time.Second
	for _, tc := range []struct {
		name        string
		o           amqpserve.Options
		worldsBound bool // the World's clock reached the bound
		realDecides bool // the real bound ended it first
	}{
		{"search", search, true, false},
		{"run", slow, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, s := boundConsumerWait(t, tc.o, 200*time.Millisecond, 100*time.Millisecond)
			if got.woke != process.Expired {
				t.Fatalf("woke %v, want expired", got.woke)
			}
			if reached := got.virtual >= 200*time.Millisecond; reached != tc.worldsBound || (got.real < 200*time.Millisecond) != tc.realDecides {
				t.Errorf("ended after %v of the World's time and %v of the machine's: want the World's bound reached %v, the real one deciding %v", got.virtual, got.real, tc.worldsBound, tc.realDecides)
			}
			if u := s.Undecided(); len(u) > 0 {
				t.Errorf("undecided: %q", u)
			}
		})
	}
}

// A search's run in which a process goes on sending with no pause long
// enough to idle, as one polling on a timer of its own between requests
// (whose silences cost no virtual time in a search), is given up after
// its operation's bound of the machine's time without an idle turn, and
// is undecided, never judged; its next operation ends at once.
func TestAPollWithoutIdleTurnsIsUndecided(t *testing.T) {
	t.Parallel()
	o := amqpserve.Options{Speedup: -1, Settle: time.Second}
	got, s := boundWait(t, o, polls, 300*time.Millisecond, time.Millisecond)
	if got.woke != process.Expired || got.virtual >= 300*time.Millisecond {
		t.Fatalf("woke %v after %v of the World's time: want expired before its 300ms", got.woke, got.virtual)
	}
	u := s.Undecided()
	if len(u) != 1 || !strings.Contains(u[0], "c1: no idle turn in its operation's bound of 300ms of the machine's time") {
		t.Fatalf("undecided %q", u)
	}
	if got.real < 300*time.Millisecond {
		t.Errorf("given up after %v: want its bound (300ms), the real 1ms not heeded", got.real)
	}
}

// A process silent with no consumer of its may be computing: its idle
// turns let the World's time pass faster than the machine's, and its
// operation is bounded by the machine's clock, not ended early by the
// World's.
func TestASilentProcessIsBoundedByTheMachinesClock(t *testing.T) {
	t.Parallel()
	o := amqpserve.Options{Quiet: 20 * time.Millisecond, Idle: 10 * time.Millisecond, Speedup: -1}
	got, _ := boundWait(t, o, silent, 20*time.Millisecond, 300*time.Millisecond)
	if got.woke != process.Expired || got.real < 300*time.Millisecond || got.virtual < 20*time.Millisecond {
		t.Fatalf("woke %v after %v of the machine's time and %v of the World's: want expired at 300ms of the machine's, the World's 20ms passed", got.woke, got.real, got.virtual)
	}
}
