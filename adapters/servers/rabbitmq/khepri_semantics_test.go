package rabbitmq

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestClusterKhepriRows measures docs/broker-semantics.md's Khepri rows
// (K.1 and on) on three RabbitMQ 4.3.6 nodes, whose metadata store is
// Khepri (Raft) and which have no partition handling modes, and on three
// 4.0.5 nodes with khepri_db enabled (a subtest each: -run
// 'TestClusterKhepriRows/4.0.5'), which, unlike 4.3.6, free a lost
// node's exclusive queues (freesLostQueues): what the
// Mnesia rows (C.1 to C.9) asked, and what Raft adds to the question.
//
//   - partition: n1, the holder's node, is cut off from n2 and n3 (both
//     ways, silently), as in TestClusterExclusiveQueues. Besides the
//     contender's declare, the holder's verify, the durable queue's home
//     and the new connections to n1, it measures a declare and a delete
//     through n1, the minority node: how long each takes, and what it
//     answers. Then the heal, and what is left.
//   - crash and pause: n1 is killed (SIGKILL) or paused (SIGSTOP); how
//     long until a contender on n2 takes the holder's exclusive queue.
//
// Each subtest starts a cluster of its own (a minute or two each), so
// it runs only when asked: LOCKPROVER_CLUSTER_ROWS=khepri.
func TestClusterKhepriRows(t *testing.T) {
	if os.Getenv("LOCKPROVER_CLUSTER_ROWS") != "khepri" {
		t.Skip("measures docs/broker-semantics.md's Khepri rows on three 4.3.6 nodes and on three 4.0.5 nodes with khepri_db, about ten minutes each: LOCKPROVER_CLUSTER_ROWS=khepri to run it")
	}
	for _, name := range []string{"4.3.6", "4.0.5"} {
		t.Run(name, func(t *testing.T) {
			// 4.3.6 has Khepri alone; 4.0.5 keeps Mnesia unless khepri_db
			// is enabled, which StartCluster does for this mode.
			o := ClusterOptions{Version: rootedVersion(t, name), PartitionHandling: Khepri}
			t.Run("partition", func(t *testing.T) { measureKhepriPartition(t, o) })
			for _, fault := range []string{"crash", "pause"} {
				t.Run(fault, func(t *testing.T) { measureKhepriNodeLoss(t, o, fault) })
			}
			t.Run("orphan", func(t *testing.T) { measureKhepriOrphan(t, o, "delete_queue", "restart") })
			t.Run("orphan-restart", func(t *testing.T) { measureKhepriOrphan(t, o, "restart") })
			t.Run("restart-queues", func(t *testing.T) { measureKhepriRestartQueues(t, o) })
			for _, fault := range []string{"cut", "pause", "cut-minority"} {
				t.Run("publish-"+fault, func(t *testing.T) { measurePublishToALostNode(t, o, fault) })
			}
		})
	}
}

// measureKhepriOrphan is K.8 and what clears it (K.9): the holder's
// release (a delete of its exclusive queue) through n1 during the cut, 3 s
// before the heal, left the queue owned by no connection. Then, in turn,
// until a contender's exclusive declare through n2 takes the queue: a
// delete of it on a new connection through n2 (what an implementation
// could do after its release's 541), then each of remedies:
// "delete_queue", `rabbitmqctl delete_queue` on n2 (an operator), and
// "restart", n1 killed and started again (its node's restart, K.8's
// remedy without an operator's command).
func measureKhepriOrphan(t *testing.T, o ClusterOptions, remedies ...string) {
	s, cut := newKhepriSetup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := cut(ctx, s.n2.Host, s.n3.Host); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	var released string
	var releasedAt time.Duration
	done := make(chan struct{})
	sent := time.Now()
	go func() {
		defer close(done)
		released = probe(s.holder, 60*time.Second, func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(s.b, false, false, false)
			return err
		})
		releasedAt = time.Since(sent)
	}()
	time.Sleep(3 * time.Second)
	if err := s.lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	t.Logf("row (khepri, K.9): the holder's delete through n1, sent 3 s before the heal: %s after %.1fs; its connection: %s", released, releasedAt.Seconds(), s.holderW.since(t0))
	agreed := awaitAgreement(ctx, s.n2, s.c, 90*time.Second)
	time.Sleep(5 * time.Second)
	try := func(after string) bool {
		r := probe(s.dial(s.n2), 5*time.Second, exclusive(s.b))
		t.Logf("row (khepri, K.9): %.1fs after the cut, after %s: a contender's exclusive declare through n2: %s", time.Since(t0).Seconds(), after, r)
		return r == "ok"
	}
	t.Logf("row (khepri, K.9): the cluster agreed %.1fs after the heal", agreed.Seconds())
	if try("the release's end") {
		if !freesLostQueues(o) {
			t.Errorf("K.8: the orphaned queue was gone by itself")
		}
		// 4.0.5: the majority freed the cut-off holder's queue (K.2), or
		// the delete went through at the heal: no orphan.
		return
	}
	del := probe(s.dial(s.n2), 10*time.Second, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(s.b, false, false, false)
		return err
	})
	t.Logf("row (khepri, K.9): a delete of the orphaned queue on a new connection through n2: %s", del)
	if try("that delete") {
		return
	}
	for _, remedy := range remedies {
		switch remedy {
		case "delete_queue":
			out, err := s.n2.Ctl(ctx, "delete_queue", s.b)
			t.Logf("row (khepri, K.9): rabbitmqctl delete_queue %s on n2: %v %s", s.b, err, strings.TrimSpace(out))
			if try("rabbitmqctl delete_queue") {
				return
			}
		case "restart":
			restarted := time.Now()
			if err := s.n1.Crash(); err != nil {
				t.Fatal(err)
			}
			if err := s.n1.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("row (khepri, K.9): n1 killed and started again in %.1fs; the cluster agreed %.1fs after", time.Since(restarted).Seconds(), awaitAgreement(ctx, s.n2, s.c, 90*time.Second).Seconds())
			time.Sleep(5 * time.Second)
			if try("n1 killed and started again") {
				return
			}
		default:
			t.Fatalf("no remedy %q", remedy)
		}
	}
	t.Errorf("K.9: nothing measured cleared the orphaned queue (%s)", strings.Join(remedies, ", "))
}

// measureKhepriRestartQueues is K.6's restart, queue by queue: which of
// n1's queues are there once n1, killed, is started again and the cluster
// agrees. The holder's exclusive queue b (its connection died with n1),
// the durable a, and a transient non-exclusive t (durable false,
// auto-delete false: what amqp-locks-python declares its A queues as),
// each declared through n1 and looked at through n2 and through n1 by a
// passive declare. Measured on 4.3.6: b and t gone, a kept, through
// either node (the simulator's khepri mode drops every non-durable queue
// of the restarted node's last run, as here).
func measureKhepriRestartQueues(t *testing.T, o ClusterOptions) {
	s, _ := newKhepriSetup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tq := s.lock + "-T"
	if r := probe(s.dial(s.n1), 10*time.Second, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(tq, false, false, false, false, nil)
		return err
	}); r != "ok" {
		t.Fatalf("transient non-exclusive declare of %s on n1: %s", tq, r)
	}
	for _, n := range []*Node{s.n1, s.n2} {
		out, err := n.Ctl(ctx, "eval", "ra_leaderboard:lookup_leader(rabbitmq_metadata).")
		t.Logf("row (khepri, K.6): Khepri's leader before the kill, as %s sees it: %v %s", n.Name, err, strings.TrimSpace(out))
	}
	restarted := time.Now()
	if err := s.n1.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := s.n1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("row (khepri, K.6): n1 killed and started again in %.1fs; the cluster agreed %.1fs after", time.Since(restarted).Seconds(), awaitAgreement(ctx, s.n2, s.c, 90*time.Second).Seconds())
	time.Sleep(5 * time.Second)
	want := map[string]string{"exclusive": "404", "durable": "ok", "transient": "404"}
	for _, q := range []struct{ what, name string }{{"exclusive", s.b}, {"durable", s.a}, {"transient", tq}} {
		for i, n := range []*Node{s.n2, s.n1} {
			r := probe(s.dial(n), 10*time.Second, passive(q.name))
			t.Logf("row (khepri, K.6): after n1's restart, a passive declare of the %s queue through n%d: %s", q.what, 2-i, r)
			if !strings.HasPrefix(r, want[q.what]) {
				t.Errorf("K.6: after n1's restart, the %s queue through n%d: %s, want %s", q.what, 2-i, r, want[q.what])
			}
		}
	}
}

// khepriSetup is a cluster with a holder on n1 holding the exclusive queue
// b, a durable queue a declared through n1, and a contender on n2.
type khepriSetup struct {
	c                   *Cluster
	n1, n2, n3          *Node
	holder, contender   *amqp.Connection
	holderW, contenderW *closeWatch
	lock, a, b          string
	dial                func(n *Node) *amqp.Connection
	lab                 *netns.Lab
}

func newKhepriSetup(t *testing.T, o ClusterOptions) (*khepriSetup, func(ctx context.Context, hosts ...string) error) {
	c, lab := startCluster(t, o)
	s := &khepriSetup{c: c, n1: c.Nodes[0], n2: c.Nodes[1], n3: c.Nodes[2], lab: lab}
	s.dial = func(n *Node) *amqp.Connection {
		// A node of a cluster just formed may refuse guest (403) or not
		// answer for a while: dial for up to a minute, saying how long.
		t0 := time.Now()
		for {
			conn, err := amqp.DialConfig(n.URL(), amqp.Config{Heartbeat: 2 * time.Second, Dial: amqp.DefaultDial(5 * time.Second)})
			if err == nil {
				if d := time.Since(t0); d > time.Second {
					t.Logf("dial %s: took %.1fs", n.Name, d.Seconds())
				}
				t.Cleanup(func() { conn.Close() })
				return conn
			}
			if time.Since(t0) > time.Minute {
				t.Fatalf("dial %s: %v", n.Name, err)
			}
			time.Sleep(time.Second)
		}
	}
	s.lock = uniqueName(t)
	s.b, s.a = s.lock+"-B", s.lock+"-A"
	s.holder, s.contender = s.dial(s.n1), s.dial(s.n2)
	s.holderW, s.contenderW = watchClose(s.holder), watchClose(s.contender)
	if r := probe(s.holder, 10*time.Second, exclusive(s.b)); r != "ok" {
		t.Fatalf("holder's exclusive declare on n1: %s", r)
	}
	if r := probe(s.holder, 10*time.Second, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(s.a, true, false, false, false, nil)
		return err
	}); r != "ok" {
		t.Fatalf("durable declare on n1: %s", r)
	}
	// Khepri answers a declare once the majority has it; another node's
	// view may lag (rabbitmq4.md): wait until n2 sees the queue.
	for i := 0; i < 40; i++ {
		if r := probe(s.contender, 5*time.Second, exclusive(s.b)); r == "405" {
			t.Logf("row: contender's exclusive declare through n2 while the holder lives: 405 RESOURCE_LOCKED (after %d tries)", i+1)
			break
		} else if i == 39 {
			t.Fatalf("contender on n2 while the holder lives: %s, want 405", r)
		}
		time.Sleep(250 * time.Millisecond)
	}
	cut := func(ctx context.Context, hosts ...string) error {
		for _, o := range hosts {
			if err := lab.Cut(ctx, s.n1.Host, o); err != nil {
				return err
			}
			if err := lab.Cut(ctx, o, s.n1.Host); err != nil {
				return err
			}
		}
		return nil
	}
	t.Cleanup(func() { lab.Heal(context.Background()) })
	return s, cut
}

func measureKhepriPartition(t *testing.T, o ClusterOptions) {
	s, cut := newKhepriSetup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// A queue for the delete through n1, declared before the cut.
	d := s.lock + "-D"
	if r := probe(s.holder, 10*time.Second, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(d, true, false, false, false, nil)
		return err
	}); r != "ok" {
		t.Fatalf("durable declare of %s on n1: %s", d, r)
	}
	// Two more clients of n1's, one for a declare and one for a delete: a
	// metadata write that fails may close its whole connection.
	side, side2 := s.dial(s.n1), s.dial(s.n1)
	// Which node leads Khepri's Raft cluster before the cut: a write
	// through the majority may wait for another to be elected (K.4c).
	for _, n := range []*Node{s.n1, s.n2} {
		out, err := n.Ctl(ctx, "eval", "ra_leaderboard:lookup_leader(rabbitmq_metadata).")
		t.Logf("row (khepri, K.4c): Khepri's leader before the cut, as %s sees it: %v %s", n.Name, err, strings.TrimSpace(out))
	}
	t0 := time.Now()
	if err := cut(ctx, s.n2.Host, s.n3.Host); err != nil {
		t.Fatal(err)
	}
	const window = 60 * time.Second
	deadline := t0.Add(window)
	cont, verify, durable, accepts, major := &timeline{t0: t0}, &timeline{t0: t0}, &timeline{t0: t0}, &timeline{t0: t0}, &timeline{t0: t0}
	var wg sync.WaitGroup
	poll := func(tl *timeline, limit time.Duration, cn *amqp.Connection, call func(*amqp.Channel) error, stop func(string) bool) {
		defer wg.Done()
		for time.Now().Before(deadline) {
			r := "closed"
			if cn != nil && !cn.IsClosed() {
				r = probe(cn, limit, call)
			}
			tl.see(r)
			if stop(r) {
				return
			}
			if r == "no answer" || r == "closed" {
				if nc, err := amqp.DialConfig(nodeURLOf(cn, s.c), amqp.Config{Heartbeat: 2 * time.Second, Dial: amqp.DefaultDial(2 * time.Second)}); err == nil {
					t.Cleanup(func() { nc.Close() })
					cn = nc
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// The minority's writes: one declare of a new durable queue and one
	// delete of d, each through n1 and given the whole window.
	var declared, deleted string
	var declaredAt, deletedAt time.Duration
	// The majority's writes (K.4c): a declare of a new durable queue
	// through n2, each given 5 s, one after the other.
	var fresh atomic.Int32
	go poll(major, 5*time.Second, s.dial(s.n2), func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(fmt.Sprintf("%s-M%d", s.lock, fresh.Add(1)), true, false, false, false, nil)
		return err
	}, func(string) bool { return false })
	wg.Add(7)
	go func() {
		defer wg.Done()
		declared = probe(side, window, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(s.lock+"-N", true, false, false, false, nil)
			return err
		})
		declaredAt = time.Since(t0)
	}()
	go func() {
		defer wg.Done()
		deleted = probe(side2, window, func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(d, false, false, false)
			return err
		})
		deletedAt = time.Since(t0)
	}()
	go func() {
		defer wg.Done()
		watchAccepts(accepts, s.n1, deadline)
	}()
	go poll(cont, 2*time.Second, s.contender, exclusive(s.b), func(r string) bool { return r == "ok" })
	go poll(verify, 2*time.Second, s.holder, passive(s.b), func(string) bool { return false })
	// Given 40 s, to see what a blocked passive declare ends in.
	go poll(durable, 40*time.Second, s.dial(s.n2), passive(s.a), func(string) bool { return false })
	wg.Wait()
	t.Logf("row (khepri): contender's exclusive declare through n2 after n1 is cut off: %s", cont)
	t.Logf("row (khepri): holder's verify (passive declare) through n1: %s", verify)
	t.Logf("row (khepri): passive declare of n1's durable queue through n2: %s", durable)
	t.Logf("row (khepri): a new connection to n1: %s", accepts)
	t.Logf("row (khepri, K.4c): a declare of a new durable queue through n2 (the majority), 5 s each: %s", major)
	t.Logf("row (khepri): a declare of a new durable queue through n1: %s at %.1fs", declared, declaredAt.Seconds())
	t.Logf("row (khepri): a delete of a durable queue through n1: %s at %.1fs", deleted, deletedAt.Seconds())
	t.Logf("row (khepri): during the cut, the holder's connection: %s; the contender's: %s", s.holderW.since(t0), s.contenderW.since(t0))
	// What 4.3.6 did in every run (K.1 to K.4): the majority never frees
	// the cut-off holder's exclusive queue, the holder is never told, and
	// a metadata write through the minority fails after Khepri's 30 s.
	freed := freesLostQueues(o)
	if _, took := cont.when("ok"); took != freed {
		t.Errorf("K.2: the contender on the majority took the cut-off holder's exclusive queue %v (want %v on %s): %s", took, freed, o.Version.Name, cont)
	}
	// The first probe's answer may come a tenth of a second or so into
	// the cut on a loaded machine: one entry, ok, is what counts.
	if _, told := verify.when("closed"); told || len(verify.first) != 1 || !strings.HasPrefix(verify.String(), "ok from ") {
		t.Errorf("K.3: the holder's verify through n1: %s, want ok throughout", verify)
	}
	if !strings.Contains(declared, "metadata store operation timed out") || declaredAt < 25*time.Second {
		t.Errorf("K.4: a declare through n1: %q at %v, want a 541 saying the metadata store timed out, after 30 s", declared, declaredAt)
	}

	th := time.Now()
	if err := s.lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	agreed := awaitAgreement(ctx, s.n2, s.c, 90*time.Second)
	t.Logf("row (khepri): the cluster agrees again %.1fs after the heal (-1: not within 90 s)", agreed.Seconds())
	time.Sleep(5 * time.Second)
	qs, _ := s.n2.Ctl(ctx, "list_queues", "name", "pid", "--no-table-headers", "--quiet")
	var left []string
	for _, l := range strings.Split(qs, "\n") {
		if strings.HasPrefix(l, s.lock) {
			left = append(left, strings.ReplaceAll(l, "\t", " "))
		}
	}
	mine := probe(s.contender, 5*time.Second, passive(s.b))
	holds := probe(s.holder, 5*time.Second, passive(s.b))
	third := probe(s.dial(s.n3), 5*time.Second, exclusive(s.b))
	t.Logf("row (khepri): %.1fs after the heal: queues left (n2): %s; the holder's verify: %s; the contender's: %s; a third client's exclusive declare through n3: %s; the holder's connection: %s; the contender's: %s",
		time.Since(th).Seconds(), strings.Join(left, "; "), holds, mine, third, s.holderW.since(t0), s.contenderW.since(t0))
	want := "ok" // 4.3.6: the holder still holds, alone
	if freed {
		// 4.0.5: the contender holds; the holder's passive declare of
		// the name got 404 in one run, 405 (the contender's) in another.
		want = "404"
		if holds == "405" {
			want = "405"
		}
	}
	if !strings.HasPrefix(holds, want) || third != "405" || s.holderW.since(t0) != "open" {
		t.Errorf("K.7: after the heal the holder's verify %q (want %s), a third's declare %q (want 405), the holder's connection %s (want open)", holds, want, third, s.holderW.since(t0))
	}
}

// freesLostQueues says the version's Khepri cluster frees the exclusive
// queues of a node the majority lost (cut off, killed, paused), as
// Mnesia's modes do: 4.0.5 with khepri_db, measured (broker-semantics.md
// section 6); 4.3.6 keeps them.
func freesLostQueues(o ClusterOptions) bool { return o.khepriOptIn() }

func measureKhepriNodeLoss(t *testing.T, o ClusterOptions, fault string) {
	s, _ := newKhepriSetup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	var err error
	if fault == "crash" {
		err = s.n1.Crash()
	} else {
		err = s.n1.Pause()
	}
	if err != nil {
		t.Fatal(err)
	}
	cont := &timeline{t0: t0}
	deadline := t0.Add(90 * time.Second)
	for time.Now().Before(deadline) {
		r := probe(s.contender, 2*time.Second, exclusive(s.b))
		cont.see(r)
		if r == "ok" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("row (khepri, %s of n1): contender's exclusive declare through n2: %s; the holder's connection: %s", fault, cont, s.holderW.since(t0))
	freed := freesLostQueues(o)
	if _, took := cont.when("ok"); took != freed {
		t.Errorf("K.6: the contender on n2 took the exclusive queue of the %s node's holder %v (want %v on %s): %s", fault, took, freed, o.Version.Name, cont)
	}
	tb := time.Now()
	if fault == "crash" {
		err = s.n1.Start(ctx)
	} else {
		err = s.n1.Resume()
	}
	if err != nil {
		t.Fatal(err)
	}
	agreed := awaitAgreement(ctx, s.n2, s.c, 90*time.Second)
	time.Sleep(5 * time.Second)
	mine := probe(s.contender, 5*time.Second, passive(s.b))
	third := probe(s.dial(s.n3), 5*time.Second, exclusive(s.b))
	t.Logf("row (khepri, %s of n1): n1 back (%.1fs after the %s, agreement %.1fs after); the contender's verify: %s; a third client's exclusive declare through n3: %s; the holder's connection: %s; the contender's: %s",
		fault, tb.Sub(t0).Seconds(), fault, agreed.Seconds(), mine, third, s.holderW.since(t0), s.contenderW.since(t0))
	// 4.3.6: the lost holder's queue goes when n1 is back. 4.0.5: the
	// contender took it meanwhile; what n1's return does to the
	// contender's queue differed by fault (kept after a crash, gone
	// after a pause, once each), so it is logged above, not asserted.
	if !freed && third != "ok" {
		t.Errorf("K.6: once n1 is back, a third client's exclusive declare of the lost holder's queue: %q, want ok", third)
	}
}

// A settlement is what became of one publish under confirms: its ack or
// nack (or "returned", "closed", "no answer") and when, from t0.
type settlement struct {
	what string
	at   time.Duration
}

func (s settlement) String() string { return fmt.Sprintf("%s at %.1fs", s.what, s.at.Seconds()) }

// publishConfirmed publishes body to queue on ch (in confirm mode,
// mandatory) and waits up to limit for its settlement.
func publishConfirmed(ch *amqp.Channel, queue, body string, t0 time.Time, limit time.Duration) settlement {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent})
	if err != nil {
		return settlement{"closed: " + err.Error(), time.Since(t0)}
	}
	acked, err := dc.WaitContext(ctx)
	at := time.Since(t0)
	select {
	case <-returns:
		return settlement{"returned", at}
	default:
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return settlement{"no answer", at}
	case err != nil:
		return settlement{"closed: " + err.Error(), at}
	case acked:
		return settlement{"ack", at}
	}
	return settlement{"nack", at}
}

// measurePublishToALostNode is K.10: what a publish under confirms through n2
// to a durable queue on n1 gets, and when, while n1 is cut off ("cut")
// or paused ("pause"), by what the channel did before: m1 through a
// channel that had published to the queue before the fault, sent at once
// after it (pending when n2 declares n1 down: net_ticktime 5 s); m2
// through that channel 15 s after the fault (n1 declared down by then);
// f9 to f17, each through a channel of its own that never published to
// the queue, 9, 11, 13, 15 and 17 s after the fault. "cut-minority" is
// the cut seen from the other side: the publisher on the cut-off n1, the
// queue a durable one of n2's. Then the heal (or
// the resume), and which of them the queue holds. RabbitMQ's channel
// monitors the process of a classic queue it delivers to under confirms
// (rabbit_classic_queue's ensure_monitor): this measures what that
// monitor settles, and when.
func measurePublishToALostNode(t *testing.T, o ClusterOptions, fault string) {
	s, cut := newKhepriSetup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The publisher on n2 to n1's durable queue; for "cut-minority", on
	// the cut-off n1 to a durable queue of n2's.
	from, queue := s.n2, s.a
	if fault == "cut-minority" {
		from, queue = s.n1, s.lock+"-P"
		if r := probe(s.contender, 10*time.Second, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(queue, true, false, false, false, nil)
			return err
		}); r != "ok" {
			t.Fatalf("durable declare of %s through n2: %s", queue, r)
		}
	}
	conn := s.dial(from)
	connW := watchClose(conn)
	channel := func() *amqp.Channel {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	watched := channel()
	if r := publishConfirmed(watched, queue, "m0", time.Now(), 10*time.Second); r.what != "ack" {
		t.Fatalf("m0, through %s to %s before the fault: %s, want ack", from.Name, queue, r)
	}
	t0 := time.Now()
	var err error
	if fault == "pause" {
		err = s.n1.Pause()
	} else {
		err = cut(ctx, s.n2.Host, s.n3.Host)
	}
	if err != nil {
		t.Fatal(err)
	}
	const limit = 40 * time.Second
	sent := []string{"m1", "m2", "f9", "f11", "f13", "f15", "f17"}
	got := make([]settlement, len(sent))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got[0] = publishConfirmed(watched, queue, "m1", t0, limit)
		time.Sleep(time.Until(t0.Add(15 * time.Second)))
		got[1] = publishConfirmed(watched, queue, "m2", t0, limit)
	}()
	for i, at := range []int{9, 11, 13, 15, 17} {
		ch := channel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(t0.Add(time.Duration(at) * time.Second)))
			got[2+i] = publishConfirmed(ch, queue, sent[2+i], t0, limit)
		}()
	}
	wg.Wait()
	var seen []string
	for i, g := range got {
		seen = append(seen, sent[i]+": "+g.String())
	}
	t.Logf("row (%s, K.10, %s of n1): through %s to %s: %s", o.PartitionHandling, fault, from.Name, queue, strings.Join(seen, "; "))
	// What 4.3.6 and 4.0.5 did: every one nacked; m1 when n2 declared n1
	// down (net_ticktime 5 s: 3.75 to 6.25 s, and some slack); the
	// others at the end of n2's connection attempt to n1 under way when
	// each was sent, attempts 7 s long (net_setuptime) from then on.
	// What 3.10.8 did under ignore: m1 the same, the others returned at
	// once (n1's queue records gone from n2's copy, C.6).
	down := got[0].at
	if got[0].what != "nack" || down < 3*time.Second || down > 8*time.Second {
		t.Errorf("K.10: m1, sent at the %s: %s, want a nack when n2 declares n1 down (about 5 s)", fault, got[0])
	}
	if o.PartitionHandling != Khepri {
		for i, g := range got[1:] {
			if g.what != "returned" {
				t.Errorf("%s: %s, want returned", sent[i+1], g)
			}
		}
		return
	}
	for i, g := range got {
		if g.what != "nack" {
			t.Errorf("K.10: %s: %s, want a nack", sent[i], g)
		}
	}
	sentAt := []time.Duration{0, 15 * time.Second, 9 * time.Second, 11 * time.Second, 13 * time.Second, 15 * time.Second, 17 * time.Second}
	for i := 1; i < len(got); i++ {
		// Settled by the end of an attempt: after it was sent, within an
		// attempt's length of it, k attempts of 6.5 to 7.5 s after the
		// declaring down.
		at, wait := got[i].at, got[i].at-sentAt[i]
		k := math.Round(float64(at-down) / float64(7*time.Second))
		lo, hi := down+time.Duration(k*6.5*float64(time.Second)), down+time.Duration(k*7.5*float64(time.Second))
		if wait < 0 || wait > 8500*time.Millisecond || k < 1 || at < lo-time.Second || at > hi+time.Second {
			t.Errorf("K.10: %s, sent at %.0fs: settled at %.1fs, want at the end of n2's connection attempt to n1 under way (attempts about 7 s long from n1's declaring down at %.1fs)", sent[i], sentAt[i].Seconds(), at.Seconds(), down.Seconds())
		}
	}
	th := time.Now()
	if fault == "pause" {
		err = s.n1.Resume()
	} else {
		err = s.lab.Heal(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	agreed := awaitAgreement(ctx, s.n2, s.c, 90*time.Second)
	time.Sleep(5 * time.Second)
	// What the queue holds after the heal, read through n2.
	var held []string
	r := probe(s.dial(s.n2), 10*time.Second, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(queue, true)
			if err != nil || !ok {
				return err
			}
			held = append(held, string(d.Body))
		}
	})
	t.Logf("row (%s, K.10, %s of n1): %.1fs after n1 was back (agreement %.1fs after): the queue holds %v (%s); the publishers' connection: %s", o.PartitionHandling,
		fault, time.Since(th).Seconds(), agreed.Seconds(), held, r, connW.since(t0))
}
