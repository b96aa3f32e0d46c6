package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/internal/quick"
)

// A semanticsRow is one row of docs/broker-semantics.md §1 (or §2) that
// the amqp-locks design rests on, measured on one node by probe: a short
// outcome, the same words the table's version column gives.
type semanticsRow struct {
	row, what string
	probe     func(p *rowProbe) string
}

// semanticsRows are the single-node rows measured on each version
// (TestSemanticsByVersion). Each probe uses names of its own and deletes
// what it made.
var semanticsRows = []semanticsRow{
	{"1.1", "another connection's exclusive declare of an exclusive queue", func(p *rowProbe) string {
		q := p.held("1.1")
		return p.code(p.declare(p.b, q, true, false, false))
	}},
	{"1.2", "the owner's exclusive declare on another channel", func(p *rowProbe) string {
		q := p.held("1.2")
		return p.code(p.declare(p.a, q, true, false, false))
	}},
	{"1.3", "the owner's exclusive redeclare with durable=true: answer, and the queue's durable flag", func(p *rowProbe) string {
		q := p.held("1.3")
		out := p.code(p.declare(p.a, q, true, true, false))
		return out + ", durable " + p.listed(q, "durable")
	}},
	{"2.1", "another connection's non-exclusive declare of an exclusive queue", func(p *rowProbe) string {
		q := p.held("2.1")
		return p.code(p.declare(p.b, q, false, false, false))
	}},
	{"2.2", "the owner's non-exclusive declare of its exclusive queue", func(p *rowProbe) string {
		q := p.held("2.2")
		return p.code(p.declare(p.a, q, false, false, false))
	}},
	{"3.1", "a passive declare of a missing queue", func(p *rowProbe) string {
		return p.code(p.passive(p.b, p.name("3.1")))
	}},
	{"3.2", "a passive declare of another connection's exclusive queue", func(p *rowProbe) string {
		return p.code(p.passive(p.b, p.held("3.2")))
	}},
	{"3.3", "the owner's passive declare of its exclusive queue (another channel)", func(p *rowProbe) string {
		return p.code(p.passive(p.a, p.held("3.3")))
	}},
	{"5.1", "a delete of a missing queue", func(p *rowProbe) string {
		return p.code(p.delete(p.b, p.name("5.1")))
	}},
	{"5.2", "another connection's delete of an exclusive queue", func(p *rowProbe) string {
		return p.code(p.delete(p.b, p.held("5.2")))
	}},
	{"6.1", "the declaring channel closed: another connection's exclusive declare", func(p *rowProbe) string {
		q := p.name("6.1")
		ch := p.channel(p.a)
		if err := p.declare(ch, q, true, false, false); err != nil {
			return "declare: " + p.code(err)
		}
		ch.Close()
		return p.code(p.declare(p.b, q, true, false, false))
	}},
	{"6.8", "conn.Close() returned, then another connection's exclusive declare, retried every ms (50 trials)", func(p *rowProbe) string {
		ok := 0
		var late []time.Duration
		for i := range 50 {
			q := p.name(fmt.Sprintf("6.8-%d", i))
			c := p.dial()
			if err := p.declare(c, q, true, false, false); err != nil {
				return "declare: " + p.code(err)
			}
			c.Close()
			t0 := time.Now()
			if p.declare(p.b, q, true, false, false) == nil {
				ok++
				p.drop(q)
				continue
			}
			for p.declare(p.b, q, true, false, false) != nil {
				if time.Since(t0) > 10*time.Second {
					return fmt.Sprintf("still 405 10 s after the close (trial %d)", i)
				}
				time.Sleep(time.Millisecond)
			}
			late = append(late, time.Since(t0))
			p.drop(q)
		}
		if len(late) == 0 {
			return fmt.Sprintf("ok at once %d/50", ok)
		}
		slices.Sort(late)
		return fmt.Sprintf("ok at once %d/50; the others freed after p50 %.1f ms, max %.1f ms", ok, ms(late[len(late)/2]), ms(late[len(late)-1]))
	}},
	{"7a'", "the owner's socket closed (no AMQP close): another's exclusive declare, retried every ms (20 trials)", func(p *rowProbe) string {
		first := 0
		var took []time.Duration
		for i := range 20 {
			q := p.name(fmt.Sprintf("7a-%d", i))
			c, nc := p.dialSocket()
			if err := p.declare(c, q, true, false, false); err != nil {
				return "declare: " + p.code(err)
			}
			nc.Close()
			t0 := time.Now()
			tries := 0
			for {
				tries++
				if p.declare(p.b, q, true, false, false) == nil {
					break
				}
				if time.Since(t0) > 10*time.Second {
					return fmt.Sprintf("still 405 after 10 s (trial %d)", i)
				}
				time.Sleep(time.Millisecond)
			}
			took = append(took, time.Since(t0))
			if tries > 1 {
				first++
			}
			p.drop(q)
		}
		slices.Sort(took)
		return fmt.Sprintf("first try 405 %d/20; freed after min %.1f ms, p50 %.1f ms, p90 %.1f ms, max %.1f ms", first, ms(took[0]), ms(took[len(took)/2]), ms(took[len(took)*9/10]), ms(took[len(took)-1]))
	}},
	{"7c", "an exclusive declare of a new name whose socket closes at once; another's exclusive declare meanwhile: the name lost (100 trials)", func(p *rowProbe) string {
		lost, took := 0, 0
		for i := range 100 {
			q := p.name(fmt.Sprintf("7c-%d", i))
			c, nc := p.dialSocket()
			ch := p.channel(c)
			nc.closeAfterWrite.Store(true)
			go ch.QueueDeclare(q, false, false, true, false, nil) // X never reads its answer
			<-nc.closed
			if p.declare(p.b, q, true, false, false) != nil {
				continue // X's queue was made and is being released (7a')
			}
			took++
			time.Sleep(50 * time.Millisecond)
			if p.passive(p.b, q) != nil {
				lost++
			}
			p.drop(q)
		}
		return fmt.Sprintf("lost %d of %d taken", lost, took)
	}},
	{"10", "rabbitmqctl close_all_connections: the owner's close, and its exclusive queue", func(p *rowProbe) string {
		c := p.dial()
		q := p.name("10")
		if err := p.declare(c, q, true, false, false); err != nil {
			return "declare: " + p.code(err)
		}
		closed := c.NotifyClose(make(chan *amqp.Error, 1))
		if _, err := p.node.Ctl(p.ctx, "close_all_connections", "probe says bye"); err != nil {
			return "close_all_connections: " + err.Error()
		}
		var e *amqp.Error
		select {
		case e = <-closed:
		case <-time.After(10 * time.Second):
			return "no close within 10 s"
		}
		p.reopen()
		freed := p.declare(p.b, q, true, false, false) == nil
		p.drop(q)
		if e == nil {
			return fmt.Sprintf("closed without an error, queue freed %v", freed)
		}
		return fmt.Sprintf("%d %s, queue freed at once %v", e.Code, strings.SplitN(e.Reason, " - ", 2)[0], freed)
	}},
	{"7b", "heartbeat 1 s, the owner's connection black-holed: its exclusive queue freed after (5 trials)", func(p *rowProbe) string {
		var took []time.Duration
		for i := range 5 {
			px, err := amqpproxy.Listen(p.node.Addr)
			if err != nil {
				return "proxy: " + err.Error()
			}
			defer px.Close()
			c, err := amqp.DialConfig("amqp://guest:guest@"+px.Addr()+"/", amqp.Config{Heartbeat: time.Second})
			if err != nil {
				return "dial: " + err.Error()
			}
			q := p.name(fmt.Sprintf("7b-%d", i))
			if err := p.declare(c, q, true, false, false); err != nil {
				return "declare: " + p.code(err)
			}
			px.Partition()
			t0 := time.Now()
			for p.declare(p.b, q, true, false, false) != nil {
				if time.Since(t0) > 30*time.Second {
					return "still held 30 s after the cut"
				}
				time.Sleep(20 * time.Millisecond)
			}
			took = append(took, time.Since(t0))
			p.drop(q)
			c.Close()
		}
		slices.Sort(took)
		return fmt.Sprintf("%.2f to %.2f s", took[0].Seconds(), took[len(took)-1].Seconds())
	}},
	{"T", "amqp-locks-python's A queue (durable=false, exclusive=false, auto-delete=false, x-max-length 0)", func(p *rowProbe) string {
		q := p.name("T")
		ch := p.channel(p.b)
		_, err := ch.QueueDeclare(q, false, false, false, false, amqp.Table{"x-max-length": int32(0)})
		if err == nil {
			p.drop(q)
		}
		return p.code(err)
	}},
	{"T'", "amqp-locks-python's B queue (exclusive, durable=false, auto-delete=false, x-max-length 0)", func(p *rowProbe) string {
		q := p.name("T'")
		ch := p.channel(p.b)
		_, err := ch.QueueDeclare(q, false, false, true, false, amqp.Table{"x-max-length": int32(0)})
		if err == nil {
			p.drop(q)
		}
		return p.code(err)
	}},
	{"11d", "a dial: TCP and the AMQP handshake to connection.open-ok, then a channel (100 dials after 10)", func(p *rowProbe) string {
		var took []time.Duration
		for i := range 110 {
			t0 := time.Now()
			c := p.dial()
			ch := p.channel(c)
			if i >= 10 {
				took = append(took, time.Since(t0))
			}
			ch.Close()
			c.Close()
		}
		slices.Sort(took)
		return fmt.Sprintf("p10 %.1f ms, p50 %.1f ms, p90 %.1f ms, max %.1f ms", ms(took[10]), ms(took[50]), ms(took[90]), ms(took[99]))
	}},
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// semanticsWant is what each version answered when measured
// (docs/broker-semantics.md's version column); a row a version does not
// list here, or a timing, is logged, not asserted.
var semanticsWant = map[string]map[string]string{
	"3.10.8": withRows(sameOnEvery, "6.8", "ok at once 50/50"),
	"4.0.5":  withRows(sameOnEvery, "6.8", "ok at once 50/50"),
	// 6.8: on 4.3.6 an exclusive queue may outlive its connection's
	// close-ok by a few milliseconds (measured: 24 and 19 of 50 trials).
	"4.3.6": sameOnEvery,
}

// sameOnEvery are the rows every version answered alike.
var sameOnEvery = map[string]string{"1.1": "405", "1.2": "ok", "1.3": "ok, durable false", "2.1": "405", "2.2": "405", "3.1": "404",
	"3.2": "405", "3.3": "ok", "5.1": "ok", "5.2": "405", "6.1": "405", "10": "320 CONNECTION_FORCED, queue freed at once true", "T": "ok", "T'": "ok"}

// withRows is rows with row set to want.
func withRows(rows map[string]string, row, want string) map[string]string {
	out := maps.Clone(rows)
	out[row] = want
	return out
}

// TestSemanticsByVersion measures the rows of docs/broker-semantics.md
// the design rests on, on a private single node of each version (the
// machine's 3.10.8, and 4.0.5 and 4.3.6 from their Debian roots), and
// prints them as the table's version column. A row whose answer differs
// from the one recorded for that version (semanticsWant) fails.
// LOCKPROVER_RABBITMQ_VERSIONS=all runs it (a measurement, minutes);
// LOCKPROVER_RABBITMQ_VERSIONS=4.3.6 runs one version.
func TestSemanticsByVersion(t *testing.T) {
	which := os.Getenv("LOCKPROVER_RABBITMQ_VERSIONS")
	if which == "" {
		t.Skip("a node of each version, a measurement: LOCKPROVER_RABBITMQ_VERSIONS=all (or one version) runs it (make test does not)")
	}
	results := map[string]map[string]string{}
	var versions []string
	for _, name := range []string{"3.10.8", "4.0.5", "4.3.6"} {
		if which != "all" && which != name {
			continue
		}
		versions = append(versions, name)
		t.Run(name, func(t *testing.T) {
			var o ClusterOptions
			if name == "3.10.8" {
				quick.Skip(t, "a RabbitMQ node in a lab")
				if err := ClusterPreflight(); err != nil {
					t.Skipf("no RabbitMQ node in a lab here: %v", err)
				}
			} else {
				o.Version = rootedVersion(t, name)
			}
			s := startSingle(t, o)
			if got := serverVersion(t, s.URL()); got != name {
				t.Fatalf("the node says it is %q, want %s", got, name)
			}
			results[name] = map[string]string{}
			for _, r := range semanticsRows {
				p := newRowProbe(t, s.Node)
				got := r.probe(p)
				p.close()
				results[name][r.row] = got
				t.Logf("%s %-4s %s: %s", name, r.row, r.what, got)
				if want, ok := semanticsWant[name][r.row]; ok && got != want {
					t.Errorf("%s row %s (%s): %s, want %s", name, r.row, r.what, got, want)
				}
			}
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| row | what |")
	for _, v := range versions {
		fmt.Fprintf(&b, " %s |", v)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(versions)) + "\n")
	for _, r := range semanticsRows {
		fmt.Fprintf(&b, "| %s | %s |", r.row, r.what)
		for _, v := range versions {
			fmt.Fprintf(&b, " %s |", results[v][r.row])
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}

// A rowProbe is one row's measurement on a node: a connection a that
// holds queues, b that contends, and the names the row made.
type rowProbe struct {
	t      *testing.T
	ctx    context.Context
	node   *Node
	url    string
	a, b   *amqp.Connection
	prefix string
	made   []string
}

func newRowProbe(t *testing.T, n *Node) *rowProbe {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p := &rowProbe{t: t, ctx: ctx, node: n, url: n.URL(), prefix: fmt.Sprintf("lp-rows-%d-", time.Now().UnixNano())}
	p.a, p.b = p.dial(), p.dial()
	return p
}

// dial opens a connection to the node, or fails the test. Heartbeat 0
// is amqp091-go's default of 10 s: no probe lasts that long idle.
func (p *rowProbe) dial() *amqp.Connection {
	c, err := amqp.DialConfig(p.url, amqp.Config{Heartbeat: 0})
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// reopen replaces a closed b.
func (p *rowProbe) reopen() {
	if p.b.IsClosed() {
		p.b = p.dial()
	}
}

// A cutConn is a socket that closes itself right after its next write
// once closeAfterWrite is set (the 7c probe: X's declare sent, then its
// socket gone before it can read the answer); closed is closed then.
type cutConn struct {
	net.Conn
	closeAfterWrite atomic.Bool
	once            sync.Once
	closed          chan struct{}
}

func (c *cutConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.closeAfterWrite.Load() {
		c.Close()
	}
	return n, err
}

func (c *cutConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

// dialSocket opens a connection and hands out its socket, to close it
// without an AMQP close.
func (p *rowProbe) dialSocket() (*amqp.Connection, *cutConn) {
	var nc *cutConn
	c, err := amqp.DialConfig(p.url, amqp.Config{Heartbeat: 0, Dial: func(network, addr string) (net.Conn, error) {
		raw, err := net.DialTimeout(network, addr, 10*time.Second)
		if err != nil {
			return nil, err
		}
		nc = &cutConn{Conn: raw, closed: make(chan struct{})}
		return nc, nil
	}})
	if err != nil {
		p.t.Fatal(err)
	}
	return c, nc
}

// channel opens a channel on c, or fails the test.
func (p *rowProbe) channel(c *amqp.Connection) *amqp.Channel {
	ch, err := c.Channel()
	if err != nil {
		p.t.Fatal(err)
	}
	return ch
}

// name is a fresh queue name for the row, deleted at close.
func (p *rowProbe) name(suffix string) string {
	q := p.prefix + suffix
	p.made = append(p.made, q)
	return q
}

// held is a fresh queue that a declares exclusive.
func (p *rowProbe) held(suffix string) string {
	q := p.name(suffix)
	if err := p.declare(p.a, q, true, false, false); err != nil {
		p.t.Fatalf("a's exclusive declare of %s: %v", q, err)
	}
	return q
}

// declare declares q on a new channel of c (or ch) and closes it.
func (p *rowProbe) declare(on any, q string, exclusive, durable, passive bool) error {
	ch, own := p.on(on)
	if own {
		defer ch.Close()
	}
	if passive {
		_, err := ch.QueueDeclarePassive(q, durable, false, exclusive, false, nil)
		return err
	}
	_, err := ch.QueueDeclare(q, durable, false, exclusive, false, nil)
	return err
}

// passive is a passive declare of q on a new channel of c.
func (p *rowProbe) passive(c *amqp.Connection, q string) error {
	return p.declare(c, q, false, false, true)
}

// delete deletes q on a new channel of c.
func (p *rowProbe) delete(c *amqp.Connection, q string) error {
	ch, _ := p.on(c)
	defer ch.Close()
	_, err := ch.QueueDelete(q, false, false, false)
	return err
}

// drop deletes q through b, whatever it answers.
func (p *rowProbe) drop(q string) {
	p.reopen()
	p.delete(p.b, q)
}

// on is a channel to work on: ch itself, or a new one of a connection
// (own: the caller closes it).
func (p *rowProbe) on(x any) (*amqp.Channel, bool) {
	switch x := x.(type) {
	case *amqp.Channel:
		return x, false
	case *amqp.Connection:
		if x.IsClosed() && x == p.b {
			p.reopen()
			x = p.b
		}
		return p.channel(x), true
	}
	panic(fmt.Sprintf("declare on %T", x))
}

// code is an error's AMQP reply code, "ok" for none.
func (p *rowProbe) code(err error) string {
	var e *amqp.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &e):
		return fmt.Sprint(e.Code)
	}
	return err.Error()
}

// listed is q's column col as rabbitmqctl list_queues says it.
func (p *rowProbe) listed(q, col string) string {
	out, err := p.node.Ctl(p.ctx, "list_queues", "-q", "--no-table-headers", "name", col)
	if err != nil {
		return "list_queues: " + err.Error()
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == q {
			return f[1]
		}
	}
	return "not listed"
}

// close closes the row's connections and deletes every queue it named.
func (p *rowProbe) close() {
	p.a.Close()
	p.reopen()
	for _, q := range p.made {
		p.delete(p.b, q)
	}
	p.b.Close()
}

// The versions said to have the exclusive-delete race: those measured
// (3.10.8, 4.0.5 yes; 4.3.6 no), every version before 4.2.3 (the fix in
// its notes, not in 4.1.8's), and none that cannot be read.
func TestExclusiveDeleteRace(t *testing.T) {
	for v, want := range map[string]bool{
		"3.10.8": true, "3.13.7": true, "4.0.5": true, "4.1.7": true, "4.1.8": true, "4.1.10": true,
		"4.2.0": true, "4.2.2": true, "4.2.3": false, "4.2.10": false, "4.3.6": false, "5.0.0": false,
		"4.0.5-rc.1": true, "4.2.3+deb13u1": false, "": false, "4": false, "x.y.z": false,
	} {
		if got := ExclusiveDeleteRace(v); got != want {
			t.Errorf("ExclusiveDeleteRace(%q) = %v, want %v", v, got, want)
		}
	}
}
