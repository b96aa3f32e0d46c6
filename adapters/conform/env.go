package conform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// Options say which broker to test and how it may be controlled.
type Options struct {
	// URL is the broker's AMQP URL (amqp:// only: the fault proxy reads the
	// frames); "" means rabbitmq.DefaultURL.
	URL string
	// Ctl is the rabbitmqctl command for that broker's node; nil means
	// {"rabbitmqctl"}. It must pass standard input through for the fast
	// query session (see rabbitmq.Ctl); otherwise queries run as plain
	// commands.
	Ctl []string
	// PlainCtl runs every query as a plain rabbitmqctl command, never
	// through the session: correct, but each query costs about a second, so
	// the timed cases cannot hold.
	PlainCtl bool
	// AllowRestart lets StopBroker and StartBroker run rabbitmqctl stop_app
	// and start_app, which cut every client of a shared broker off. Without
	// it they return an error, and table cases that restart the broker are
	// skipped.
	AllowRestart bool
	// Client is the client library an Env's connections are made with:
	// for each connection, a Broker that dials url (the connection's fault
	// proxy). nil means amqp091-go (rabbitmq.New). The wire differential
	// sets it to run the same sequences through pika and amqplib.
	Client func(url string) broker.Broker
}

// ErrNoBroker is wrapped by Open's error when nothing answers at the URL.
var ErrNoBroker = errors.New("conform: no broker answers")

// A Server is a real broker under test: its URL, rabbitmqctl, a Cleaner
// with a direct connection of its own, and a random prefix that every
// queue and connection name of this Server starts with.
type Server struct {
	opts   Options
	addr   string // host:port
	prefix string
	ctl    *rabbitmq.Ctl
	clean  *rabbitmq.Cleaner

	mu   sync.Mutex
	envs int
}

// Open checks that a broker answers at o.URL and that rabbitmqctl reaches
// its node, and returns the Server. Close it when done.
func Open(ctx context.Context, o Options) (*Server, error) {
	if o.URL == "" {
		o.URL = rabbitmq.DefaultURL
	}
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "amqp" || u.Host == "" {
		return nil, fmt.Errorf("conform: broker URL %q: want amqp://user:pass@host:port/vhost", o.URL)
	}
	addr, err := amqpproxy.BrokerAddr(o.URL)
	if err != nil {
		return nil, err
	}
	t := &Server{opts: o, addr: addr, prefix: rabbitmq.UniqueName("lpconf-") + "-"}
	t.clean = &rabbitmq.Cleaner{URL: o.URL, Name: t.prefix + "admin", Reason: "lockprover conform cleanup", Rounds: 5}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := t.clean.Connect(dctx); err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrNoBroker, u.Redacted(), err)
	}
	t.ctl = rabbitmq.NewCtl(o.Ctl, rabbitmq.VhostOf(o.URL), o.PlainCtl)
	t.clean.Ctl = t.ctl
	if _, err := t.ctl.QueueNames(ctx, t.prefix); err != nil {
		t.Close()
		return nil, fmt.Errorf("conform: rabbitmqctl does not reach the broker's node (conform needs it to inspect queues and close connections): %w", err)
	}
	return t, nil
}

// Prefix is what every queue and connection name of this Server starts
// with.
func (t *Server) Prefix() string { return t.prefix }

// FastCtl reports whether queries go through the rabbitmqctl eval session
// (about a millisecond each) rather than plain commands (about a second).
func (t *Server) FastCtl() bool { return t.ctl.Fast() }

// CtlSessionErr is why the rabbitmqctl eval session did not start, when
// one was asked for and queries are plain commands.
func (t *Server) CtlSessionErr() error { return t.ctl.SessionErr() }

// ctlBudget bounds one step that asks rabbitmqctl (an inspection, a
// fault): a step runs a few queries, and plain rabbitmqctl boots an Erlang
// VM for each, which took over 20s apiece on a loaded machine (a minute
// for a forced close's three queries was once not enough).
func (t *Server) ctlBudget() time.Duration {
	if t.FastCtl() {
		return time.Minute
	}
	return 5 * time.Minute
}

// Close deletes every queue whose name starts with the Server's prefix and
// releases the Server's resources.
func (t *Server) Close() error {
	var err error
	if t.ctl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = t.Cleanup(ctx, t.prefix)
		cancel()
		t.ctl.Close()
	}
	t.clean.Close()
	return err
}

// Cleanup deletes every queue whose name starts with prefix (which must
// start with the Server's own prefix), closing the connections of this
// Server that still hold one of them exclusively.
func (t *Server) Cleanup(ctx context.Context, prefix string) error {
	if !strings.HasPrefix(prefix, t.prefix) {
		return fmt.Errorf("conform: cleanup prefix %q is not under %q", prefix, t.prefix)
	}
	left, err := t.clean.Cleanup(ctx, prefix)
	switch {
	case left != nil && err == nil:
		err = errors.New("queues remain")
		fallthrough
	case left != nil:
		return fmt.Errorf("conform: cleaning up %s*: %w", prefix, err)
	case err != nil:
		return fmt.Errorf("conform: %w", err)
	}
	return nil
}

// NewEnv returns a fresh Env with a name prefix of its own under the
// Server's (Env.Prefix). Close it, then Cleanup its Prefix.
func (t *Server) NewEnv() *Env {
	t.mu.Lock()
	t.envs++
	n := t.envs
	t.mu.Unlock()
	return &Env{
		t:       t,
		prefix:  fmt.Sprintf("%s%d-", t.prefix, n),
		start:   time.Now(),
		proxies: amqpproxy.NewSet(t.opts.URL),
		dialled: map[string][]dialled{},
		names:   map[string]string{},
		pids:    map[string]string{},
		cut:     map[string]bool{},
	}
}

// Env is semantics.Env on a real RabbitMQ broker.
//
//   - Dial: each table connection ("A", "B", ...) goes through its own
//     fault proxy (adapters/servers/rabbitmq/amqpproxy) and is dialled with the amqp091-go
//     adapter (or Options.Client), with connection_name "<prefix><A>#<n>"
//     (n counts A's dials).
//   - Inspect: the queue as rabbitmqctl's list_queues sees it (durable,
//     auto_delete, owner_pid, messages_ready, consumers). Messages are the
//     ready ones, as in the simulator. The owner's pid is mapped back to
//     the table's connection name through list_connections'
//     connection_name (cached); an owner that is not one of this Env's
//     connections shows as "?<pid>".
//   - Fault: "partition" and "heal" are the connection's proxy's Partition
//     and Heal. "close-socket" is its proxy's Kill (both sockets close, no
//     AMQP close). "force-close" is rabbitmqctl close_connection on every
//     connection of that name the broker lists (retried for up to 3 s
//     until one appears). Both return once the client has noticed (its
//     Err is set; not waited for while partitioned, as the client cannot
//     know), as the simulator's client notices at once. With Settle
//     they also wait until the broker holds nothing of those connections
//     any more (process, channels, exclusive queues).
//   - Settle also waits, after a channel closed (channel.close, or a
//     channel error), before the next operation or inspection, until the
//     broker runs exactly as many channel processes for this Env's
//     connections as the clients have open channels. RabbitMQ requeues a
//     closed channel's unacknowledged messages and drops its consumers
//     when the channel process ends, which can be after close-ok: a purge
//     sent at once on another connection found the queue empty, and the
//     message back a moment later, in 14 of 1000 runs here.
//   - StopBroker and StartBroker are rabbitmqctl stop_app and start_app,
//     refused unless the Server allows restarts.
//   - Now is the real time since the Env was made; Sleep sleeps.
type Env struct {
	t      *Server
	prefix string
	start  time.Time
	// Settle makes the Env wait for the broker's asynchronous tidying up
	// after a connection or a channel ends (see Env). The simulator does
	// the same at once, or, after a socket closes, 5 to 37 virtual ms
	// later; a comparison that must not depend on those races sets this
	// (and waits as long in the simulator).
	Settle bool

	proxies *amqpproxy.Set // one per table connection

	mu      sync.Mutex
	dialled map[string][]dialled // by table connection name
	names   map[string]string    // connection_name -> table connection name
	pids    map[string]string    // broker pid -> connection_name
	cut     map[string]bool      // table connections whose proxy is partitioned
	failed  error                // the first failure of the Env's own machinery
	dirty   bool                 // a channel closed since the last settle
}

// harness records err, if any, as a failure of the Env's own machinery
// (rabbitmqctl), as opposed to something the broker did, and returns it.
func (e *Env) harness(err error) error {
	if err != nil {
		e.mu.Lock()
		if e.failed == nil {
			e.failed = err
		}
		e.mu.Unlock()
	}
	return err
}

// Err returns the first failure of the Env's own machinery (a rabbitmqctl
// query that failed), or nil. A run whose Env failed proves nothing either
// way.
func (e *Env) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

type dialled struct {
	name string // connection_name
	conn *conn
}

var _ semantics.Env = (*Env)(nil)

// Prefix is what the names of this Env's queues and connections start
// with; pass it to semantics.Run and to Server.Cleanup.
func (e *Env) Prefix() string { return e.prefix }

// Close closes the Env's proxies, which kills any connection still open.
func (e *Env) Close() { e.proxies.Close() }

// Dial dials the table connection cfg.Name through its proxy.
func (e *Env) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	if cfg.Name == "" {
		return nil, errors.New("conform: Env.Dial needs the table's connection name")
	}
	_, through, err := e.proxies.For(cfg.Name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	name := fmt.Sprintf("%s%s#%d", e.prefix, cfg.Name, len(e.dialled[cfg.Name])+1)
	e.mu.Unlock()
	client := rabbitmq.New
	if e.t.opts.Client != nil {
		client = e.t.opts.Client
	}
	c, err := client(through).Dial(ctx, broker.Config{Heartbeat: cfg.Heartbeat, Name: name})
	if err != nil {
		// The proxy accepts the TCP connection and then finds the broker
		// refusing it: the client sees its connection close, not a refusal.
		// Say what a direct dial would have said.
		if !errors.Is(err, broker.ErrRefused) && refuses(e.t.addr) {
			err = fmt.Errorf("conform: dial: %w (through the proxy: %v)", broker.ErrRefused, err)
		}
		return nil, err
	}
	w := &conn{Conn: c, e: e, name: name}
	e.mu.Lock()
	e.dialled[cfg.Name] = append(e.dialled[cfg.Name], dialled{name, w})
	e.names[name] = cfg.Name
	e.mu.Unlock()
	return w, nil
}

// settle waits, with Settle and after a channel closed, until the broker
// runs as many channel processes for this Env's connections as their
// clients have open.
func (e *Env) settle() error {
	e.mu.Lock()
	dirty := e.Settle && e.dirty
	e.dirty = false
	e.mu.Unlock()
	if !dirty {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		want := 0
		e.mu.Lock()
		for _, ds := range e.dialled {
			for _, d := range ds {
				if d.conn.Err() == nil {
					want += d.conn.open
				}
			}
		}
		e.mu.Unlock()
		got, err := e.t.ctl.Channels(e.prefix)
		if err != nil {
			return e.harness(err)
		}
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return e.harness(fmt.Errorf("conform: the broker runs %d channels for %s*, the clients have %d open, 10 s after a channel closed", got, e.prefix, want))
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// conn is a table connection: it counts its open channels for settle.
type conn struct {
	broker.Conn
	e    *Env
	name string // its connection_name
	open int    // channels open as far as the client knows; under e.mu
}

func (c *conn) Channel(ctx context.Context) (broker.Channel, error) {
	if err := c.e.settle(); err != nil {
		return nil, err
	}
	ch, err := c.Conn.Channel(ctx)
	if err != nil {
		return nil, err
	}
	c.e.mu.Lock()
	c.open++
	c.e.mu.Unlock()
	return &channel{Channel: ch, c: c}, nil
}

// Close closes the connection and, with Settle, waits until the broker
// holds nothing of it: RabbitMQ 4.3.6 may answer connection.close before
// it has deleted the connection's exclusive queues (broker-semantics.md,
// 1b, row 6.8), which the next step would race, as it would a kill's
// release.
func (c *conn) Close() error {
	if err := c.e.settle(); err != nil {
		return err
	}
	if !c.e.Settle {
		return c.Conn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.e.t.ctlBudget())
	defer cancel()
	conns, err := c.e.t.ctl.Connections(ctx, c.name)
	if err != nil {
		return c.e.harness(err)
	}
	var pids []string
	for pid, name := range conns {
		if name == c.name {
			pids = append(pids, pid)
		}
	}
	if err := c.Conn.Close(); err != nil {
		return err
	}
	return c.e.awaitRelease(ctx, pids)
}

// channel is a table channel: it tells its connection when it closes.
type channel struct {
	broker.Channel
	c      *conn
	closed bool // under c.e.mu
}

// before settles the broker before an operation.
func (ch *channel) before() error { return ch.c.e.settle() }

// after notes a channel closed by the broker (a channel-level error it
// sent).
func (ch *channel) after(err error) error {
	var be *broker.Error
	if errors.As(err, &be) && be.Server && !be.Connection {
		ch.gone()
	}
	return err
}

func (ch *channel) gone() {
	e := ch.c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if !ch.closed {
		ch.closed = true
		ch.c.open--
		e.dirty = true
	}
}

func (ch *channel) Confirm(ctx context.Context) error {
	if err := ch.before(); err != nil {
		return err
	}
	return ch.after(ch.Channel.Confirm(ctx))
}

func (ch *channel) Declare(ctx context.Context, name string, o broker.DeclareOptions) (broker.Queue, error) {
	if err := ch.before(); err != nil {
		return broker.Queue{}, err
	}
	q, err := ch.Channel.Declare(ctx, name, o)
	return q, ch.after(err)
}

func (ch *channel) Delete(ctx context.Context, name string, o broker.DeleteOptions) (int, error) {
	if err := ch.before(); err != nil {
		return 0, err
	}
	n, err := ch.Channel.Delete(ctx, name, o)
	return n, ch.after(err)
}

func (ch *channel) Publish(ctx context.Context, p broker.Publishing) (broker.Confirmation, error) {
	if err := ch.before(); err != nil {
		return broker.Confirmation{}, err
	}
	c, err := ch.Channel.Publish(ctx, p)
	return c, ch.after(err)
}

func (ch *channel) Consume(ctx context.Context, queue string, exclusive bool) (string, error) {
	if err := ch.before(); err != nil {
		return "", err
	}
	tag, err := ch.Channel.Consume(ctx, queue, exclusive)
	return tag, ch.after(err)
}

func (ch *channel) Get(ctx context.Context, queue string) (bool, error) {
	if err := ch.before(); err != nil {
		return false, err
	}
	ok, err := ch.Channel.Get(ctx, queue)
	return ok, ch.after(err)
}

func (ch *channel) Purge(ctx context.Context, queue string) (int, error) {
	if err := ch.before(); err != nil {
		return 0, err
	}
	n, err := ch.Channel.Purge(ctx, queue)
	return n, ch.after(err)
}

func (ch *channel) Bind(ctx context.Context, queue, exchange, key string) error {
	if err := ch.before(); err != nil {
		return err
	}
	return ch.after(ch.Channel.Bind(ctx, queue, exchange, key))
}

func (ch *channel) Close() error {
	if err := ch.before(); err != nil {
		return err
	}
	err := ch.Channel.Close()
	ch.gone()
	return err
}

func refuses(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// Sleep sleeps for d, or until ctx is done, as the real broker's does.
func (e *Env) Sleep(ctx context.Context, d time.Duration) error {
	return rabbitmq.New(e.t.opts.URL).Sleep(ctx, d)
}

// Now is the time since the Env was made.
func (e *Env) Now() time.Duration { return time.Since(e.start) }

// Inspect describes a queue (its full name) from the broker's side.
func (e *Env) Inspect(queue string) (semantics.QueueState, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.t.ctlBudget())
	defer cancel()
	if err := e.settle(); err != nil {
		return semantics.QueueState{}, false, err
	}
	q, ok, err := e.t.ctl.Queue(ctx, queue)
	if err != nil || !ok {
		return semantics.QueueState{}, false, e.harness(err)
	}
	st := semantics.QueueState{Durable: q.Durable, AutoDelete: q.AutoDelete, Messages: q.Messages, Consumers: q.Consumers}
	if q.OwnerPid != "" {
		st.Owner, err = e.owner(ctx, q.OwnerPid)
		if err != nil {
			return semantics.QueueState{}, false, e.harness(err)
		}
	}
	return st, true, nil
}

// owner maps a connection pid to the table's connection name.
func (e *Env) owner(ctx context.Context, pid string) (string, error) {
	e.mu.Lock()
	name, ok := e.pids[pid]
	e.mu.Unlock()
	if !ok {
		conns, err := e.t.ctl.Connections(ctx, e.prefix)
		if err != nil {
			return "", err
		}
		e.mu.Lock()
		for p, n := range conns {
			e.pids[p] = n
		}
		name, ok = e.pids[pid]
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if table, known := e.names[name]; ok && known {
		return table, nil
	}
	return "?" + pid, nil
}

// pidsOf lists the broker pids of the connections dialled as conn that the
// broker still lists.
func (e *Env) pidsOf(ctx context.Context, conn string) ([]string, error) {
	conns, err := e.t.ctl.Connections(ctx, e.prefix+conn+"#")
	if err != nil {
		return nil, err
	}
	var pids []string
	e.mu.Lock()
	for p, n := range conns {
		e.pids[p] = n
		pids = append(pids, p)
	}
	e.mu.Unlock()
	sort.Strings(pids)
	return pids, nil
}

// Fault injects a connection fault on the table connection conn.
func (e *Env) Fault(kind, conn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.t.ctlBudget())
	defer cancel()
	p := e.proxies.Get(conn)
	if p == nil {
		return fmt.Errorf("conform: no connection named %q has been dialled", conn)
	}
	switch kind {
	case "partition":
		p.Partition()
		e.mu.Lock()
		e.cut[conn] = true
		e.mu.Unlock()
		return nil
	case "heal":
		p.Heal()
		e.mu.Lock()
		delete(e.cut, conn)
		e.mu.Unlock()
		return nil
	case "close-socket":
		var pids []string
		if e.Settle {
			var err error
			if pids, err = e.pidsOf(ctx, conn); err != nil {
				return e.harness(err)
			}
		}
		p.Kill()
		if err := e.awaitClient(conn); err != nil {
			return err
		}
		return e.awaitRelease(ctx, pids)
	case "force-close":
		// A connection appears in the broker's list a moment after its
		// handshake: retry for a while if the client has one open.
		open := e.openDials(conn)
		var pids []string
		for deadline := time.Now().Add(3 * time.Second); ; {
			var err error
			if pids, err = e.pidsOf(ctx, conn); err != nil {
				return e.harness(err)
			}
			if len(pids) > 0 || !open || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(pids) == 0 && open {
			return fmt.Errorf("conform: the broker lists no connection named %s%s#*", e.prefix, conn)
		}
		for _, pid := range pids {
			if err := e.t.ctl.CloseConnection(ctx, pid, "lockprover force-close"); err != nil {
				return e.harness(err)
			}
		}
		e.mu.Lock()
		cut := e.cut[conn]
		e.mu.Unlock()
		if !cut {
			if err := e.awaitClient(conn); err != nil {
				return err
			}
		}
		return e.awaitRelease(ctx, pids)
	}
	return fmt.Errorf("conform: unknown fault %q", kind)
}

// openDials reports whether a connection dialled as conn is open as far as
// its client knows.
func (e *Env) openDials(conn string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.dialled[conn] {
		if d.conn.Err() == nil {
			return true
		}
	}
	return false
}

// awaitClient waits until every connection dialled as conn knows it is
// closed.
func (e *Env) awaitClient(conn string) error {
	e.mu.Lock()
	ds := append([]dialled(nil), e.dialled[conn]...)
	e.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range ds {
		for d.conn.Err() == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("conform: the client of %s did not notice its connection closing within 5 s", d.name)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}

// awaitRelease waits, with Settle, until the broker holds nothing of
// the connections with these pids.
func (e *Env) awaitRelease(ctx context.Context, pids []string) error {
	if !e.Settle {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			alive, err := e.t.ctl.Alive(ctx, pid, e.prefix)
			if err != nil {
				return e.harness(err)
			}
			if !alive {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("conform: the broker still holds connection %s 10 s after it closed", pid)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// StopBroker runs rabbitmqctl stop_app, if the Server allows restarts.
func (e *Env) StopBroker() error {
	if !e.t.opts.AllowRestart {
		return errors.New("conform: restarting the broker is not allowed (AllowRestart, --allow-restart)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e.t.ctl.StopApp(ctx)
}

// StartBroker runs rabbitmqctl start_app, if the Server allows restarts,
// and returns once the broker accepts connections again.
func (e *Env) StartBroker() error {
	if !e.t.opts.AllowRestart {
		return errors.New("conform: restarting the broker is not allowed (AllowRestart, --allow-restart)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.t.ctl.StartApp(ctx); err != nil {
		return err
	}
	for refuses(e.t.addr) {
		if ctx.Err() != nil {
			return errors.New("conform: the broker does not accept connections after start_app")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
