package rabbitmqsim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// Each test below reproduces a row of docs/broker-semantics.md section 6
// (RabbitMQ 4.3.6, Khepri) on the simulated cluster's khepri mode. The
// processes connect as clusterWorld says: h and a to n1, c and d to n2,
// t to n3.

// cutN1 runs a nemesis on w that cuts n1 off from n2 and n3 at 1 s and
// heals the cut at heal, then settles the cluster.
func cutN1(t *testing.T, w *rabbitmqsim.World, heal time.Duration) {
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(bg, time.Second)
		w.Strike("partition", isolateN1)
		b.Sleep(bg, heal-time.Second)
		w.Strike("heal", isolateN1)
		if err := w.Settle(); err != nil {
			t.Errorf("settle: %v", err)
		}
	})
}

// metadataTimeout says err is Khepri's 541, a connection error, whose
// text says what, sent at sent and answered now.
func metadataTimeout(t *testing.T, who string, err error, what string, sent, now time.Duration) {
	t.Helper()
	var e *broker.Error
	if !errors.As(err, &e) || e.Code != 541 || !e.Connection || !strings.Contains(e.Reason, what) {
		t.Errorf("%s: %v, want a connection's 541 saying %q", who, err, what)
	}
	if took := now - sent; took != rabbitmqsim.KhepriTimeout {
		t.Errorf("%s: answered after %v, want %v", who, took, rabbitmqsim.KhepriTimeout)
	}
}

// K.4: a write through n1, cut off from the majority (a declare of a new
// durable queue, a delete of a durable queue, each on a connection of
// its own), waits Khepri's 30 s, and n1 then closes the connection with
// 541; neither takes effect, at the heal or after it. K.3's holder
// connected to n1 meanwhile is never closed: no node pauses itself.
func TestKhepriMinorityWriteTimesOut(t *testing.T) {
	w := clusterWorld(rabbitmqsim.Khepri, 1, nil)
	cutN1(t, w, 40*time.Second)
	w.Go("h", func(b broker.Broker) {
		conn, ch := channel(t, b)
		if _, err := ch.Declare(bg, "D", broker.DeclareOptions{Durable: true}); err != nil {
			t.Errorf("D before the cut: %v", err)
		}
		b.Sleep(bg, 2*time.Second)
		sent := at(w)
		_, err := ch.Declare(bg, "N", broker.DeclareOptions{Durable: true})
		metadataTimeout(t, "a declare of N through n1", err, "Could not declare queue 'N' in vhost '/' because the metadata store operation timed out", sent, at(w))
		if conn.Err() == nil {
			t.Error("h's connection is open after the 541")
		}
	})
	w.Go("a", func(b broker.Broker) {
		_, ch := channel(t, b)
		b.Sleep(bg, 3*time.Second)
		sent := at(w)
		_, err := ch.Delete(bg, "D", broker.DeleteOptions{})
		metadataTimeout(t, "a delete of D through n1", err, "The operation to delete the queue from the metadata store timed out", sent, at(w))
	})
	w.Go("t", func(b broker.Broker) {
		conn, ch := channel(t, b)
		b.Sleep(bg, 2*time.Minute)
		if conn.Err() != nil {
			t.Errorf("t's connection to n3 was closed: %v", conn.Err())
		}
		if _, err := ch.Declare(bg, "N", broker.DeclareOptions{Passive: true}); broker.Code(err) != broker.NotFound {
			t.Errorf("N after the heal: %v, want 404: the declare through n1 was lost", err)
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Queue("D"); !ok {
		t.Error("D is gone: the delete through the cut-off n1 took effect")
	}
	var codes []string
	for _, c := range w.BrokerCloses() {
		codes = append(codes, fmt.Sprintf("%s %d", c.Process, c.Code))
	}
	if got := strings.Join(codes, ", "); got != "h 541, a 541" {
		t.Errorf("the nodes closed %q on their own, want h's and a's connections with 541", got)
	}
}

// K.3, K.2, K.4b, K.7: while n1 is cut off, the holder's passive declare
// of its own exclusive queue through n1 answers ok from n1's copy, and a
// queue made through n2 after the cut is not in that copy (404); the
// contender's exclusive declare through n2 gets 405 for the whole cut
// (the majority keeps n1's queue); a passive declare through n2 of the
// durable queue whose home is n1 gets no answer. After the heal n1
// catches up some seconds later (5.5 to 10.5 s), every queue is kept and
// the holder still holds alone.
func TestKhepriReadsAndTheMajorityDuringACut(t *testing.T) {
	w := clusterWorld(rabbitmqsim.Khepri, 2, nil)
	const heal = 61 * time.Second
	cutN1(t, w, heal)
	w.Go("h", func(b broker.Broker) {
		conn, ch := channel(t, b)
		ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true})
		for b.Sleep(bg, 2*time.Second); at(w) < heal; b.Sleep(bg, 2*time.Second) {
			if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Passive: true}); err != nil {
				t.Errorf("h's verify through n1 at %v: %v", at(w), err)
				return
			}
		}
		if _, err := ch.Declare(bg, "P", broker.DeclareOptions{Passive: true}); broker.Code(err) != broker.NotFound {
			t.Errorf("P through n1 at the heal: %v, want 404 (n1's copy is behind)", err)
		}
		ch = reopen(t, conn)
		b.Sleep(bg, 12*time.Second)
		if _, err := ch.Declare(bg, "P", broker.DeclareOptions{Passive: true}); err != nil {
			t.Errorf("P through n1 12 s after the heal: %v, want ok (caught up)", err)
		}
		if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Passive: true}); err != nil || conn.Err() != nil {
			t.Errorf("h's verify after the heal: %v (connection: %v)", err, conn.Err())
		}
	})
	w.Go("a", func(b broker.Broker) {
		_, ch := channel(t, b)
		ch.Declare(bg, "D", broker.DeclareOptions{Durable: true})
	})
	w.Go("c", func(b broker.Broker) {
		conn, ch := channel(t, b)
		for b.Sleep(bg, 2*time.Second); at(w) < heal; b.Sleep(bg, 5*time.Second) {
			if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true}); broker.Code(err) != broker.ResourceLocked {
				t.Errorf("c's declare of B through n2 at %v: %v, want 405", at(w), err)
				return
			}
			ch = reopen(t, conn)
		}
	})
	w.Go("d", func(b broker.Broker) {
		conn, ch := channel(t, b)
		b.Sleep(bg, 10*time.Second)
		if _, err := ch.Declare(bg, "P", broker.DeclareOptions{Durable: true}); err != nil {
			t.Errorf("P through n2 during the cut: %v, want ok (the majority writes)", err)
		}
		ctx, cancel := w.WithTimeout(bg, 40*time.Second)
		defer cancel()
		if _, err := ch.Declare(ctx, "D", broker.DeclareOptions{Passive: true}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("D, whose home n1 is cut off, through n2: %v, want no answer within 40 s", err)
		}
		if conn.Err() == nil {
			t.Error("d's connection outlived its given-up declare")
		}
	})
	w.Go("t", func(b broker.Broker) {
		b.Sleep(bg, heal+20*time.Second)
		_, ch := channel(t, b)
		if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true}); broker.Code(err) != broker.ResourceLocked {
			t.Errorf("t's declare of B through n3 after the heal: %v, want 405: h still holds", err)
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"B", "D", "P"} {
		if _, ok := w.Queue(name); !ok {
			t.Errorf("%s is gone after the heal", name)
		}
	}
	if cl := w.BrokerCloses(); len(cl) > 0 {
		t.Errorf("a node closed connections on its own: %+v", cl)
	}
}

// K.1, K.6: while the holder's node n1 is killed or paused, the majority
// deletes nothing of n1's: the contender's exclusive declare through n2
// gets 405 for the whole 90 s. Once n1 is back (started again, or
// continued) and has caught up, the holder's queue, whose connection died
// with it, is gone: a third client's declare through n3 is ok.
func TestKhepriNodeAway(t *testing.T) {
	for _, fault := range []string{"kill", "pause"} {
		t.Run(fault, func(t *testing.T) {
			w := clusterWorld(rabbitmqsim.Khepri, 3, nil)
			const back = 91 * time.Second
			w.Go("nemesis", func(b broker.Broker) {
				b.Sleep(bg, time.Second)
				w.Strike(fault, "n1")
				b.Sleep(bg, back-time.Second)
				w.Strike(map[string]string{"kill": "restart-broker", "pause": "resume"}[fault], "n1")
			})
			w.Go("h", func(b broker.Broker) {
				_, ch := channel(t, b)
				ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true})
				b.Sleep(bg, 5*time.Minute)
			})
			w.Go("c", func(b broker.Broker) {
				conn, ch := channel(t, b)
				for b.Sleep(bg, 2*time.Second); at(w) < back; b.Sleep(bg, 5*time.Second) {
					if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true}); broker.Code(err) != broker.ResourceLocked {
						t.Errorf("c's declare of B through n2 at %v, n1 away: %v, want 405", at(w), err)
						return
					}
					ch = reopen(t, conn)
				}
				if _, ok := w.Queue("B"); !ok {
					t.Error("B was deleted while n1 was away")
				}
			})
			w.Go("t", func(b broker.Broker) {
				b.Sleep(bg, back+12*time.Second)
				_, ch := channel(t, b)
				if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true}); err != nil {
					t.Errorf("t's declare of B through n3 12 s after n1 is back: %v, want ok (h's queue gone)", err)
				}
			})
			if err := w.Run(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// K.8: the holder's release (a delete of its exclusive queue) through n1,
// cut off, 3 s before the heal, is not retried at the heal: 541 30 s
// after it was sent, and the queue outlives its connection, held by no
// live connection: every later exclusive declare of it gets 405.
func TestKhepriReleaseThroughMinorityIsLost(t *testing.T) {
	w := clusterWorld(rabbitmqsim.Khepri, 4, nil)
	cutN1(t, w, 18*time.Second)
	releaseAt15(t, w, func(err error, sent time.Duration) {
		metadataTimeout(t, "h's release through n1", err, "The operation to delete the queue from the metadata store timed out", sent, at(w))
	})
	w.Go("c", func(b broker.Broker) {
		conn, ch := channel(t, b)
		for _, when := range []time.Duration{50 * time.Second, 90 * time.Second, 150 * time.Second, 240 * time.Second} {
			b.Sleep(bg, when-at(w))
			if _, err := ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true}); broker.Code(err) != broker.ResourceLocked {
				t.Errorf("c's acquire of B through n2 at %v: %v, want 405 (the lock lost, with no holder)", at(w), err)
			}
			ch = reopen(t, conn)
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if q, ok := w.Queue("B"); !ok || q.Owner == "" {
		t.Errorf("B after the plan: %+v (kept %v), want h's queue kept", q, ok)
	}
}

// The khepri mode is deterministic: the same seed gives the same trace,
// byte for byte; its catch-up times come from the seed.
func TestKhepriSameSeedSameTrace(t *testing.T) {
	run := func(seed uint64) string {
		var buf bytes.Buffer
		w := clusterWorld(rabbitmqsim.Khepri, seed, &buf)
		workload(w)
		w.Go("cut", func(b broker.Broker) {
			b.Sleep(bg, 5*time.Millisecond)
			w.Strike("partition", isolateN1)
			b.Sleep(bg, 8*time.Second)
			w.Strike("heal", isolateN1)
			w.Settle()
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
		for _, q := range w.Queues() {
			fmt.Fprintf(&buf, "%+v\n", q)
		}
		return buf.String()
	}
	seen := map[string]bool{}
	for seed := uint64(0); seed < 6; seed++ {
		a, b := run(seed), run(seed)
		if a != b {
			t.Fatalf("seed %d: two runs differ:\n%s", seed, firstDiff(a, b))
		}
		for _, line := range strings.Split(a, "\n") {
			if strings.Contains(line, "caught up with Khepri") {
				seen[strings.Fields(line)[0]] = true
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("n1 caught up at the same time under every seed: %v", seen)
	}
}

// K.4c: a write through n2, on the majority side of a cut of n1, commits
// at once unless n1 led Khepri; then it waits for the others to elect a
// leader, electionLeast to electionLeast + 7 s after the cut (measured:
// until 10.7 s after it once, over 12 s in a differential's sequence).
// The first leader is drawn, so some seeds give each case.
func TestKhepriWriteWaitsForAnElection(t *testing.T) {
	led, not := 0, 0
	for seed := uint64(0); seed < 12; seed++ {
		var trace bytes.Buffer
		w := clusterWorld(rabbitmqsim.Khepri, seed, &trace)
		cutN1(t, w, 40*time.Second)
		var sent, answered time.Duration
		w.Go("d", func(b broker.Broker) {
			_, ch := channel(t, b)
			b.Sleep(bg, 2*time.Second)
			sent = at(w)
			if _, err := ch.Declare(bg, "M", broker.DeclareOptions{Durable: true}); err != nil {
				t.Errorf("seed %d: a declare of M through n2: %v", seed, err)
			}
			answered = at(w)
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(trace.String(), "node n1: Khepri's leader, has no majority") {
			led++
			// The cut at 1 s: the election ends 7 to 14 s after it.
			if answered < 8*time.Second || answered > 15*time.Second+time.Millisecond {
				t.Errorf("seed %d: n1 led; the declare through n2 sent at %v was answered at %v, want 8 to 15 s (an election after the cut at 1 s)", seed, sent, answered)
			}
		} else {
			not++
			if answered-sent > time.Second {
				t.Errorf("seed %d: n1 did not lead; the declare through n2 took %v, want it at once", seed, answered-sent)
			}
		}
	}
	if led == 0 || not == 0 {
		t.Errorf("of 12 seeds, n1 led in %d and not in %d: the first leader is not drawn", led, not)
	}
}

// A publish through n2 to a queue of n1, cut off or paused, is nacked
// (K.10 on 4.3.6, broker-semantics.md): one sent at the fault when n2
// declares n1 down, 1 to 1.25 net_ticktimes after it (its channel's
// monitor of the queue's process fires);
// one sent after that when n2's connection attempt to n1 under way
// fails, every NetSetup after the first, which ends 7.1 to 8 s after the
// declaring down, whether its channel published to the queue before or
// not (the real cluster's nacks at 13.4 and 20.4 s for publishes sent at
// 9 to 17 s, n1 declared down at 6.1 s). A queue on a killed
// node nacks at once; once n1 is back, a publish is acked.
func TestKhepriPublishToALostNode(t *testing.T) {
	// m0 to m2 through d's channel, which published m0 before the fault;
	// each of the others through a connection of its own, all through n2.
	plan := []struct {
		name string
		at   time.Duration // when it is published
	}{{"m1", 1100 * time.Millisecond}, {"f9", 9 * time.Second}, {"f11", 11 * time.Second}, {"f13", 13 * time.Second},
		{"m2", 15 * time.Second}, {"f15", 15 * time.Second}, {"f17", 17 * time.Second}, {"back", 31 * time.Second}}
	firsts := map[time.Duration]bool{} // the first attempts' ends after the declaring down
	for _, fault := range []string{"cut", "pause", "kill"} {
		for seed := uint64(0); seed < 4; seed++ {
			t.Run(fmt.Sprintf("%s, seed %d", fault, seed), func(t *testing.T) {
				w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed), Cluster: &rabbitmqsim.ClusterOptions{
					Nodes: nodes, PartitionHandling: rabbitmqsim.Khepri, NodeOf: func(p string) string {
						if p == "h" {
							return "n1"
						}
						return "n2"
					}}})
				w.Go("nemesis", func(b broker.Broker) {
					b.Sleep(bg, time.Second)
					switch fault {
					case "pause":
						w.Strike("pause", "n1")
					case "cut":
						w.Strike("partition", isolateN1)
					case "kill":
						w.Strike("kill", "n1")
					}
					b.Sleep(bg, 29*time.Second)
					switch fault {
					case "pause":
						w.Strike("resume", "n1")
					case "cut":
						w.Strike("heal", isolateN1)
					}
				})
				w.Go("h", func(b broker.Broker) {
					_, ch := channel(t, b)
					ch.Declare(bg, "Q", broker.DeclareOptions{Durable: true})
					b.Sleep(bg, 2*time.Minute)
				})
				settled := make([]time.Duration, len(plan))
				confs := make([]broker.Confirmation, len(plan))
				publish := func(b broker.Broker, ch broker.Channel, i int) {
					b.Sleep(bg, plan[i].at-at(w))
					c, err := ch.Publish(bg, broker.Publishing{Key: "Q", Mandatory: true})
					if err != nil {
						t.Errorf("%s: %v", plan[i].name, err)
					}
					settled[i], confs[i] = at(w), c
				}
				w.Go("d", func(b broker.Broker) {
					_, ch := channel(t, b)
					ch.Confirm(bg)
					b.Sleep(bg, 500*time.Millisecond)
					if c, err := ch.Publish(bg, broker.Publishing{Key: "Q", Mandatory: true}); err != nil || !c.Acked {
						t.Errorf("m0, before the fault: %+v, %v", c, err)
					}
					publish(b, ch, 0)
					publish(b, ch, 4)
				})
				for i, p := range plan {
					if !strings.HasPrefix(p.name, "m") {
						w.Go(p.name, func(b broker.Broker) {
							_, ch := channel(t, b)
							ch.Confirm(bg)
							publish(b, ch, i)
						})
					}
				}
				if err := w.Run(); err != nil {
					t.Fatal(err)
				}
				for i, p := range plan {
					if fault == "kill" && p.name == "back" {
						continue // (n1 stays down)
					}
					if confs[i].Acked != (p.name == "back") {
						t.Errorf("%s, sent at %v: acked %v", p.name, p.at, confs[i].Acked)
					}
				}
				if fault == "kill" {
					for i, p := range plan[:len(plan)-1] {
						if settled[i]-p.at > 100*time.Millisecond {
							t.Errorf("%s, sent at %v to a killed node's queue: settled at %v, want at once", p.name, p.at, settled[i])
						}
					}
					return
				}
				down := settled[0] // m1: nacked when n2 declares n1 down
				if down < 6*time.Second || down > 7250*time.Millisecond+100*time.Millisecond {
					t.Fatalf("m1 nacked at %v, want when n2 declares n1 down, 5 to 6.25 s after the fault at 1 s (net_ticktime 5 s)", down)
				}
				// The first attempt ends 7.1 to 8 s after the declaring
				// down, by the seed; every one after it NetSetup later.
				first := settled[1] // f9's
				firsts[(first-down)/(100*time.Millisecond)] = true
				if first < down+7100*time.Millisecond || first > down+8100*time.Millisecond {
					t.Errorf("f9, sent at 9 s: nacked at %v, want at the end of the first connection attempt, 7.1 to 8 s after n1 was declared down at %v", first, down)
				}
				for i, p := range plan[1 : len(plan)-1] {
					want := first
					for want <= p.at {
						want += rabbitmqsim.NetSetup
					}
					if got := settled[i+1]; got < want || got-want > 100*time.Millisecond {
						t.Errorf("%s, sent at %v: nacked at %v, want %v (the end of the connection attempt in flight; n1 declared down at %v)", p.name, p.at, settled[i+1], want, down)
					}
				}
			})
		}
	}
	if len(firsts) < 2 {
		t.Errorf("the first connection attempt ended the same time after the declaring down for 8 seeds (%v): it is not drawn", firsts)
	}
}

// In a bridge (n1 and n2 cut off from each other, n3 seeing both), a node
// that cannot reach Khepri's leader falls behind: a queue declared
// through n3 after the bridge is not in n1's copy when n2 leads, and
// n1's declare of it, a write then, waits for the leader (a
// differential's sequence on 4.3.6: no answer within 2 s); where n1 or
// n3 leads, n1 has the record and its declare is answered at once.
func TestKhepriBridgeCutFromTheLeader(t *testing.T) {
	const bridge = "n1>n2 n2>n1"
	waited, atOnce := 0, 0
	for seed := uint64(0); seed < 12; seed++ {
		var trace bytes.Buffer
		w := clusterWorld(rabbitmqsim.Khepri, seed, &trace)
		w.Go("nemesis", func(b broker.Broker) {
			b.Sleep(bg, time.Second)
			w.Strike("partition", bridge)
			b.Sleep(bg, 60*time.Second)
			w.Strike("heal", bridge)
		})
		w.Go("t", func(b broker.Broker) {
			_, ch := channel(t, b)
			b.Sleep(bg, 12*time.Second)
			if _, err := ch.Declare(bg, "E", broker.DeclareOptions{Durable: true}); err != nil {
				t.Errorf("seed %d: a declare of E through n3: %v", seed, err)
			}
		})
		var took time.Duration
		w.Go("a", func(b broker.Broker) {
			_, ch := channel(t, b)
			b.Sleep(bg, 14*time.Second)
			sent := at(w)
			ctx, cancel := context.WithTimeout(bg, 2*time.Second)
			defer cancel()
			ch.Declare(ctx, "E", broker.DeclareOptions{Durable: true})
			took = at(w) - sent
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
		n2led := strings.Contains(trace.String(), "node n1: the leader out of reach")
		switch {
		case n2led && took >= 2*time.Second:
			waited++
		case !n2led && took < time.Second:
			atOnce++
		default:
			t.Errorf("seed %d: n1 cut off from the leader %v, its declare of E took %v", seed, n2led, took)
		}
	}
	if waited == 0 || atOnce == 0 {
		t.Errorf("of 12 seeds, n1's declare waited in %d and was answered at once in %d: want both", waited, atOnce)
	}
}

// On a Khepri cluster the exclusive queues of a closed connection go a
// few milliseconds after its close-ok, up to 25 ms by the seed: a
// contender's declare through another node right after the close may
// still get 405 (a differential's sequence on 4.3.6, about 10 ms after).
func TestKhepriReleaseAfterCloseOk(t *testing.T) {
	locked, free := 0, 0
	for seed := uint64(0); seed < 16; seed++ {
		w := clusterWorld(rabbitmqsim.Khepri, seed, nil)
		var closed time.Duration
		w.Go("h", func(b broker.Broker) {
			conn, ch := channel(t, b)
			ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true})
			b.Sleep(bg, time.Second-at(w))
			conn.Close()
			closed = at(w)
		})
		w.Go("c", func(b broker.Broker) {
			_, ch := channel(t, b)
			b.Sleep(bg, time.Second+10*time.Millisecond-at(w))
			if closed == 0 {
				t.Errorf("seed %d: h's close-ok came after c's declare was due", seed)
			}
			switch _, err := ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true}); {
			case err == nil:
				free++
			case broker.Code(err) == broker.ResourceLocked:
				locked++
			default:
				t.Errorf("seed %d: c's declare of B: %v", seed, err)
			}
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
	}
	if locked == 0 || free == 0 {
		t.Errorf("of 16 seeds, c found B locked %d times and free %d: want both", locked, free)
	}
}

// A delete through n2 of a queue whose node n2 has declared down (killed,
// here) deletes its record at once, asking no process: the differential's
// sequences on 4.3.6 answered ok; a passive declare of such a queue waits
// instead (K.4b).
func TestKhepriDeleteOfALostNodesQueue(t *testing.T) {
	w := clusterWorld(rabbitmqsim.Khepri, 2, nil)
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(bg, time.Second)
		w.Strike("kill", "n1")
	})
	w.Go("h", func(b broker.Broker) {
		_, ch := channel(t, b)
		ch.Declare(bg, "Q", broker.DeclareOptions{Durable: true})
		ch.Declare(bg, "P", broker.DeclareOptions{Durable: true})
		b.Sleep(bg, time.Minute)
	})
	w.Go("d", func(b broker.Broker) {
		_, ch := channel(t, b)
		b.Sleep(bg, 3*time.Second)
		sent := at(w)
		if _, err := ch.Delete(bg, "Q", broker.DeleteOptions{}); err != nil || at(w)-sent > time.Second {
			t.Errorf("delete of Q, its node killed: %v after %v, want ok at once", err, at(w)-sent)
		}
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		if _, err := ch.Declare(ctx, "P", broker.DeclareOptions{Passive: true}); err == nil {
			t.Error("a passive declare of P, its node killed, was answered")
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Queue("Q"); ok {
		t.Error("Q is still in the store")
	}
}

// A publish to a queue whose deletion waits for Khepri (its owner's
// connection closed through n1, cut off) is nacked at once: its process
// is going (a differential's sequence on 4.3.6).
func TestKhepriPublishToAQueueBeingDeleted(t *testing.T) {
	w := clusterWorld(rabbitmqsim.Khepri, 3, nil)
	cutN1(t, w, 60*time.Second)
	w.Go("h", func(b broker.Broker) {
		conn, ch := channel(t, b)
		ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true})
		b.Sleep(bg, 5*time.Second)
		conn.Close()
	})
	w.Go("a", func(b broker.Broker) {
		_, ch := channel(t, b)
		ch.Confirm(bg)
		b.Sleep(bg, 6*time.Second)
		sent := at(w)
		conf, err := ch.Publish(bg, broker.Publishing{Key: "B", Mandatory: true})
		if err != nil || conf.Acked || conf.Returned || at(w)-sent > time.Second {
			t.Errorf("publish to B, its deletion waiting: %+v %v after %v, want a nack at once", conf, err, at(w)-sent)
		}
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
}

// A durable queue of n3's deleted through n1 while n3 is cut off one way
// (n1 has declared n3 down: the delete asks no process) leaves its
// process at n3, a ghost: the first declare of the name through n3 after
// the heal makes the queue and gets 541 INTERNAL_ERROR, its connection
// closed; a declare after that is ok (the differential's sequence 147 on
// 4.3.6, three runs). Deleted while n3 was reachable, it leaves nothing.
func TestKhepriGhostOfALostDelete(t *testing.T) {
	for _, lost := range []bool{true, false} {
		w := clusterWorld(rabbitmqsim.Khepri, 3, nil)
		const cut = "n3>n1 n3>n2"
		w.Go("nemesis", func(b broker.Broker) {
			if !lost {
				return
			}
			b.Sleep(bg, time.Second)
			w.Strike("partition", cut)
			b.Sleep(bg, 19*time.Second)
			w.Strike("heal", cut)
		})
		w.Go("t", func(b broker.Broker) {
			conn, ch := channel(t, b)
			if _, err := ch.Declare(bg, "D", broker.DeclareOptions{Durable: true}); err != nil {
				t.Errorf("t's declare of D through n3: %v", err)
			}
			b.Sleep(bg, 40*time.Second)
			_, err := ch.Declare(bg, "D", broker.DeclareOptions{Durable: true})
			switch {
			case lost && (broker.Code(err) != 541 || !broker.ConnectionLost(err)):
				t.Errorf("D's declare through n3 after the heal: %v, want 541 INTERNAL_ERROR closing the connection", err)
			case !lost && err != nil:
				t.Errorf("D's declare through n3, nothing lost: %v, want ok", err)
			}
			if lost {
				conn, ch = channel(t, b)
			}
			if _, err := ch.Declare(bg, "D", broker.DeclareOptions{Durable: true}); err != nil {
				t.Errorf("D's declare after that: %v, want ok", err)
			}
			conn.Close()
		})
		w.Go("a", func(b broker.Broker) {
			_, ch := channel(t, b)
			b.Sleep(bg, 12*time.Second)
			if _, err := ch.Delete(bg, "D", broker.DeleteOptions{}); err != nil {
				t.Errorf("a's delete of D through n1 (lost %v): %v", lost, err)
			}
		})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
	}
}

// A declare that its client gives up on after 2 s may still commit once
// its node can, by the seed, where the node reaches a majority but not
// the leader (a bridge: the differential's sequence 44 of seed
// 2026112802 on 4.3.6, the queue there after the heal in one run of two)
// or hears a majority unheard (cut one way: sequence 49); never where the
// node hears no majority (isolated, K.8). Answered in time, the queue
// exists anyway.
func TestKhepriWriteGivenUpMayCommit(t *testing.T) {
	for _, tc := range []struct {
		name, cut, by string // by: the declaring process, on the cut node
		mayKeep       bool
	}{
		{"bridge", "n1>n2 n2>n1", "a", true},
		{"cut one way", "n3>n1 n3>n2", "t", true},
		{"isolated", isolateN1, "a", false},
	} {
		kept, dropped := 0, 0
		for seed := uint64(0); seed < 32; seed++ {
			w := clusterWorld(rabbitmqsim.Khepri, seed, nil)
			w.Go("nemesis", func(b broker.Broker) {
				b.Sleep(bg, time.Second)
				w.Strike("partition", tc.cut)
				b.Sleep(bg, 19*time.Second)
				w.Strike("heal", tc.cut)
			})
			var gaveUp bool
			w.Go(tc.by, func(b broker.Broker) {
				_, ch := channel(t, b)
				b.Sleep(bg, 14*time.Second)
				ctx, cancel := w.WithTimeout(bg, 2*time.Second)
				defer cancel()
				_, err := ch.Declare(ctx, "F", broker.DeclareOptions{Durable: true})
				gaveUp = errors.Is(err, context.DeadlineExceeded)
			})
			var exists bool
			w.Go("c", func(b broker.Broker) {
				_, ch := channel(t, b)
				b.Sleep(bg, 45*time.Second)
				_, err := ch.Declare(bg, "F", broker.DeclareOptions{Passive: true})
				exists = err == nil
			})
			if err := w.Run(); err != nil {
				t.Fatal(err)
			}
			switch {
			case gaveUp && exists:
				kept++
			case gaveUp:
				dropped++
			case !exists:
				t.Errorf("%s, seed %d: the declare was answered, and F does not exist after the heal", tc.name, seed)
			}
		}
		if tc.mayKeep && (kept == 0 || dropped == 0) || !tc.mayKeep && (kept > 0 || dropped == 0) {
			t.Errorf("%s: of the seeds where the declare was given up, F existed after the heal in %d and not in %d", tc.name, kept, dropped)
		}
	}
}

// releaseAt15 runs h on w: it takes B through n1 (exclusive), and at 15
// s deletes it (its release), telling done what the delete answered and
// when it was sent.
func releaseAt15(t *testing.T, w *rabbitmqsim.World, done func(err error, sent time.Duration)) {
	w.Go("h", func(b broker.Broker) {
		_, ch := channel(t, b)
		ch.Declare(bg, "B", broker.DeclareOptions{Exclusive: true})
		b.Sleep(bg, 15*time.Second)
		sent := at(w)
		_, err := ch.Delete(bg, "B", broker.DeleteOptions{})
		done(err, sent)
	})
}
