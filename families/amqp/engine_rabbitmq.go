package amqp

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/proxy"
	"github.com/lockprover/lockprover/adapters/rabbitmq"
	"github.com/lockprover/lockprover/amqplocks"
	"github.com/lockprover/lockprover/amqplocks/broker"
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
	u, err := url.Parse(t.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("broker URL %s: want an amqp:// URL with a user, password, host, port and vhost", rabbitmq.RedactURL(t.URL))
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "5672")
	}
	lock := rabbitmq.UniqueName(p.Lock + "-")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &realEngine{t: t, addr: addr, ctx: ctx, start: time.Now(), slots: maxSlots(p) + p.Options.Overshoot + 8,
		proxies: map[string]*proxy.Proxy{}, paused: map[string]bool{}}
	if e.t.OpTimeout == 0 {
		e.t.OpTimeout = 30 * time.Second
	}
	defer e.cleanup(lock)
	r := newRunner(p, impl, e, lock)
	r.begin()
	e.wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.result()
}

type realEngine struct {
	t     RabbitMQ
	addr  string
	ctx   context.Context
	start time.Time
	wg    sync.WaitGroup

	slots int // the highest slot a plan can reach, for Queues

	mu      sync.Mutex
	proxies map[string]*proxy.Proxy
	paused  map[string]bool
}

// proxyFor returns the process's proxy, started the first time.
func (e *realEngine) proxyFor(name string) (*proxy.Proxy, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.proxies[name]; p != nil {
		return p, nil
	}
	p, err := proxy.Listen(e.addr)
	if err != nil {
		return nil, err
	}
	e.proxies[name] = p
	return p, nil
}

func (e *realEngine) Go(name string, fn func(broker.Broker)) {
	px, err := e.proxyFor(name)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err != nil {
			return
		}
		u, _ := px.URL(e.t.URL)
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

func (e *realEngine) Now() int64 { return int64(time.Since(e.start)) }

func (e *realEngine) After(d time.Duration, f func()) {
	e.wg.Add(1)
	time.AfterFunc(d, func() {
		defer e.wg.Done()
		if e.ctx.Err() == nil {
			f()
		}
	})
}

func (e *realEngine) AfterMethods(name string, n int, f func()) {
	if px, err := e.proxyFor(name); err == nil {
		px.AfterMethods(n, func() {
			if e.ctx.Err() == nil {
				f()
			}
		})
	}
}

func (e *realEngine) Hold(b broker.Broker, name string) {
	for {
		e.mu.Lock()
		p := e.paused[name]
		e.mu.Unlock()
		if !p || b.Sleep(context.Background(), 10*time.Millisecond) != nil {
			return
		}
	}
}

func (e *realEngine) OpContext(wait bool) (context.Context, context.CancelFunc) {
	d := e.t.OpTimeout
	if wait {
		d = 3 * d
	}
	return context.WithTimeout(e.ctx, d)
}

func (e *realEngine) Cost(name string) model.Cost {
	px, err := e.proxyFor(name)
	if err != nil {
		return model.Cost{Methods: map[string]int{}}
	}
	c := px.Counts()
	return model.Cost{Methods: c.Sent, Connections: c.Connections, Channels: c.Channels}
}

// Fault strikes through the process's proxy: a kill closes both sides of
// its sockets (the broker sees them close), a pause stops its bytes and
// holds it between operations, a partition stops its bytes, a dropped reply
// is the proxy's. A forced close and a restart go through rabbitmqctl.
func (e *realEngine) Fault(fault, target string) error {
	if fault == histories.RestartBroker {
		return e.restart()
	}
	px, err := e.proxyFor(target)
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
		return forceClose(px.BrokerSide())
	default:
		return fmt.Errorf("unknown fault %q", fault)
	}
	return nil
}

func (e *realEngine) setPaused(name string, p bool) {
	e.mu.Lock()
	e.paused[name] = p
	e.mu.Unlock()
}

// forceClose closes the broker's connections whose peer address is one of
// addrs, as rabbitmqctl close_connection does: 320 CONNECTION_FORCED.
func forceClose(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	out, err := exec.Command("rabbitmqctl", "-q", "list_connections", "pid", "name").Output()
	if err != nil {
		return fmt.Errorf("force-close needs rabbitmqctl: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		pid, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		for _, a := range addrs {
			if strings.HasPrefix(name, a+" ") {
				if err := exec.Command("rabbitmqctl", "-q", "close_connection", pid, "lockprover force-close").Run(); err != nil {
					return fmt.Errorf("rabbitmqctl close_connection: %v", err)
				}
			}
		}
	}
	return nil
}

// restart stops and starts the broker's application and waits until it
// answers again.
func (e *realEngine) restart() error {
	if !e.t.AllowRestart {
		return errors.New("restart-broker is not allowed")
	}
	for _, args := range [][]string{{"stop_app"}, {"start_app"}, {"await_startup", "--timeout", "60"}} {
		if err := exec.Command("rabbitmqctl", append([]string{"-q"}, args...)...).Run(); err != nil {
			return fmt.Errorf("rabbitmqctl %s: %v", args[0], err)
		}
	}
	return nil
}

// Queues probes the lock's possible queues (its administration mutex and
// A and B queues up to the slots a plan can reach) with passive declares
// on a connection of its own: it works on any broker, with no management
// access. An exclusive queue answers 405; its owner is not known.
func (e *realEngine) Queues(lock string) ([]queueOwner, error) {
	names := []string{lock}
	for l := 1; l <= e.slots; l++ {
		names = append(names, amqplocks.SlotQueue(lock, l), amqplocks.HolderQueue(lock, l))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := rabbitmq.New(e.t.URL).Dial(ctx, broker.Config{Name: "lockprover-inspect"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []queueOwner
	var ch broker.Channel
	for _, n := range names {
		if ch == nil {
			if ch, err = conn.Channel(ctx); err != nil {
				return nil, err
			}
		}
		_, err := ch.Declare(ctx, n, broker.DeclareOptions{Passive: true})
		switch broker.Code(err) {
		case 0:
			if err != nil {
				return nil, err
			}
			out = append(out, queueOwner{n, ""})
		case broker.ResourceLocked:
			out = append(out, queueOwner{n, "?"})
			ch = nil
		case broker.NotFound:
			ch = nil
		default:
			return nil, err
		}
	}
	return out, nil
}

// cleanup ends every connection of the run, then deletes every queue of
// the lock (retrying while the broker releases exclusive ones), and closes
// the proxies.
func (e *realEngine) cleanup(lock string) {
	e.mu.Lock()
	proxies := e.proxies
	e.mu.Unlock()
	for _, px := range proxies {
		px.Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		qs, err := e.Queues(lock)
		if err == nil && len(qs) == 0 {
			break
		}
		if conn, err := rabbitmq.New(e.t.URL).Dial(ctx, broker.Config{Name: "lockprover-cleanup"}); err == nil {
			for _, q := range qs {
				if ch, err := conn.Channel(ctx); err == nil {
					ch.Delete(ctx, q.name, broker.DeleteOptions{})
				}
			}
			conn.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, px := range proxies {
		px.Close()
	}
}
