// Package amqpgo proves an amqp-locks implementation written in Go from
// its own go test, with no broker and no process protocol: the user says
// how one client's handle on the lock is made from an AMQP URL (Impl.Open),
// and each client of a plan gets a handle of its own, connected to the
// simulated broker served on loopback for it alone (adapters/served/amqpserve),
// called in the test's process. The simulator orders what the handles send,
// as it orders an implementation's processes: a plan's history, its
// replay from the plan's log, its shrinking and its verdicts are those of
// `lockprover prove --impl` on the simulator.
//
//	func TestMyLock(t *testing.T) {
//		lockprover.Check(t, lockprover.Config{Subject: amqpgo.Impl{Open: open}.Config()})
//	}
//
// What differs from a process: a goroutine cannot be stopped or killed.
// A kill (SIGKILL for a process) is the World's (the client's sockets go
// silent, then its heartbeats time out, as a crashed host's) and the
// handle is abandoned: closed in the background, what it sends then never
// taken into the World. A pause is the World's alone: the client's frames
// wait untaken while it lasts, but its own timers (a heartbeat deadline, a
// context's) run on, where a stopped process's would not. A panic in Open
// fails the run with its stack; one in an operation ends the client as a
// crash, its stack among the run's problems.
package amqpgo

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A Session is what one client's handle is made from.
type Session struct {
	URL  string   // the simulated broker, served on loopback for this client alone
	URLs []string // on a simulated cluster, a URL per node (its own first); else URL alone
	Kind string   // the lock's kind: histories.Semaphore or histories.Mutex
	Lock string   // the lock's name (N in the spec), unique to the run
	// Client names the client: c1, c2, ... admin1, ... probe.
	Client string
	// Heartbeat is the heartbeat the client asks the broker for (0: off).
	Heartbeat time.Duration
}

// An Impl is an amqp-locks implementation written in Go.
type Impl struct {
	// Open makes one client's handle on the lock s names, connected to
	// s.URL; it may connect lazily, at the first operation. An error is
	// a connection that could not be made (a fault may have the broker
	// down): it is tried again, as a process's init is. Its handle's
	// errors follow amqprun.Client's contract: a *amqprun.Failure for an
	// operation that certainly did not take effect, any other for an
	// outcome unknown.
	Open func(ctx context.Context, s Session) (amqprun.Client, error)
	// Name says what is proven, in words; "" means "a Go lock".
	Name string
	// HeartbeatClose says the handle's client library ends a connection
	// abruptly only when its heartbeat deadline passes, as amqp091-go
	// does: such an end is then the client's own, not a lie
	// (docs/protocol-amqp-locks.md#init, "abrupt_close").
	HeartbeatClose bool
	// Timeout bounds each call, in real time: a call not ended within it
	// is hung, and its client ended as a crash; 0 means 30 s.
	Timeout time.Duration
	// Speedup is how many times faster than real time the World's clock
	// may run where it jumps (amqpserve.Options.Speedup): 0 means 20, so
	// that a timer the lock runs between its calls (a poll, a reconnect's
	// backoff) fires in a plan's gaps; a negative value sets no bound,
	// which a lock that acts only when called takes safely, and runs
	// plans as fast as the simulator goes (docs/served.md, "Clocks").
	Speedup float64
}

// Config is the amqp-locks family proving i on the simulated broker
// (RabbitMQ 3.10.8's behaviour) served on the wire, with every fault: a
// prover.Subject for lockprover.Check. Set its Kind for a mutex, its
// Scope to narrow the plans, its Target's Cluster for a cluster.
func (i Impl) Config() amqprun.Config {
	return amqprun.Config{Impl: i, Target: amqprun.Simulator{Wire: amqpprotocol.Wire("", i.Speedup)}}
}

// String is what is proven.
func (i Impl) String() string {
	if i.Name != "" {
		return i.Name
	}
	return "a Go lock"
}

// InTest says the lock runs in the test's process: its counterexamples
// replay in its test (prover.InTest), not by the lockprover command.
func (Impl) InTest() bool { return true }

// NamesItsQueues marks the implementation as one whose queues are found on
// the broker by their lock's unique name (amqprun.Foreign).
func (Impl) NamesItsQueues() {}

// Connect makes process name's handle on the served broker b.
func (i Impl) Connect(ctx context.Context, b broker.Broker, p *amqprun.Plan, name string) (amqprun.Client, error) {
	u, isURL := b.(interface{ URL() string })
	w, waits := b.(process.Waiter)
	if !isURL || !waits {
		return nil, &prover.ImplementationError{Msg: "a Go lock runs on the simulated broker served on the wire (amqpgo.Impl.Config's target)"}
	}
	if e, ok := b.(interface{ Err() error }); ok && e.Err() != nil {
		return nil, e.Err() // the simulator could not be served to it
	}
	if i.Open == nil {
		return nil, &prover.ImplementationError{Msg: "amqpgo.Impl: Open is nil: say how a client's handle on the lock is made"}
	}
	s := Session{URL: u.URL(), URLs: []string{u.URL()}, Kind: p.Kind, Lock: p.Lock, Client: name, Heartbeat: p.Options.Heartbeat()}
	if n, ok := b.(interface{ URLs() []string }); ok {
		s.URLs = n.URLs()
	}
	c := &client{w: w, name: name, timeout: i.Timeout, heartbeatClose: i.HeartbeatClose}
	if c.timeout == 0 {
		c.timeout = 30 * time.Second
	}
	var h amqprun.Client
	err := c.do(ctx, "Open", func(ctx context.Context) (err error) {
		h, err = i.Open(ctx, s)
		return err
	})
	if why := c.Crashed(); why != "" {
		return nil, &prover.ImplementationError{Msg: why}
	}
	if err != nil {
		// Tried again, as a process's init that could not reach the
		// broker (a fault may have it down); the probe's is a problem.
		return nil, fmt.Errorf("%s: Open: %w", name, err)
	}
	if h == nil {
		return nil, &prover.ImplementationError{Msg: fmt.Sprintf("%s: Open returned no handle and no error", name)}
	}
	c.h = h
	return c, nil
}

// client is one handle, as the runner's amqprun.ProcessClient: each call
// runs in a goroutine of its own while the World takes what it sends
// (the served process's Await), so that the simulator, not the Go
// scheduler, orders the clients.
type client struct {
	w              process.Waiter
	h              amqprun.Client
	name           string
	timeout        time.Duration
	heartbeatClose bool

	mu      sync.Mutex
	crashed string // why the handle is gone: it panicked, or hung
	killed  bool
}

// do runs f (the handle's call what) and waits for it through the served
// process: until it returns, hangs past the timeout, or ctx ends.
func (c *client) do(ctx context.Context, what string, f func(context.Context) error) error {
	if why := c.Crashed(); why != "" {
		return errors.New(why)
	}
	fctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	var err error
	go func() {
		defer close(ready)
		defer func() {
			if v := recover(); v != nil {
				c.crash(fmt.Sprintf("%s: %s panicked: %v\n%s", c.name, what, v, debug.Stack()))
				err = fmt.Errorf("%s panicked: %v", what, v)
			}
		}()
		err = f(fctx)
	}()
	c.w.Sending()
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	switch c.w.Await(ready, t.C, ctx.Done()) {
	case process.Ready:
		cancel()
		return err
	case process.Expired:
		cancel()
		c.crash(fmt.Sprintf("%s: hung: %s did not return within %v", c.name, what, c.timeout))
		return fmt.Errorf("%s hung", what)
	default:
		cancel()
		return ctx.Err()
	}
}

func (c *client) crash(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed == "" {
		c.crashed = why
	}
}

// Crashed says why the handle is gone (it panicked, or hung), or "".
func (c *client) Crashed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

// Signal is a process's fault as a goroutine can take it: SIGKILL
// abandons the handle (the World has silenced its sockets), closed in the
// background; a pause and its resume are the World's alone.
func (c *client) Signal(sig syscall.Signal) {
	if sig != syscall.SIGKILL {
		return
	}
	c.mu.Lock()
	first := !c.killed
	c.killed = true
	c.mu.Unlock()
	if first && c.h != nil {
		go c.h.Close() // what it sends is never taken: the served process is gone
	}
}

// ClosesOnlyOnHeartbeat is Impl.HeartbeatClose.
func (c *client) ClosesOnlyOnHeartbeat() bool { return c.heartbeatClose }

func (c *client) Acquire(ctx context.Context) (slot int, err error) {
	err = c.do(ctx, "Acquire", func(ctx context.Context) (err error) {
		slot, err = c.h.Acquire(ctx)
		return err
	})
	return slot, err
}

func (c *client) Verify(ctx context.Context, slot int) (held bool, err error) {
	err = c.do(ctx, "Verify", func(ctx context.Context) (err error) {
		held, err = c.h.Verify(ctx, slot)
		return err
	})
	return held, err
}

func (c *client) Release(ctx context.Context, slot int) error {
	return c.do(ctx, "Release", func(ctx context.Context) error { return c.h.Release(ctx, slot) })
}

func (c *client) Create(ctx context.Context, slots int) error {
	return c.do(ctx, "Create", func(ctx context.Context) error { return c.h.Create(ctx, slots) })
}

func (c *client) Change(ctx context.Context, delta int) (from, to int, err error) {
	err = c.do(ctx, "Change", func(ctx context.Context) (err error) {
		from, to, err = c.h.Change(ctx, delta)
		return err
	})
	return from, to, err
}

func (c *client) Destroy(ctx context.Context) (from int, err error) {
	err = c.do(ctx, "Destroy", func(ctx context.Context) (err error) {
		from, err = c.h.Destroy(ctx)
		return err
	})
	return from, err
}

func (c *client) Count(ctx context.Context) (n int, err error) {
	err = c.do(ctx, "Count", func(ctx context.Context) (err error) {
		n, err = c.h.Count(ctx)
		return err
	})
	return n, err
}

func (c *client) Wait(ctx context.Context, slot int) error {
	return c.do(ctx, "Wait", func(ctx context.Context) error { return c.h.Wait(ctx, slot) })
}

// Broken is the handle's own: it reads its state, sending nothing.
func (c *client) Broken() bool { return c.Crashed() != "" || c.h.Broken() }

// Close closes the handle through the served process (its
// connection.close is a step of the World), unless it is gone.
func (c *client) Close() error {
	c.mu.Lock()
	gone := c.killed || c.crashed != ""
	c.mu.Unlock()
	if gone {
		return nil
	}
	return c.do(context.Background(), "Close", func(context.Context) error { return c.h.Close() })
}
