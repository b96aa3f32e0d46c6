package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A probe is one AMQP call on a fresh channel of conn, given at most
// limit: what it answered ("ok", "405", "404: ...", "closed", "no answer").
func probe(conn *amqp.Connection, limit time.Duration, call func(ch *amqp.Channel) error) string {
	res := make(chan string, 1)
	go func() {
		ch, err := conn.Channel()
		if err != nil {
			res <- "closed"
			return
		}
		err = call(ch)
		var ae *amqp.Error
		switch {
		case err == nil:
			ch.Close()
			res <- "ok"
		case errors.As(err, &ae) && ae.Code == amqp.ResourceLocked:
			res <- "405"
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
			res <- "404: " + ae.Reason
		case errors.As(err, &ae):
			res <- fmt.Sprintf("%d: %s", ae.Code, ae.Reason)
		default:
			res <- "closed"
		}
	}()
	select {
	case r := <-res:
		return r
	case <-time.After(limit):
		return "no answer"
	}
}

func exclusive(name string) func(ch *amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, false, false, true, false, nil)
		return err
	}
}

func passive(name string) func(ch *amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
		return err
	}
}

// A timeline records what a probe answered, from when, relative to t0:
// one entry per change.
type timeline struct {
	mu      sync.Mutex
	t0      time.Time
	entries []string
	last    string
	first   map[string]time.Duration
}

func (tl *timeline) see(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	d := time.Since(tl.t0)
	if tl.first == nil {
		tl.first = map[string]time.Duration{}
	}
	if _, ok := tl.first[what]; !ok {
		tl.first[what] = d
	}
	if what != tl.last {
		tl.entries = append(tl.entries, fmt.Sprintf("%s from %.1fs", what, d.Seconds()))
		tl.last = what
	}
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.entries, ", ")
}

// when is when what was first seen, and whether it was.
func (tl *timeline) when(what string) (time.Duration, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	d, ok := tl.first[what]
	return d, ok
}

func uniqueName(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	return "lpcl-" + hex.EncodeToString(b)
}

// TestClusterExclusiveQueues measures, on a three-node cluster in each
// partition handling mode, what docs/broker-semantics.md's cluster rows
// say: where an exclusive queue lives, what a contender on another node
// gets while its owner lives, and, once node n1 (the holder's) is cut off
// from the other two silently, what a contender on n2 gets and when, what
// the holder's own verify (a passive declare on its connection to n1) sees
// and when, what a passive declare of a durable queue whose home is n1
// gets from n2, and what is left after the heal. The holder and the
// contender keep their links to their nodes: only the nodes' links to one
// another are cut.
//
// It takes about three minutes (a cluster per mode), so it runs only when
// asked: LOCKPROVER_CLUSTER_ROWS=1.
func TestClusterExclusiveQueues(t *testing.T) {
	if os.Getenv("LOCKPROVER_CLUSTER_ROWS") == "" {
		t.Skip("measures docs/broker-semantics.md's cluster rows in three minutes: LOCKPROVER_CLUSTER_ROWS=1 to run it")
	}
	for _, mode := range Modes {
		t.Run(mode, func(t *testing.T) {
			measureCluster(t, mode)
		})
	}
}

// TestClusterPublishToALostNode is broker-semantics.md's K.10 on the
// machine's 3.10.8 under ignore (C.24): a publish under confirms through
// n2 to n1's durable queue, sent as n1 is cut off or paused, is nacked
// when n2 declares n1 down; one sent after that is returned, n1's
// records gone from n2's copy. Its Khepri counterpart is
// TestClusterKhepriRows' publish cases. About a minute a fault:
// LOCKPROVER_CLUSTER_ROWS=1.
func TestClusterPublishToALostNode(t *testing.T) {
	if os.Getenv("LOCKPROVER_CLUSTER_ROWS") == "" {
		t.Skip("measures docs/broker-semantics.md's C.24 in two minutes: LOCKPROVER_CLUSTER_ROWS=1 to run it")
	}
	for _, fault := range []string{"cut", "pause"} {
		t.Run(fault, func(t *testing.T) { measurePublishToALostNode(t, ClusterOptions{PartitionHandling: Ignore}, fault) })
	}
}

func measureCluster(t *testing.T, mode string) {
	c, lab := startCluster(t, ClusterOptions{PartitionHandling: mode})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	dial := func(n *Node) *amqp.Connection {
		conn, err := amqp.DialConfig(n.URL(), amqp.Config{Heartbeat: 2 * time.Second})
		if err != nil {
			t.Fatalf("dial %s: %v", n.Name, err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	lock := uniqueName(t)
	b, a := lock+"-B", lock+"-A"
	holder, contender := dial(n1), dial(n2)
	holderClosed, contenderClosed := watchClose(holder), watchClose(contender)
	if r := probe(holder, 5*time.Second, exclusive(b)); r != "ok" {
		t.Fatalf("holder's exclusive declare on n1: %s", r)
	}
	if r := probe(holder, 5*time.Second, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(a, true, false, false, false, nil)
		return err
	}); r != "ok" {
		t.Fatalf("durable declare on n1: %s", r)
	}
	// Where it lives: the node of the declaring connection.
	out, err := n2.Ctl(ctx, "list_queues", "name", "pid", "--no-table-headers", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, b+"\t") {
			t.Logf("row: exclusive queue declared through n1: its pid %s", strings.TrimPrefix(line, b+"\t"))
			if !strings.Contains(line, "@"+strings.TrimPrefix(n1.Name, "rabbit@")) && !strings.Contains(line, ".") {
				t.Errorf("exclusive queue's pid %q is not n1's", line)
			}
		}
	}
	// A contender on another node, while the owner lives.
	if r := probe(contender, 5*time.Second, exclusive(b)); r != "405" {
		t.Errorf("contender on n2 while the holder lives: %s, want 405", r)
	} else {
		t.Logf("row: contender's exclusive declare through n2 while the holder lives: 405 RESOURCE_LOCKED")
	}

	// Cut n1 off from n2 and n3, both ways, silently.
	t0 := time.Now()
	for _, o := range []string{n2.Host, n3.Host} {
		if err := lab.Cut(ctx, n1.Host, o); err != nil {
			t.Fatal(err)
		}
		if err := lab.Cut(ctx, o, n1.Host); err != nil {
			t.Fatal(err)
		}
	}
	cont, verify, durable := &timeline{t0: t0}, &timeline{t0: t0}, &timeline{t0: t0}
	deadline := t0.Add(25 * time.Second)
	var wg sync.WaitGroup
	poll := func(tl *timeline, conn func() *amqp.Connection, call func(*amqp.Channel) error, stop func(string) bool) {
		defer wg.Done()
		cn := conn()
		for time.Now().Before(deadline) {
			r := "closed"
			if cn != nil && !cn.IsClosed() {
				r = probe(cn, 2*time.Second, call)
			}
			tl.see(r)
			if stop(r) {
				return
			}
			if r == "no answer" || r == "closed" {
				// The connection may be stuck or gone: a fresh one for
				// the next probe, if the node takes one.
				if nc, err := amqp.DialConfig(nodeURLOf(cn, c), amqp.Config{Heartbeat: 2 * time.Second, Dial: amqp.DefaultDial(2 * time.Second)}); err == nil {
					t.Cleanup(func() { nc.Close() })
					cn = nc
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	accepts := &timeline{t0: t0} // does n1 take a new connection?
	dialN1 := func() {
		defer wg.Done()
		watchAccepts(accepts, n1, deadline)
	}
	wg.Add(4)
	go dialN1()
	go poll(cont, func() *amqp.Connection { return contender }, exclusive(b), func(r string) bool { return r == "ok" })
	go poll(verify, func() *amqp.Connection { return holder }, passive(b), func(string) bool { return false })
	go poll(durable, func() *amqp.Connection { return dial(n2) }, passive(a), func(string) bool { return false })
	wg.Wait()
	t.Logf("row (%s): contender's exclusive declare through n2 after n1 is cut off: %s", mode, cont)
	t.Logf("row (%s): holder's verify (passive declare) through n1: %s", mode, verify)
	t.Logf("row (%s): passive declare of n1's durable queue through n2: %s", mode, durable)
	t.Logf("row (%s): a new connection to n1: %s", mode, accepts)
	// What every mode does while the partition lasts: n2 notices within
	// net_ticktime's window (0.75 to 1.25 times 5 s, and a loaded
	// machine's slack) and frees the name; the holder on n1 is told only
	// where n1 pauses.
	if d, ok := cont.when("ok"); !ok || d < 3*time.Second || d > 12*time.Second {
		t.Errorf("%s: the contender got the exclusive queue at %v (seen: %v), want 3.75 to 6.25 s and a loaded machine's slack", mode, d, ok)
	}
	if d, ok := durable.when("404: NOT_FOUND - home node '" + n1.Name + "' of durable queue '" + a + "' in vhost '/' is down or inaccessible"); !ok || d > 14*time.Second {
		t.Errorf("%s: a passive declare of the durable queue whose home is cut off: %s, want a 404 naming its home node down", mode, durable)
	}
	if _, closed := verify.when("closed"); closed != (mode == PauseMinority) {
		t.Errorf("%s: the holder's verify through n1: %s", mode, verify)
	}
	if _, refused := accepts.when("refused"); refused != (mode == PauseMinority) {
		t.Errorf("%s: a new connection to n1: %s", mode, accepts)
	}

	// Heal, then see when the cluster agrees again, what became of the
	// holder's and the contender's connections, and what is left.
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	agreed := awaitAgreement(ctx, n2, c, 40*time.Second)
	// A cut-off node that paused takes connections again once it is
	// back in the majority.
	if agreed >= 0 {
		if conn, err := amqp.Dial(n1.URL()); err != nil {
			t.Errorf("%s: n1 refuses connections once the cluster agrees: %v", mode, err)
		} else {
			conn.Close()
		}
	}
	if agreed < 0 {
		t.Logf("row (%s): 40s after the heal, n2 still lists a partition", mode)
		if mode != Ignore {
			t.Errorf("%s: the cluster did not agree again within 40 s of the heal", mode)
		}
		// As RabbitMQ's docs tell an operator: restart the side it gives
		// up (n1, the minority).
		tr := time.Now()
		if err := n1.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		agreed = awaitAgreement(ctx, n2, c, 60*time.Second)
		t.Logf("row (%s): n1 restarted in %.1fs; the cluster agrees %.1fs after the restart began", mode, time.Since(tr).Seconds(), agreed.Seconds())
	} else {
		t.Logf("row (%s): the cluster agrees again %.1fs after the heal", mode, agreed.Seconds())
		if mode == Ignore {
			t.Errorf("ignore: the cluster agreed again by itself, which RabbitMQ's docs say it does not")
		}
	}
	qs, _ := n2.Ctl(ctx, "list_queues", "name", "pid", "--no-table-headers", "--quiet")
	var left []string
	for _, l := range strings.Split(qs, "\n") {
		if strings.HasPrefix(l, lock) {
			left = append(left, strings.ReplaceAll(l, "\t", " "))
		}
	}
	t.Logf("row (%s): queues left: %s; the holder's connection: %s; the contender's: %s", mode, strings.Join(left, "; "), holderClosed.since(t0), contenderClosed.since(t0))
	// Whether the lock is still the contender's: its own verify, and a
	// third client's exclusive declare through n3.
	mine := probe(contender, 5*time.Second, passive(b))
	third := probe(dial(n3), 5*time.Second, exclusive(b))
	t.Logf("row (%s): after the heal, the contender's verify: %s; a third client's exclusive declare through n3: %s", mode, mine, third)
	if third == "ok" && !contender.IsClosed() {
		t.Logf("row (%s): DOUBLE HOLD after the heal: the contender's connection is open and a third client declared its exclusive queue", mode)
	}
	// After the heal the contender keeps the lock, except under autoheal:
	// the restarting loser's clean-up of its holder's queue deletes the
	// record by name, the contender's (RabbitMQ 3.10; 4.2.3 checks the
	// owner first).
	wantMine, wantThird := "ok", "405"
	if mode == Autoheal {
		wantMine, wantThird = "404: NOT_FOUND - no queue '"+b+"' in vhost '/'", "ok"
	}
	if mine != wantMine || third != wantThird || contender.IsClosed() {
		t.Errorf("%s: after the heal the contender's verify %q (want %q), a third's declare %q (want %q), the contender's connection %s",
			mode, mine, wantMine, third, wantThird, contenderClosed.since(t0))
	}
}

// watchAccepts notes in tl, until deadline, whether n takes a new
// connection (a dial given 2 s), every 500 ms.
func watchAccepts(tl *timeline, n *Node, deadline time.Time) {
	for time.Now().Before(deadline) {
		conn, err := amqp.DialConfig(n.URL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
		if err != nil {
			tl.see("refused")
		} else {
			tl.see("accepted")
			conn.Close()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// A closeWatch notes when a connection's close notice came.
type closeWatch struct {
	mu  sync.Mutex
	at  time.Time
	err *amqp.Error
}

func watchClose(conn *amqp.Connection) *closeWatch {
	w := &closeWatch{}
	ch := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		err := <-ch
		w.mu.Lock()
		w.at, w.err = time.Now(), err
		w.mu.Unlock()
	}()
	return w
}

func (w *closeWatch) since(t0 time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() {
		return "open"
	}
	why := "the socket"
	if w.err != nil {
		why = fmt.Sprintf("%d %s", w.err.Code, w.err.Reason)
	}
	return fmt.Sprintf("closed at %.1fs (%s)", w.at.Sub(t0).Seconds(), why)
}

// awaitAgreement polls n's cluster_status until it lists no partition and
// every node of c running, and says how long that took (-1 if it did not
// within limit).
func awaitAgreement(ctx context.Context, n *Node, c *Cluster, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		out, err := n.Ctl(ctx, "cluster_status", "--formatter", "json")
		var st struct {
			Partitions map[string][]string `json:"partitions"`
			Running    []string            `json:"running_nodes"`
		}
		if err == nil && json.Unmarshal([]byte(out), &st) == nil && len(st.Partitions) == 0 && len(st.Running) == len(c.Nodes) {
			return time.Since(start)
		}
		time.Sleep(time.Second)
	}
	return -1
}

// nodeURLOf is the URL of the node conn was made to.
func nodeURLOf(conn *amqp.Connection, c *Cluster) string {
	if conn != nil {
		addr := conn.RemoteAddr().String()
		for _, n := range c.Nodes {
			if n.Addr == addr {
				return n.URL()
			}
		}
	}
	return c.Nodes[1].URL()
}
