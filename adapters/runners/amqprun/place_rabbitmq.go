package amqprun

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// RabbitMQ runs plans against a real broker with real concurrency: every
// process is a goroutine, with a fault proxy of its own in front of the
// broker through which its faults strike and its AMQP methods are counted.
// Each run works on a lock of its own (the plan's name and a random
// suffix) and deletes every queue of it afterwards, also after a failure
// or an interrupt.
type RabbitMQ struct {
	URL string
	// AllowRestart lets plans restart the broker (rabbitmqctl stop_app and
	// start_app), which disturbs everything else using it.
	AllowRestart bool
	// OpTimeout ends an operation that takes longer with an unknown
	// outcome; 0 means 30 s.
	OpTimeout time.Duration
	// Ctl is the command that runs rabbitmqctl on the broker's node (a
	// forced close, a restart, listing an implementation's queues); nil
	// means rabbitmqctl, for a broker on this machine. A broker in a
	// container has docker exec's (rabbitmq.Container.Ctl).
	Ctl []string

	// cluster is the plan's run on a cluster (RabbitMQCluster), whose
	// first node URL and Ctl are.
	cluster *clusterRun
}

// Preflight connects to the broker once, so that a broker out of reach, a
// wrong password or vhost is said at once, before any plan runs (a
// *rabbitmq.PreflightError).
func (t RabbitMQ) Preflight(ctx context.Context) error {
	return rabbitmq.Preflight(ctx, t.URL, 0)
}

// Run executes p against impl on the broker.
func (t RabbitMQ) Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error) {
	for _, f := range p.Nemesis {
		if f.Fault == histories.RestartBroker && !t.AllowRestart {
			return nil, errors.New("the plan restarts the broker: allow it explicitly (--allow-restart)")
		}
	}
	if u, err := url.Parse(t.URL); err != nil || u.Host == "" {
		return nil, fmt.Errorf("broker URL %s: want an amqp:// URL with a user, password, host, port and vhost", rabbitmq.RedactURL(t.URL))
	}
	lock := rabbitmq.UniqueName(p.Lock + "-")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, listed := impl.(Foreign)
	if listed {
		// Started now, once a process, not in a clean-up after Ctrl-C
		// (an Erlang VM takes seconds to start beside the suite).
		lister(t.Ctl, rabbitmq.VhostOf(t.URL))
	}
	// The plan's clients and admins start together: their processes'
	// start-up is over before the clock starts.
	defer prover.Warm(ctx, impl, lock, len(p.Clients)+len(p.Admins))()
	e := &realPlace{t: t, ctx: ctx, start: time.Now(), slots: maxSlots(p) + p.Options.Overshoot + 8, listed: listed,
		proxies: t.proxies(), ctl: rabbitmq.NewCtl(t.Ctl, rabbitmq.VhostOf(t.URL), true), paused: map[string]bool{}}
	defer e.ctl.Close()
	if e.t.OpTimeout == 0 {
		e.t.OpTimeout = 30 * time.Second
	}
	defer prover.Leave("the queues of lock " + lock + " on " + rabbitmq.RedactURL(t.URL))()
	defer func() {
		if what := e.cleanup(lock); what != "" {
			prover.Leave(what)
		}
	}()
	r := newRunner(p, impl, e, lock)
	r.begin()
	e.wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.settleErr != nil {
		return nil, fmt.Errorf("the cluster could not be made one again before the probe: %w", e.settleErr)
	}
	return r.result()
}

// proxies is the run's set of proxies: each in front of the broker, or
// of its process's node of a cluster.
func (t RabbitMQ) proxies() *amqpproxy.Set {
	if t.cluster != nil {
		return t.cluster.proxies()
	}
	return amqpproxy.NewSet(t.URL)
}

type realPlace struct {
	t       RabbitMQ
	ctx     context.Context
	start   time.Time
	wg      sync.WaitGroup
	proxies *amqpproxy.Set // a process's, started the first time it is asked for
	ctl     *rabbitmq.Ctl  // plain rabbitmqctl commands, for a forced close and a restart

	slots int // the highest slot a plan can reach, for Queues
	// listed: the lock's queues are also those the broker lists under its
	// name (an implementation in processes may name its queues as it
	// likes: "some equivalent of N-1-A", the spec says), see lockQueues.
	listed  bool
	listing []string // what the broker listed under the lock, once listed
	// listErr is why the last Queues could not list the broker's queues
	// (listFailed).
	listErr error

	mu     sync.Mutex
	paused map[string]bool
	// settleErr is why the cluster could not be brought back to one
	// before the probe: the plan's verdicts would judge the harness, so
	// the plan could not run.
	settleErr error
}

func (e *realPlace) Go(name string, fn func(broker.Broker)) {
	_, u, err := e.proxies.For(name)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err != nil {
			return
		}
		fn(&procBroker{Broker: rabbitmq.New(u), url: u, ctx: e.ctx})
	}()
}

// procBroker is a process's view of the broker: through its proxy, with
// sleeps that end when the run is interrupted. URL is for implementations
// that run in processes of their own.
type procBroker struct {
	broker.Broker
	url string
	ctx context.Context
}

func (b *procBroker) URL() string { return b.url }

func (b *procBroker) Sleep(ctx context.Context, d time.Duration) error {
	if err := b.ctx.Err(); err != nil {
		return err
	}
	return b.Broker.Sleep(b.ctx, d)
}

func (e *realPlace) Now() int64 { return int64(time.Since(e.start)) }

// After runs f once d has passed, unless the run is interrupted first: then
// the run does not wait out d (a fault's end, say) before it cleans up.
func (e *realPlace) After(d time.Duration, f func()) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			if e.ctx.Err() == nil {
				f()
			}
		case <-e.ctx.Done():
		}
	}()
}

func (e *realPlace) AfterMethods(name string, n int, f func()) {
	if px, _, err := e.proxies.For(name); err == nil {
		px.AfterMethods(n, func() {
			if e.ctx.Err() == nil {
				f()
			}
		})
	}
}

func (e *realPlace) Hold(b broker.Broker, name string) {
	for {
		e.mu.Lock()
		p := e.paused[name]
		e.mu.Unlock()
		if !p || b.Sleep(context.Background(), 10*time.Millisecond) != nil {
			return
		}
	}
}

func (e *realPlace) OpContext(wait bool) (context.Context, context.CancelFunc) {
	d := e.t.OpTimeout
	if wait {
		d = 3 * d
	}
	return context.WithTimeout(e.ctx, d)
}

func (e *realPlace) Cost(name string) broker.Cost {
	px, _, err := e.proxies.For(name)
	if err != nil {
		return broker.Cost{Methods: map[string]int{}}
	}
	return px.Counts().Sent
}

// Strike strikes a (fault).
func (e *realPlace) Strike(a run.Aim) error { return e.fault(a.Fault, a.Process) }

// End ends a: fault strikes its end (resume, heal).
func (e *realPlace) End(a run.Aim) error { return e.fault(endOf(a), a.Process) }

// fault strikes through the process's proxy: a kill closes both sides of
// its sockets (the broker sees them close), a pause stops its bytes and
// holds it between operations, a partition stops its bytes, a dropped reply
// is the proxy's. A forced close and a restart go through rabbitmqctl.
func (e *realPlace) fault(fault, target string) error {
	if e.t.cluster != nil {
		if handled, err := e.t.cluster.fault(e.ctx, fault, target); handled {
			return err
		}
	}
	if fault == histories.RestartBroker {
		return e.restart()
	}
	px, _, err := e.proxies.For(target)
	if err != nil {
		return err
	}
	switch fault {
	case histories.Kill:
		px.Kill()
	case histories.Pause:
		e.setPaused(target, true)
		px.Partition()
	case histories.Resume:
		px.Heal()
		e.setPaused(target, false)
	case histories.Partition:
		px.Partition()
	case histories.Heal:
		px.Heal()
	case histories.DropReply:
		return px.DropReply("*")
	case histories.ForceClose:
		// The run's context: a Ctrl-C does not wait for a rabbitmqctl
		// that is slow to start (the run is discarded then).
		return e.ctl.CloseConnectionsFrom(e.ctx, px.BrokerSide(), "lockprover force-close")
	default:
		return fmt.Errorf("unknown fault %q", fault)
	}
	return nil
}

func (e *realPlace) setPaused(name string, p bool) {
	e.mu.Lock()
	e.paused[name] = p
	e.mu.Unlock()
}

// restart stops and starts the broker's application and waits until it
// answers again.
func (e *realPlace) restart() error {
	if !e.t.AllowRestart {
		return errors.New("restart-broker is not allowed")
	}
	return e.ctl.Restart(context.Background())
}

// Queues probes the lock's queues (lockQueues) with passive declares on a
// connection of its own (rabbitmq.Probe). An exclusive queue answers 405;
// its owner is not known.
func (e *realPlace) Queues(lock string) ([]queueOwner, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := rabbitmq.New(e.t.URL).Dial(ctx, broker.Config{Name: "lockprover-inspect"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	names, listErr := e.lockQueues(ctx, lock)
	e.mu.Lock()
	e.listErr = listErr
	e.mu.Unlock()
	found, err := rabbitmq.Probe(ctx, conn, names)
	if err != nil {
		return e.listInstead(lock, err)
	}
	var out []queueOwner
	for _, q := range found {
		owner := ""
		if q.Exclusive {
			owner = "?"
		}
		out = append(out, queueOwner{name: q.Name, owner: owner})
	}
	return out, nil
}

// listInstead is Queues when a passive declare of one of the lock's
// queues failed (probeErr): on a Khepri cluster, a queue whose delete
// timed out through a cut-off node got no answer for a minute after the
// heal. The broker's own listing (rabbitmqctl) then says which of the
// lock's queues it keeps, their owners unknown: after the final
// destroy every one is a leak, and before it none is judged. Without a
// listing, the error says both why the probe and why the listing failed.
func (e *realPlace) listInstead(lock string, probeErr error) ([]queueOwner, error) {
	if e.t.Ctl == nil {
		return nil, probeErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := e.ctl.QueueNames(ctx, lock)
	if err != nil {
		return nil, fmt.Errorf("%w; and listing the broker's queues instead: %v", probeErr, err)
	}
	var out []queueOwner
	for _, n := range names {
		out = append(out, queueOwner{name: n, how: "listed by rabbitmqctl after " + probeErr.Error()})
	}
	return out, nil
}

// listFailed says why the last Queues could not list the broker's queues
// (nil if it could, or had no need to): the names it probed were then the
// reference's alone.
func (e *realPlace) listFailed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.listErr
}

// listers are the rabbitmqctl sessions that list a vhost's queues for
// every run of this process, one a rabbitmqctl command and vhost, started at the first run that
// needs one and not waited for until a listing is: a plain list_queues
// starts an Erlang VM (about a second of CPU), and three of them a plan
// starved a loaded machine's implementation processes of the CPU to
// answer their init in time; and the session's own Erlang VM, waited for
// at a run's start, held up a Ctrl-C for up to 20 s beside the suite.
var listers struct {
	sync.Mutex
	m map[string]*pendingCtl
}

// A pendingCtl is a rabbitmqctl session being started.
type pendingCtl struct {
	ready chan struct{} // closed once ctl is set
	ctl   *rabbitmq.Ctl
}

// lister is the session of rabbitmqctl command cmd (nil: rabbitmqctl) on
// the vhost, started now if it was not yet.
func lister(cmd []string, vhost string) *pendingCtl {
	listers.Lock()
	defer listers.Unlock()
	if listers.m == nil {
		listers.m = map[string]*pendingCtl{}
	}
	key := strings.Join(cmd, "\x00") + "\x00" + vhost
	c := listers.m[key]
	if c == nil {
		c = &pendingCtl{ready: make(chan struct{})}
		listers.m[key] = c
		go func() {
			c.ctl = rabbitmq.NewCtl(cmd, vhost, false)
			close(c.ready)
		}()
	}
	return c
}

// queueNames lists the vhost's queues whose names start with prefix, once
// the session has started, or fails when ctx ends first.
func (c *pendingCtl) queueNames(ctx context.Context, prefix string) ([]string, error) {
	select {
	case <-c.ready:
		return c.ctl.QueueNames(ctx, prefix)
	case <-ctx.Done():
		return nil, fmt.Errorf("rabbitmqctl's session had not started: %w", ctx.Err())
	}
}

// lockQueues is every queue of the lock that may exist: the reference's
// names (queueNames), and, for an implementation in processes, every
// queue the broker lists whose name starts with the lock's (unique to the
// run), whatever the implementation called it, so that no-leak and the
// clean-up judge what is really there. Listing needs rabbitmqctl on the
// broker's machine; without it, or when ctx ends before the listing,
// only the reference's names are known, and the error says why.
// The listing is made once a run (its processes have ended by then, and
// make no queue after), through the process's one rabbitmqctl session for
// the vhost (lister).
func (e *realPlace) lockQueues(ctx context.Context, lock string) ([]string, error) {
	names := e.queueNames(lock)
	if !e.listed {
		return names, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listing == nil {
		l, err := lister(e.t.Ctl, rabbitmq.VhostOf(e.t.URL)).queueNames(ctx, lock)
		if err != nil {
			return names, err
		}
		e.listing = append([]string{}, l...)
	}
	listed := e.listing
	for _, n := range listed {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// Notice polls, once every process is done, until no connection of the
// plan is open through its proxies and the broker shows none of the
// lock's queues held exclusively or consumed from: then it has deleted
// the gone connections' exclusive queues and requeued their consumers'
// messages, and the probe may start; or until limit (heartbeats let the
// broker notice the rest).
func (e *realPlace) Notice(b broker.Broker, lock string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(e.ctx, limit)
	defer cancel()
	conn, err := rabbitmq.New(e.t.URL).Dial(ctx, broker.Config{Name: "lockprover-notice"})
	if err != nil {
		<-ctx.Done()
		return
	}
	defer conn.Close()
	names, _ := e.lockQueues(ctx, lock)
	for d := 5 * time.Millisecond; !e.quiet(ctx, conn, names); d = min(2*d, 200*time.Millisecond) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// quiet says whether no proxy of the plan has a connection open and none
// of the lock's queues (names) is exclusive or has a consumer.
func (e *realPlace) quiet(ctx context.Context, conn broker.Conn, names []string) bool {
	for _, px := range e.proxies.All() {
		if px.Open() > 0 {
			return false
		}
	}
	ch, err := conn.Channel(ctx)
	if err != nil {
		return false
	}
	defer func() {
		if ch != nil {
			ch.Close()
		}
	}()
	for _, n := range names {
		q, err := ch.Declare(ctx, n, broker.DeclareOptions{Passive: true})
		switch broker.Code(err) {
		case broker.NotFound:
			// The channel is closed: the next name needs another (none if
			// the connection is gone: an interrupt, say).
			if ch, err = conn.Channel(ctx); err != nil {
				ch = nil
				return false
			}
		case 0:
			if err != nil || q.Consumers > 0 {
				return false
			}
		default:
			return false // exclusive (405), or the broker is in trouble
		}
	}
	return true
}

// queueNames is every queue of the lock a plan can make: its
// administration mutex and A and B queues up to the slots it can reach.
func (e *realPlace) queueNames(lock string) []string {
	names := []string{lock}
	for l := 1; l <= e.slots; l++ {
		names = append(names, amqplocks.SlotQueue(lock, l), amqplocks.HolderQueue(lock, l))
	}
	return names
}

func (e *realPlace) partitionHandling() string {
	if e.t.cluster == nil {
		return ""
	}
	return e.t.cluster.t.Cluster.Options().PartitionHandling
}

// Settle brings a cluster back to one before the quiescent probe (nothing
// on a single broker). A cluster that could not be brought back is said in
// the run's problems by the probe's failures, and in the target's log.
func (e *realPlace) Settle() {
	if e.t.cluster != nil {
		if err := e.t.cluster.settle(e.ctx); err != nil {
			e.mu.Lock()
			e.settleErr = err
			e.mu.Unlock()
		}
	}
}

// cleanup ends every connection of the run, then deletes every queue of
// the lock (lockQueues; rabbitmq.Cleanup, retrying while the broker releases exclusive
// ones, for up to 30 s), and closes the proxies.
func (e *realPlace) cleanup(lock string) (leftover string) {
	for _, px := range e.proxies.All() {
		px.Kill()
	}
	if e.t.cluster != nil && e.ctx.Err() != nil {
		// Interrupted: the run removes the whole cluster, whose nodes may
		// be cut off, paused or down; nothing of this plan needs deleting
		// first.
		e.proxies.Close()
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// After Ctrl-C, the listing gets a few seconds, not thirty: what it
	// could not list is said to be left behind.
	lctx, lcancel := ctx, context.CancelFunc(func() {})
	if e.ctx.Err() != nil {
		lctx, lcancel = context.WithTimeout(ctx, 3*time.Second)
	}
	names, err := e.lockQueues(lctx, lock)
	lcancel()
	rabbitmq.Cleanup(ctx, e.t.URL, lock, names...)
	e.proxies.Close()
	if err != nil {
		return fmt.Sprintf("any queue of lock %s on %s that the implementation named itself (the clean-up could not list them: %v)", lock, rabbitmq.RedactURL(e.t.URL), err)
	}
	return ""
}
